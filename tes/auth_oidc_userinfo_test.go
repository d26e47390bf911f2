package tes

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	"github.com/labstack/echo/v4"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Ways the userinfo endpoint of a userinfoIssuer fails.
const (
	answers = iota
	failsWith502
	dropsTheConnection
)

// userinfoIssuer is an OIDC issuer served by the test whose discovery
// document names a userinfo endpoint, which knows the opaque tokens in
// users.
type userinfoIssuer struct {
	*issuer
	mu    sync.Mutex
	users map[string]string // opaque token → userinfo JSON
	asked map[string]int    // opaque token → requests
	fail  atomic.Int32
}

func newUserinfoIssuer(t *testing.T) *userinfoIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	u := &userinfoIssuer{users: map[string]string{}, asked: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, r)
			var d map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			d["userinfo_endpoint"] = u.url + "/userinfo"
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(d)
		case "/userinfo":
			u.userinfo(w, r)
		default:
			s.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	s.SetIssuer(hs.URL)
	u.issuer = &issuer{url: hs.URL, key: key, kid: "k1"}
	return u
}

func (u *userinfoIssuer) userinfo(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	u.mu.Lock()
	u.asked[token]++
	claims, ok := u.users[token]
	u.mu.Unlock()
	switch u.fail.Load() {
	case failsWith502:
		http.Error(w, "upstream down", http.StatusBadGateway)
		return
	case dropsTheConnection:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(claims))
}

func (u *userinfoIssuer) times(token string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked[token]
}

// TestOpaqueTokensThroughUserInfo: a token that is not a JWT names its
// caller through the issuer's userinfo endpoint, whose groups make an
// administrator as a token's do; the ownership is the same as with JWTs.
func TestOpaqueTokensThroughUserInfo(t *testing.T) {
	is := newUserinfoIssuer(t)
	is.users["alice-opaque"] = `{"sub":"alice@example.org","email":"alice@example.org"}`
	is.users["bob-opaque"] = `{"sub":"bob","groups":["users"]}`
	is.users["carol-opaque"] = `{"sub":"carol","groups":["users","tes-admins"]}`
	is.users["nobody-opaque"] = `{"email":"x@example.org"}`
	auth, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", GroupsClaim: "groups", AdminGroup: "tes-admins", OpaqueTokens: OpaqueUserInfo})
	if err != nil {
		t.Fatal(err)
	}
	if !auth.OpaqueTokens() {
		t.Fatal("an issuer with a userinfo endpoint: opaque tokens not accepted")
	}
	a := newAPITestWith(t, auth)

	code, body := a.as("alice-opaque", http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("alice creates with an opaque token: %d %v", code, body)
	}
	id := body["id"].(string)
	cm, _ := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metaGet)
	if cm.Annotations[taskmeta.AnnotationCreator] != "alice@example.org" || cm.Labels[taskmeta.LabelCreator] != LabelSafe("alice@example.org") {
		t.Errorf("owner: %v %v", cm.Labels, cm.Annotations)
	}
	// Her JWT and her opaque token are the same caller.
	jwt := is.token("alice@example.org", "tesk", time.Now().Add(time.Hour), "")
	if code, body := a.as(jwt, http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("alice's JWT reads the task her opaque token made: %d %v", code, body)
	}
	if code, body := a.as("bob-opaque", http.MethodGet, "/tasks/"+id, ""); code != http.StatusForbidden {
		t.Errorf("bob reads alice's task: %d %v, want 403", code, body)
	}
	if code, body := a.as("carol-opaque", http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("an administrator (by the userinfo's groups) reads alice's task: %d %v", code, body)
	}
	for _, tok := range []string{"unknown-opaque", "abc.def.ghi", "nobody-opaque"} {
		if code, body := a.as(tok, http.MethodGet, "/tasks/"+id, ""); code != http.StatusUnauthorized || body["error"] == nil {
			t.Errorf("%s: %d %v, want 401 with a message", tok, code, body)
		}
	}
	// Repeated requests with the same token ask the issuer once.
	for range 5 {
		if code, _ := a.as("alice-opaque", http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
			t.Fatalf("alice again: %d", code)
		}
		if code, _ := a.as("unknown-opaque", http.MethodGet, "/tasks/"+id, ""); code != http.StatusUnauthorized {
			t.Fatalf("an unknown token again: %d", code)
		}
	}
	if n := is.times("alice-opaque"); n != 1 {
		t.Errorf("the issuer was asked %d times of alice's token, want 1", n)
	}
	if n := is.times("unknown-opaque"); n != 1 {
		t.Errorf("the issuer was asked %d times of a refused token, want 1", n)
	}
	if n := is.times(jwt); n != 0 {
		t.Errorf("a JWT was sent to the userinfo endpoint %d times", n)
	}
}

