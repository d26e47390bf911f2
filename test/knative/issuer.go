package knative

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
)

// Audience is the audience config/knative's TES API expects (OIDC_AUDIENCE).
const Audience = "tesk"

// Issuer is an OIDC issuer on the node's bridge, so that the TES API's pod
// fetches its discovery document and keys as it would a real issuer's.
type Issuer struct {
	URL string
	key *rsa.PrivateKey
	srv *http.Server
}

// StartIssuer serves an issuer with a key of its own on host (a free port).
func StartIssuer(host string) (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("OIDC issuer on %s: %w", host, err)
	}
	s := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	is := &Issuer{URL: "http://" + l.Addr().String(), key: key, srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}}
	s.SetIssuer(is.URL)
	go func() { _ = is.srv.Serve(l) }()
	return is, nil
}

// Token is a bearer token of the issuer for user sub, valid for an hour.
func (is *Issuer) Token(sub string) string {
	now := time.Now()
	return oidctest.SignIDToken(is.key, "k1", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":%q,"sub":%q,"iat":%d,"exp":%d}`,
		is.URL, Audience, sub, now.Unix(), now.Add(time.Hour).Unix()))
}

// Close stops serving.
func (is *Issuer) Close() { _ = is.srv.Close() }
