package tes

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"
)

// OIDC authenticates callers by their OIDC bearer tokens. A JWT is verified
// here: signed by the issuer's keys (fetched from its discovery document,
// refreshed when an unknown key appears), for the audience, not expired.
// Any other token (an opaque access token, as ELIXIR AAI issues) is sent to
// the issuer's userinfo endpoint, whose answer names the caller; answers are
// kept a short while (UserInfoTTL), keyed by the token's SHA-256; the
// issuer's userinfo endpoint checks no audience, so opaque tokens are off
// unless the operator turns them on. The subject owns the tasks it creates;
// a member of AdminGroup (in the claim GroupsClaim, of the token or of the
// userinfo) sees every task. With AllowedGroups or AllowedSubjects set, only
// those callers (and the administrators) may create tasks.
type OIDC struct {
	verifier    *oidc.IDTokenVerifier
	groupsClaim string
	adminGroup  string
	allow       allowList

	// userinfo is nil when opaque tokens are refused.
	userinfo *userInfo
}

// Opaque token modes (OIDCConfig.OpaqueTokens).
const (
	// OpaqueUserInfo: tokens that are not JWTs are checked at the issuer's
	// userinfo endpoint (an issuer without one is an error). The endpoint
	// accepts any token the issuer gave, whichever application it was
	// given to: another application of the same issuer can replay its
	// users' tokens here.
	OpaqueUserInfo = "userinfo"
	// OpaqueOff: only JWTs are accepted, each checked for the audience (the
	// default).
	OpaqueOff = "off"
)

// DefaultUserInfoTTL is how long a userinfo answer is kept.
const DefaultUserInfoTTL = time.Minute

// maxUserInfoCache bounds the userinfo answers kept.
const maxUserInfoCache = 10000

// OIDCConfig is the access control's configuration.
type OIDCConfig struct {
	Issuer, Audience        string
	GroupsClaim, AdminGroup string
	// OpaqueTokens is OpaqueUserInfo or OpaqueOff; "" is OpaqueOff.
	OpaqueTokens string
	// AllowedGroups and AllowedSubjects, when either is set, are who may
	// create tasks: the members of a group (in GroupsClaim) and the
	// subjects named, besides the members of AdminGroup. Others are
	// authenticated (they see, and may cancel, the tasks they created
	// before) but a create is refused with 403.
	AllowedGroups, AllowedSubjects []string
	// UserInfoTTL is how long a userinfo answer (an accepted or a refused
	// token) is kept (DefaultUserInfoTTL if 0).
	UserInfoTTL time.Duration
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
	if c.OpaqueTokens != "" && c.OpaqueTokens != OpaqueUserInfo && c.OpaqueTokens != OpaqueOff {
		return nil, fmt.Errorf("opaque tokens %q: use %s or %s", c.OpaqueTokens, OpaqueUserInfo, OpaqueOff)
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
	if len(c.AllowedGroups) > 0 && c.GroupsClaim == "" {
		return nil, errors.New("allowed groups need the groups claim that names them")
	}
	o := &OIDC{
		verifier:    p.Verifier(&oidc.Config{ClientID: c.Audience}),
		groupsClaim: c.GroupsClaim,
		adminGroup:  c.AdminGroup,
		allow:       newAllowList(c.AllowedGroups, c.AllowedSubjects),
	}
	switch {
	case c.OpaqueTokens == OpaqueUserInfo && p.UserInfoEndpoint() == "":
		return nil, fmt.Errorf("OIDC issuer %s names no userinfo endpoint: opaque tokens cannot be checked", c.Issuer)
	case c.OpaqueTokens != OpaqueUserInfo:
	default:
		ttl := c.UserInfoTTL
		if ttl <= 0 {
			ttl = DefaultUserInfoTTL
		}
		rc := *client
		rc.Transport = statusRecorder{base: client.Transport}
		o.userinfo = &userInfo{
			provider: p,
			client:   &rc,
			ttl:      ttl,
			now:      time.Now,
			cache:    map[[sha256.Size]byte]userInfoAnswer{},
		}
	}
	return o, nil
}

// OpaqueTokens reports whether tokens that are not JWTs are checked at the
// issuer's userinfo endpoint.
func (o *OIDC) OpaqueTokens() bool { return o.userinfo != nil }

// Authenticate verifies the request's bearer token.
func (o *OIDC) Authenticate(r *http.Request) (Caller, error) {
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return Caller{}, errors.New("a bearer token is required (Authorization: Bearer <token>)")
	}
	if !isJWT(token) {
		if o.userinfo == nil {
			return Caller{}, errors.New("the bearer token is not a JWT, and this service accepts no opaque tokens")
		}
		c, err := o.userinfo.caller(r.Context(), token)
		if err != nil {
			return Caller{}, err
		}
		return o.withGroups(c.Caller, c.claims)
	}
	idt, err := o.verifier.Verify(r.Context(), token)
	if err != nil {
		return Caller{}, fmt.Errorf("the bearer token is not valid: %v", err)
	}
	if idt.Subject == "" {
		return Caller{}, errors.New("the bearer token has no subject")
	}
	return o.withGroups(Caller{Subject: idt.Subject, Label: LabelSafe(idt.Subject)}, idt.Claims)
}

