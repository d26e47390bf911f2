package eventserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// apiServerIssuer serves what the API server serves of its service account
// issuer: the discovery document and the keys, at their paths.
func apiServerIssuer(t *testing.T) (host string, sign func(iss, aud, sub string, exp time.Time) string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "https://kubernetes.default.svc.cluster.local"
	o := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	o.SetIssuer(issuer)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openid/v1/jwks" {
			r.URL.Path = "/keys"
		}
		o.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(iss, aud, sub string, exp time.Time) string {
		if iss == "" {
			iss = issuer
		}
		return oidctest.SignIDToken(key, "k1", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":%q,"sub":%q,"iat":%d,"exp":%d}`,
			iss, aud, sub, time.Now().Add(-time.Minute).Unix(), exp.Unix()))
	}
}

// Events are taken with a token the API server issued for the audience to
// a ServiceAccount of the handler's namespace (a Trigger's identity), and
// refused otherwise, before anything is read.
func TestEventAuth(t *testing.T) {
	host, sign := apiServerIssuer(t)
	auth, err := NewEventAuth(&rest.Config{Host: host}, "tesk-handler", "tesk")
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	trigger := "system:serviceaccount:tesk:oidc-trigger-tesk-job-finished"
	for _, c := range []struct {
		name, authz, want string
	}{
		{"a Trigger's token", "Bearer " + sign("", "tesk-handler", trigger, later), ""},
		{"no token", "", "no bearer token"},
		{"not a bearer token", "Basic dTpw", "no bearer token"},
		{"another audience", "Bearer " + sign("", "tesk-broker", trigger, later), "audience"},
		{"another issuer", "Bearer " + sign("https://issuer.example", "tesk-handler", trigger, later), "issuer"},
		{"expired", "Bearer " + sign("", "tesk-handler", trigger, time.Now().Add(-time.Second)), "expired"},
		{"a ServiceAccount of another namespace", "Bearer " + sign("", "tesk-handler", "system:serviceaccount:tesk-tasks:tesk-executor", later), "namespace tesk"},
		{"a user, not a ServiceAccount", "Bearer " + sign("", "tesk-handler", "alice", later), "namespace tesk"},
		{"a forged signature", "Bearer " + sign("", "tesk-handler", trigger, later)[:40] + "x", "token refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			if c.authz != "" {
				r.Header.Set("Authorization", c.authz)
			}
			err := auth.Verify(context.Background(), r)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v, want an error naming %q", err, c.want)
			}
		})
	}

	// The handler answers 401 to an event it refuses, before it reads it.
	s := &Server{Runner: &runner.Runner{Config: steps.DefaultConfig()}, Log: zap.NewNop().Sugar(), Auth: auth}
	e := s.Echo()
	for _, c := range []struct {
		authz string
		code  int
	}{{"", http.StatusUnauthorized}, {"Bearer " + sign("", "tesk-handler", trigger, later), http.StatusBadRequest}} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("not an event"))
		if c.authz != "" {
			r.Header.Set("Authorization", c.authz)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Errorf("POST / with %q: %d %s, want %d", c.authz[:min(len(c.authz), 10)], w.Code, w.Body, c.code)
		}
	}
}
