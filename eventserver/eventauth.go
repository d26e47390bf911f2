package eventserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"k8s.io/client-go/rest"
)

// EventAuth checks the token a Knative Trigger sends with each event when
// Eventing's authentication-oidc is on and the Trigger's subscriber has an
// audience (EVENTS_AUDIENCE): a token the API server issued (its service
// account issuer, read from its discovery document and keys through the
// API server itself), for the audience, to a ServiceAccount of the
// handler's own namespace (the Triggers' identities, which Eventing
// creates there).
type EventAuth struct {
	Audience string
	// Namespace is the namespace whose ServiceAccounts may send events.
	Namespace string

	base   string // the API server's address
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	next     time.Time // when a failed discovery is tried again
}

// NewEventAuth checks tokens for audience from the ServiceAccounts of
// namespace, with keys read from the API server rc reaches.
func NewEventAuth(rc *rest.Config, audience, namespace string) (*EventAuth, error) {
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	return &EventAuth{Audience: audience, Namespace: namespace, base: strings.TrimRight(rc.Host, "/"), client: client}, nil
}

// discoveryRetry is how long a failed read of the issuer's discovery
// document is not tried again.
const discoveryRetry = 5 * time.Second

// errNoToken is a request without a bearer token.
var errNoToken = errors.New("no bearer token: events are taken only from the Broker's Triggers, with a token for EVENTS_AUDIENCE")

// Verify checks the request's bearer token.
func (a *EventAuth) Verify(ctx context.Context, r *http.Request) error {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(raw) == "" {
		return errNoToken
	}
	v, err := a.tokenVerifier(ctx)
	if err != nil {
		return fmt.Errorf("tokens cannot be checked now: %w", err)
	}
	tok, err := v.Verify(ctx, strings.TrimSpace(raw))
	if err != nil {
		return fmt.Errorf("token refused: %w", err)
	}
	if ns, _, ok := serviceAccountOf(tok.Subject); !ok || ns != a.Namespace {
		return fmt.Errorf("token of %q refused: events are taken only from ServiceAccounts of namespace %s", tok.Subject, a.Namespace)
	}
	return nil
}

// serviceAccountOf splits a ServiceAccount's subject,
// system:serviceaccount:<namespace>:<name>.
func serviceAccountOf(sub string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(sub, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}

// tokenVerifier reads the issuer from the API server's discovery document,
// once, and checks tokens with the keys the API server serves.
func (a *EventAuth) tokenVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	if time.Now().Before(a.next) {
		return nil, errors.New("the API server's service account issuer is not known yet")
	}
	issuer, err := a.issuer(ctx)
	if err != nil {
		a.next = time.Now().Add(discoveryRetry)
		return nil, err
	}
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), a.client), a.base+"/openid/v1/jwks")
	a.verifier = oidc.NewVerifier(issuer, keys, &oidc.Config{ClientID: a.Audience, SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256}})
	return a.verifier, nil
}

func (a *EventAuth) issuer(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/.well-known/openid-configuration", nil)
	if err != nil {
		return "", err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the API server's discovery document: %s", resp.Status)
	}
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&doc); err != nil || doc.Issuer == "" {
		return "", fmt.Errorf("the API server's discovery document names no issuer (%v)", err)
	}
	return doc.Issuer, nil
}