// withGroups reads the groups of the caller's claims (the token's or the
// userinfo's): a member of the admin group is an administrator; one that
// the allow list leaves out may not create tasks.
func (o *OIDC) withGroups(c Caller, claims func(any) error) (Caller, error) {
	var groups any
	if o.groupsClaim != "" && (o.adminGroup != "" || o.allow.any()) {
		var m map[string]any
		if err := claims(&m); err != nil {
			return Caller{}, echo.NewHTTPError(http.StatusForbidden, "the token's claims do not parse: "+err.Error())
		}
		groups = m[o.groupsClaim]
	}
	c.All = o.adminGroup != "" && memberOf(groups, o.adminGroup)
	if !c.All && !o.allow.admits(c.Subject, groups) {
		c.Denied = o.allow.refusal(c.Subject, o.groupsClaim)
	}
	return c, nil
}

// isJWT reports whether a token is a JWT in compact serialization: three
// base64url parts, the first a JSON object naming an algorithm.
func isJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		return false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	return json.Unmarshal(b, &h) == nil && h.Alg != ""
}

// userInfo checks opaque tokens at the issuer's userinfo endpoint, and
// keeps its answers for ttl.
type userInfo struct {
	provider *oidc.Provider
	// client records the status of the issuer's answer (statusRecorder).
	client *http.Client
	ttl    time.Duration
	now    func() time.Time
	flight singleflight.Group

	mu    sync.Mutex
	cache map[[sha256.Size]byte]userInfoAnswer
}

// userInfoAnswer is what the issuer said of a token: who (with the claims
// for the groups), or that it refused it (err, a 401).
type userInfoAnswer struct {
	caller  Caller
	claims  func(any) error
	err     error
	expires time.Time
}

// identified is a caller with the claims it was found by.
type identified struct {
	Caller
	claims func(any) error
}

// caller asks the issuer who the token's holder is, unless a recent answer
// is kept. A refused token is an error (401); an issuer that fails or does
// not answer is an *echo.HTTPError 503: the token may well be good.
func (u *userInfo) caller(ctx context.Context, token string) (identified, error) {
	key := sha256.Sum256([]byte(token))
	if a, ok := u.cached(key); ok {
		return identified{a.caller, a.claims}, a.err
	}
	// Requests with the same token at the same time ask once.
	v, err, _ := u.flight.Do(string(key[:]), func() (any, error) {
		if a, ok := u.cached(key); ok {
			return a, nil
		}
		a, err := u.ask(context.WithoutCancel(ctx), token)
		if err != nil {
			return nil, err
		}
		u.keep(key, a)
		return a, nil
	})
	if err != nil {
		return identified{}, err
	}
	a := v.(userInfoAnswer)
	return identified{a.caller, a.claims}, a.err
}

func (u *userInfo) cached(key [sha256.Size]byte) (userInfoAnswer, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a, ok := u.cache[key]
	if ok && !u.now().Before(a.expires) {
		delete(u.cache, key)
		return a, false
	}
	return a, ok
}

// keep stores an answer; a full cache first loses its expired answers,
// then any.
func (u *userInfo) keep(key [sha256.Size]byte, a userInfoAnswer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if len(u.cache) >= maxUserInfoCache {
		for k, v := range u.cache {
			if !now.Before(v.expires) {
				delete(u.cache, k)
			}
		}
		for k := range u.cache {
			if len(u.cache) < maxUserInfoCache {
				break
			}
			delete(u.cache, k)
		}
	}
	a.expires = now.Add(u.ttl)
	u.cache[key] = a
}

// ask calls the userinfo endpoint. The answer (with its err for a refused
// token) is to be kept; the error is the issuer's failure (503).
func (u *userInfo) ask(ctx context.Context, token string) (userInfoAnswer, error) {
	var status int
	ctx = context.WithValue(ctx, statusKey{}, &status)
	ctx = oidc.ClientContext(ctx, u.client)
	info, err := u.provider.UserInfo(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"}))
	switch {
	case err == nil && info.Subject == "":
		return userInfoAnswer{err: errors.New("the issuer's userinfo for the bearer token has no subject")}, nil
	case err == nil:
		return userInfoAnswer{caller: Caller{Subject: info.Subject, Label: LabelSafe(info.Subject)}, claims: info.Claims}, nil
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusBadRequest:
		return userInfoAnswer{err: fmt.Errorf("the bearer token is not valid: the issuer's userinfo endpoint refused it (%d %s)", status, http.StatusText(status))}, nil
	default:
		return userInfoAnswer{}, echo.NewHTTPError(http.StatusServiceUnavailable, "the bearer token cannot be checked now: the OIDC issuer's userinfo endpoint failed: "+err.Error())
	}
}

type statusKey struct{}

// statusRecorder records the status of each answer in the *int its
// request's context holds under statusKey.
type statusRecorder struct{ base http.RoundTripper }

func (s statusRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	base := s.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if p, ok := r.Context().Value(statusKey{}).(*int); ok && resp != nil {
		*p = resp.StatusCode
	}
	return resp, err
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