// TestUserInfoIssuerDown: an issuer whose userinfo endpoint fails or does
// not answer is a 503 (the token may be good), not a 401, and is not kept:
// once the issuer answers, the same token is accepted. Answers kept from
// before still serve. (An accepted caller looking for a task that is not
// there gets 404.)
func TestUserInfoIssuerDown(t *testing.T) {
	is := newUserinfoIssuer(t)
	is.users["alice-opaque"] = `{"sub":"alice"}`
	is.users["bob-opaque"] = `{"sub":"bob"}`
	auth, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", OpaqueTokens: OpaqueUserInfo})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPITestWith(t, auth)
	if code, body := a.as("alice-opaque", http.MethodGet, "/tasks/task-00000000", ""); code != http.StatusNotFound {
		t.Fatalf("alice looks for a task: %d %v", code, body)
	}
	for _, mode := range []int32{failsWith502, dropsTheConnection} {
		is.fail.Store(mode)
		code, body := a.as("bob-opaque", http.MethodGet, "/tasks/task-00000000", "")
		if code != http.StatusServiceUnavailable || !strings.Contains(fmt.Sprint(body["error"]), "userinfo") {
			t.Errorf("issuer failing (%d): %d %v, want 503 naming the userinfo endpoint", mode, code, body)
		}
		if code, body := a.as("alice-opaque", http.MethodGet, "/tasks/task-00000000", ""); code != http.StatusNotFound {
			t.Errorf("issuer failing (%d), alice's kept answer: %d %v", mode, code, body)
		}
	}
	is.fail.Store(answers)
	before := is.times("bob-opaque")
	if code, body := a.as("bob-opaque", http.MethodGet, "/tasks/task-00000000", ""); code != http.StatusNotFound {
		t.Errorf("bob once the issuer answers: %d %v", code, body)
	}
	if n := is.times("bob-opaque"); n != before+1 {
		t.Errorf("the issuer was asked %d times of bob's token once it answers, want 1 (failures are not kept)", n-before)
	}
}

// TestUserInfoAnswersExpire: an answer is kept for the TTL, then the issuer
// is asked again; requests at the same time ask once; the cache is bounded
// and keyed by the token's hash.
func TestUserInfoAnswersExpire(t *testing.T) {
	is := newUserinfoIssuer(t)
	is.users["alice-opaque"] = `{"sub":"alice"}`
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", OpaqueTokens: OpaqueUserInfo, UserInfoTTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var mu sync.Mutex
	o.userinfo.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	req := func(token string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if c, err := o.Authenticate(req("alice-opaque")); err != nil || c.Subject != "alice" || c.All {
				t.Errorf("alice: %+v %v", c, err)
			}
		})
	}
	wg.Wait()
	if n := is.times("alice-opaque"); n != 1 {
		t.Errorf("8 requests at once asked the issuer %d times, want 1", n)
	}
	advance(29 * time.Second)
	if _, err := o.Authenticate(req("alice-opaque")); err != nil || is.times("alice-opaque") != 1 {
		t.Errorf("within the TTL: %v, asked %d times", err, is.times("alice-opaque"))
	}
	advance(2 * time.Second)
	if _, err := o.Authenticate(req("alice-opaque")); err != nil || is.times("alice-opaque") != 2 {
		t.Errorf("after the TTL: %v, asked %d times, want 2", err, is.times("alice-opaque"))
	}
	o.userinfo.mu.Lock()
	_, byHash := o.userinfo.cache[sha256.Sum256([]byte("alice-opaque"))]
	o.userinfo.mu.Unlock()
	if !byHash {
		t.Error("the answer is not kept under the token's SHA-256")
	}
	for i := range maxUserInfoCache + 10 {
		o.userinfo.keep(sha256.Sum256(fmt.Appendf(nil, "t%d", i)), userInfoAnswer{caller: Caller{Subject: "x"}})
	}
	if n := len(o.userinfo.cache); n > maxUserInfoCache {
		t.Errorf("%d answers kept, more than %d", n, maxUserInfoCache)
	}
}

// TestOpaqueTokensSwitch: with opaque tokens off, as by default even when
// the issuer has a userinfo endpoint (which checks no audience), a token
// that is not a JWT is refused without asking the issuer; asking for them
// of an issuer without a userinfo endpoint is an error.
func TestOpaqueTokensSwitch(t *testing.T) {
	is := newUserinfoIssuer(t)
	is.users["alice-opaque"] = `{"sub":"alice"}`
	for name, mode := range map[string]string{"off": OpaqueOff, "default": ""} {
		o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", OpaqueTokens: mode})
		if err != nil || o.OpaqueTokens() {
			t.Fatalf("%s: %v, opaque %v", name, err, o != nil && o.OpaqueTokens())
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer alice-opaque")
		if _, err := o.Authenticate(r); err == nil || is.times("alice-opaque") != 0 {
			t.Errorf("%s: %v, the issuer asked %d times", name, err, is.times("alice-opaque"))
		} else if _, ok := err.(*echo.HTTPError); ok {
			t.Errorf("%s: %v is not a refusal (401)", name, err)
		}
	}
	if _, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", OpaqueTokens: "maybe"}); err == nil {
		t.Error("opaque tokens \"maybe\" accepted")
	}
	plain := newIssuer(t) // no userinfo endpoint
	if _, err := NewOIDC(context.Background(), OIDCConfig{Issuer: plain.url, Audience: "tesk", OpaqueTokens: OpaqueUserInfo}); err == nil || !strings.Contains(err.Error(), "userinfo") {
		t.Errorf("userinfo of an issuer without one: %v", err)
	}
	if o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: plain.url, Audience: "tesk"}); err != nil || o.OpaqueTokens() {
		t.Errorf("default with an issuer without userinfo: %v, opaque %v", err, o != nil && o.OpaqueTokens())
	}
}

func TestIsJWT(t *testing.T) {
	is := newIssuer(t)
	for tok, want := range map[string]bool{
		is.token("a", "b", time.Now(), ""): true,
		"eyJhbGciOiJub25lIn0.e30.":         true, // {"alg":"none"}.{}. (refused by the verifier, not sent to userinfo)
		"abc.def.ghi":                      false,
		"2YotnFZFEjr1zCsicMWpAA":           false,
		"eyJ0eXAiOiJKV1QifQ.e30.x":         false, // no alg
		"a.b.c.d.e":                        false,
		"":                                 false,
	} {
		if got := isJWT(tok); got != want {
			t.Errorf("isJWT(%q) = %v, want %v", tok, got, want)
		}
	}
}
