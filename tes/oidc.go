package tes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
)

// OIDC authenticates callers by their OIDC bearer tokens: signed by the
// issuer's keys (fetched from its discovery document, refreshed when an
// unknown key appears), for the audience, not expired. The token's subject
// owns the tasks it creates; a member of AdminGroup (in the claim
// GroupsClaim) sees every task.
type OIDC struct {
	verifier    *oidc.IDTokenVerifier
	groupsClaim string
	adminGroup  string
}

// OIDCConfig is the access control's configuration.
type OIDCConfig struct {
	Issuer, Audience        string
	GroupsClaim, AdminGroup string
	// Client fetches the issuer's documents (a client with a timeout if
	// nil).
	Client *http.Client
}

// NewOIDC reads the issuer's discovery document. ctx is kept for fetching
// its keys later: it must outlive the server.
func NewOIDC(ctx context.Context, c OIDCConfig) (*OIDC, error) {
	if c.Issuer == "" || c.Audience == "" {
		return nil, errors.New("OIDC needs an issuer and an audience")
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	ctx = oidc.ClientContext(ctx, client)
	p, err := oidc.NewProvider(ctx, c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OIDC issuer %s: %w", c.Issuer, err)
	}
	return &OIDC{
		verifier:    p.Verifier(&oidc.Config{ClientID: c.Audience}),
		groupsClaim: c.GroupsClaim,
		adminGroup:  c.AdminGroup,
	}, nil
}

// Authenticate verifies the request's bearer token.
func (o *OIDC) Authenticate(r *http.Request) (Caller, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Caller{}, errors.New("a bearer token is required (Authorization: Bearer <token>)")
	}
	idt, err := o.verifier.Verify(r.Context(), token)
	if err != nil {
		return Caller{}, fmt.Errorf("the bearer token is not valid: %v", err)
	}
	if idt.Subject == "" {
		return Caller{}, errors.New("the bearer token has no subject")
	}
	c := Caller{Subject: idt.Subject, Label: LabelSafe(idt.Subject)}
	if o.adminGroup != "" && o.groupsClaim != "" {
		var claims map[string]any
		if err := idt.Claims(&claims); err != nil {
			return Caller{}, echo.NewHTTPError(http.StatusForbidden, "the token's claims do not parse: "+err.Error())
		}
		c.All = memberOf(claims[o.groupsClaim], o.adminGroup)
	}
	return c, nil
}

// memberOf reports whether a groups claim (a list of strings, or one
// string) holds the group.
func memberOf(claim any, group string) bool {
	switch v := claim.(type) {
	case string:
		return v == group
	case []any:
		for _, g := range v {
			if s, ok := g.(string); ok && s == group {
				return true
			}
		}
	}
	return false
}

// RetryingOIDC is OIDC whose issuer is read in the background, again and
// again with a growing wait (up to MaxRetryWait) until it answers: a TES API
// started before its issuer is reachable (or with a wrong one) serves, but
// is not ready, and says why, rather than exiting.
type RetryingOIDC struct {
	config OIDCConfig
	mu     sync.RWMutex
	oidc   *OIDC
	reason string
}

// MaxRetryWait bounds the wait between two readings of the issuer.
const MaxRetryWait = time.Minute

// NewRetryingOIDC starts reading the issuer; ctx ends the retries and is
// kept for fetching its keys later.
func NewRetryingOIDC(ctx context.Context, c OIDCConfig, logf func(msg string, kv ...any)) *RetryingOIDC {
	r := &RetryingOIDC{config: c, reason: fmt.Sprintf("reading the OIDC issuer %s", c.Issuer)}
	go func() {
		wait := time.Second
		for {
			o, err := NewOIDC(ctx, c)
			r.mu.Lock()
			if err == nil {
				r.oidc, r.reason = o, ""
				r.mu.Unlock()
				logf("OIDC issuer read", "issuer", c.Issuer)
				return
			}
			r.reason = fmt.Sprintf("%v; trying again in %s", err, wait)
			r.mu.Unlock()
			logf("OIDC issuer not read; not ready", "issuer", c.Issuer, "error", err, "retryIn", wait.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, MaxRetryWait)
		}
	}()
	return r
}

// Ready reports why the access control cannot check tokens yet, or nil.
func (r *RetryingOIDC) Ready() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.oidc == nil {
		return errors.New(r.reason)
	}
	return nil
}

// Authenticate verifies the request's bearer token once the issuer was
// read; before, it answers 503 with the reason.
func (r *RetryingOIDC) Authenticate(req *http.Request) (Caller, error) {
	r.mu.RLock()
	o, reason := r.oidc, r.reason
	r.mu.RUnlock()
	if o == nil {
		return Caller{}, echo.NewHTTPError(http.StatusServiceUnavailable, "not ready: "+reason)
	}
	return o.Authenticate(req)
}
