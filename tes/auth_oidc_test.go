package tes

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// issuer is an OIDC issuer served by the test, with keys it generated.
type issuer struct {
	url  string
	key  *rsa.PrivateKey
	kid  string
	last *rsa.PrivateKey // a key the issuer does not publish
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	s.SetIssuer(hs.URL)
	return &issuer{url: hs.URL, key: key, kid: "k1", last: other}
}

func (is *issuer) token(sub, aud string, exp time.Time, extra string) string {
	claims := fmt.Sprintf(`{"iss":%q,"aud":%q,"sub":%q,"exp":%d,"iat":%d%s}`, is.url, aud, sub, exp.Unix(), time.Now().Unix(), extra)
	return oidctest.SignIDToken(is.key, is.kid, oidc.RS256, claims)
}

func newAuthAPITest(t *testing.T) (*apiTest, *issuer) {
	t.Helper()
	is := newIssuer(t)
	auth, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk", GroupsClaim: "groups", AdminGroup: "tes-admins"})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPITestWith(t, auth)
	return a, is
}

func (a *apiTest) as(token, method, path, body string) (int, map[string]any) {
	a.t.Helper()
	a.token = token
	defer func() { a.token = "" }()
	return a.do(method, path, body)
}

func TestAccessControl(t *testing.T) {
	a, is := newAuthAPITest(t)
	hour := time.Now().Add(time.Hour)
	alice := is.token("alice@example.org", "tesk", hour, "")
	bob := is.token("bob", "tesk", hour, `,"groups":["users"]`)
	admin := is.token("carol", "tesk", hour, `,"groups":["users","tes-admins"]`)

	// Refused tokens: 401 with a JSON message, and nothing written.
	for name, tok := range map[string]string{
		"no token":         "",
		"another audience": is.token("alice", "other", hour, ""),
		"expired":          is.token("alice", "tesk", time.Now().Add(-time.Hour), ""),
		"unknown key":      oidctest.SignIDToken(is.last, "k1", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":"tesk","sub":"x","exp":%d}`, is.url, hour.Unix())),
		"another issuer":   oidctest.SignIDToken(is.key, "k1", oidc.RS256, fmt.Sprintf(`{"iss":"https://evil.example","aud":"tesk","sub":"x","exp":%d}`, hour.Unix())),
		"not a JWT":        "abc.def.ghi",
	} {
		code, body := a.as(tok, http.MethodPost, "/tasks", helloTask)
		if code != http.StatusUnauthorized || body["error"] == nil {
			t.Errorf("%s: %d %v, want 401 with a message", name, code, body)
		}
	}
	if l, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metaListAll); len(l.Items) != 0 {
		t.Fatalf("refused callers wrote %d anchors", len(l.Items))
	}
	// service-info needs no token.
	if code, _ := a.as("", http.MethodGet, "/service-info", ""); code != http.StatusOK {
		t.Errorf("service-info without a token: %d", code)
	}

	code, body := a.as(alice, http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("alice creates: %d %v", code, body)
	}
	id := body["id"].(string)
	cm, _ := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metaGet)
	if cm.Annotations[taskmeta.AnnotationCreator] != "alice@example.org" || cm.Labels[taskmeta.LabelCreator] != LabelSafe("alice@example.org") {
		t.Errorf("owner: %v %v", cm.Labels, cm.Annotations)
	}
	if !strings.HasPrefix(cm.Labels[taskmeta.LabelCreator], "alice") {
		t.Errorf("creator-user-id %q", cm.Labels[taskmeta.LabelCreator])
	}

	if code, _ := a.as(alice, http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("alice reads her task: %d", code)
	}
	if code, body := a.as(bob, http.MethodGet, "/tasks/"+id, ""); code != http.StatusForbidden || body["error"] == nil {
		t.Errorf("bob reads alice's task: %d %v, want 403", code, body)
	}
	if code, _ := a.as(bob, http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusForbidden {
		t.Errorf("bob cancels alice's task: %d, want 403", code)
	}
	cm, _ = a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metaGet)
	if _, ok := cm.Labels["task-status"]; ok {
		t.Errorf("bob's cancel changed the task")
	}
	if code, _ := a.as(admin, http.MethodGet, "/tasks/"+id+"?view=FULL", ""); code != http.StatusOK {
		t.Errorf("an administrator reads alice's task: %d", code)
	}
	if code, _ := a.as(admin, http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusOK {
		t.Errorf("an administrator cancels alice's task: %d", code)
	}
}

// TestIssuerReadAgainUntilItAnswers: an issuer that does not answer at
// first keeps the API not ready (503 with the reason, /readyz too); once it
// answers, tokens are checked.
func TestIssuerReadAgainUntilItAnswers(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	var up atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		s.ServeHTTP(w, r)
	}))
	defer hs.Close()
	s.SetIssuer(hs.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := NewRetryingOIDC(ctx, OIDCConfig{Issuer: hs.URL, Audience: "tesk"}, func(string, ...any) {})
	a := newAPITestWith(t, o)
	a.srv.Ready = o.Ready
	readyz := func() (int, string) {
		resp, err := http.Get(a.root + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, hs.URL) {
		t.Errorf("/readyz before the issuer answers: %d %s", code, body)
	}
	token := oidctest.SignIDToken(key, "k1", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":"tesk","sub":"alice","exp":%d}`, hs.URL, time.Now().Add(time.Hour).Unix()))
	if code, _ := a.as(token, "GET", "/tasks/task-00000000", ""); code != http.StatusServiceUnavailable {
		t.Errorf("a request before the issuer answers: %d, want 503", code)
	}
	up.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for o.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready after the issuer answered: %v", o.Ready())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("/readyz after: %d %s", code, body)
	}
	// Authenticated: the task is looked for (and is not there).
	if code, body := a.as(token, "GET", "/tasks/task-00000000", ""); code != http.StatusNotFound {
		t.Errorf("a request with a token after: %d %v, want 404", code, body)
	}
}
