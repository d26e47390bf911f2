package tes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// htpasswd is a users file line as htpasswd -B writes it ($2y$).
func htpasswd(t *testing.T, user, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":$2y$" + strings.TrimPrefix(string(h), "$2a$") + "\n"
}

func writeUsers(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withAuthorization makes a request with the Authorization header given
// (none if empty); it returns the status, the body and the challenges.
func (a *apiTest) withAuthorization(authz, method, path, body string) (int, map[string]any, []string) {
	a.t.Helper()
	h := http.Header{}
	if authz != "" {
		h.Set("Authorization", authz)
	}
	return a.withHeaders(h, method, path, body)
}

// withHeaders makes a JSON request with the headers given; it returns the
// status, the body and the challenges.
func (a *apiTest) withHeaders(h http.Header, method, path, body string) (int, map[string]any, []string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.url+path, strings.NewReader(body))
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		a.t.Fatalf("%s %s: %d, body not a JSON object: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m, resp.Header.Values("WWW-Authenticate")
}

func basicAuth(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

// TestBasicAuth: users of the file are who they say with their password;
// a wrong password, an unknown user or a malformed header is a 401 with the
// Basic challenge; a user sees only their own tasks, an administrator all.
func TestBasicAuth(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, "# TES users\n", htpasswd(t, "alice", "wonderland"), "\n", htpasswd(t, "bob", "builder"), htpasswd(t, "carol", "admin-pw"))
	b, err := NewBasic(BasicConfig{File: file, Admins: []string{"carol", " "}})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPITestWith(t, b)

	for name, authz := range map[string]string{
		"no credentials":    "",
		"wrong password":    basicAuth("alice", "looking-glass"),
		"unknown user":      basicAuth("mallory", "wonderland"),
		"empty user":        basicAuth("", "wonderland"),
		"not base64":        "Basic %%%",
		"no colon":          "Basic " + base64.StdEncoding.EncodeToString([]byte("alice")),
		"a bearer token":    "Bearer abc",
		"scheme only":       "Basic",
		"colon in the user": basicAuth("alice:", "wonderland"),
	} {
		code, body, ch := a.withAuthorization(authz, http.MethodPost, "/tasks", helloTask)
		if code != http.StatusUnauthorized || body["error"] == nil || len(ch) != 1 || ch[0] != BasicChallenge {
			t.Errorf("%s: %d %v %q, want 401 with a message and the Basic challenge", name, code, body, ch)
		}
	}
	if l, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metaListAll); len(l.Items) != 0 {
		t.Fatalf("refused callers wrote %d anchors", len(l.Items))
	}

	code, body, _ := a.withAuthorization(basicAuth("alice", "wonderland"), http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("alice creates: %d %v", code, body)
	}
	id := body["id"].(string)
	cm, _ := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metaGet)
	if cm.Annotations[taskmeta.AnnotationCreator] != "alice" || cm.Labels[taskmeta.LabelCreator] != "alice" {
		t.Errorf("owner: %v %v", cm.Labels, cm.Annotations)
	}
	if code, body, _ := a.withAuthorization(basicAuth("alice", "wonderland"), http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("alice reads her task: %d %v", code, body)
	}
	if code, body, _ := a.withAuthorization(basicAuth("bob", "builder"), http.MethodGet, "/tasks/"+id, ""); code != http.StatusForbidden {
		t.Errorf("bob reads alice's task: %d %v, want 403", code, body)
	}
	if code, _, _ := a.withAuthorization(basicAuth("bob", "builder"), http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusForbidden {
		t.Errorf("bob cancels alice's task: %d, want 403", code)
	}
	if code, body, _ := a.withAuthorization(basicAuth("carol", "admin-pw"), http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("an administrator reads alice's task: %d %v", code, body)
	}
}

// TestBasicUsersFileReadAgain: a changed users file is read again; one that
// no longer parses keeps the users read before; Watch reads it on its
// timer.
func TestBasicUsersFileReadAgain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "alice", "one"))
	b, err := NewBasic(BasicConfig{File: file})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(user, password string) bool {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.SetBasicAuth(user, password)
		c, err := b.Authenticate(r)
		return err == nil && c.Subject == user && c.Label == user && !c.All
	}
	if !ok("alice", "one") || ok("bob", "two") {
		t.Fatal("before: alice should be in, bob out")
	}
	if changed, err := b.Reload(); changed || err != nil {
		t.Errorf("the same file: changed %v %v", changed, err)
	}
	writeUsers(t, file, htpasswd(t, "alice", "new"), htpasswd(t, "bob", "two"))
	if changed, err := b.Reload(); !changed || err != nil {
		t.Fatalf("a new file: changed %v %v", changed, err)
	}
	if ok("alice", "one") || !ok("alice", "new") || !ok("bob", "two") || b.Users() != 2 {
		t.Error("after: alice's new password and bob should be in, alice's old password out")
	}
	writeUsers(t, file, "bob:{SHA}abc\n")
	if _, err := b.Reload(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a file that does not parse: %v", err)
	}
	if !ok("bob", "two") {
		t.Error("a file that does not parse dropped the users read before")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logged := make(chan string, 10)
	go b.Watch(ctx, 20*time.Millisecond, func(msg string, _ ...any) { logged <- msg })
	writeUsers(t, file, htpasswd(t, "carol", "three"))
	deadline := time.Now().Add(5 * time.Second)
	for !ok("carol", "three") {
		if time.Now().After(deadline) {
			t.Fatal("Watch did not read the changed file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok("bob", "two") {
		t.Error("bob, no longer in the file, is still let in")
	}
	if msg := <-logged; !strings.Contains(msg, "read again") {
		t.Errorf("logged %q", msg)
	}
}

// TestParseUsers: a file that is not a users file of bcrypt hashes is an
// error naming its line.
func TestParseUsers(t *testing.T) {
	good := strings.TrimSuffix(htpasswd(t, "alice", "x"), "\n")
	_, hash, _ := strings.Cut(good, ":")
	for name, c := range map[string]struct{ file, want string }{
		"apr1":      {good + "\nbob:$apr1$abc$def\n", `line 2: user "bob": the hash is not bcrypt`},
		"no colon":  {"# users\n\nalice\n", "line 3: not user:hash"},
		"no user":   {":" + hash + "\n", "line 1: no user name"},
		"twice":     {good + "\n" + good + "\n", `line 2: user "alice" again (first on line 1)`},
		"truncated": {"alice:$2y$10$abc\n", `line 1: user "alice": the bcrypt hash does not parse`},
		"empty":     {"# nobody\n", "no users"},
	} {
		_, _, err := ParseUsers([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), hash) {
			t.Errorf("%s: the error shows a hash: %v", name, err)
		}
	}
	users, cost, err := ParseUsers([]byte(good + "\r\n# c\r\n" + htpasswd(t, "bob", "y")))
	if err != nil || len(users) != 2 || cost != bcrypt.MinCost {
		t.Errorf("a good file with CRLF and a comment: %d users, cost %d, %v", len(users), cost, err)
	}
	if _, err := NewBasic(BasicConfig{File: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Error("a users file that is not there accepted")
	}
}

// TestBasicAndBearer: with both, a request goes by its scheme: Basic to
// the users file, Bearer to the issuer; a 401 names both challenges.
func TestBasicAndBearer(t *testing.T) {
	is := newIssuer(t)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "robot", "s3cret"))
	b, err := NewBasic(BasicConfig{File: file})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPITestWith(t, Schemes{Bearer: o, Basic: b})
	code, body, _ := a.withAuthorization(basicAuth("robot", "s3cret"), http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("robot creates: %d %v", code, body)
	}
	id := body["id"].(string)
	alice := "Bearer " + is.token("alice", "tesk", time.Now().Add(time.Hour), "")
	if code, body, _ := a.withAuthorization(alice, http.MethodGet, "/tasks/"+id, ""); code != http.StatusForbidden {
		t.Errorf("alice (a token) reads robot's task: %d %v, want 403", code, body)
	}
	if code, body, _ := a.withAuthorization(basicAuth("robot", "s3cret"), http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
		t.Errorf("robot reads its task: %d %v", code, body)
	}
	for name, authz := range map[string]string{
		"nothing":        "",
		"another scheme": "Digest username=robot",
		"bad token":      "Bearer abc",
		"bad password":   basicAuth("robot", "guess"),
	} {
		code, body, ch := a.withAuthorization(authz, http.MethodGet, "/tasks/"+id, "")
		if code != http.StatusUnauthorized || body["error"] == nil || len(ch) != 2 || ch[0] != BearerChallenge || ch[1] != BasicChallenge {
			t.Errorf("%s: %d %v %q, want 401 with both challenges", name, code, body, ch)
		}
	}
	if _, body, _ := a.withAuthorization("", http.MethodGet, "/tasks/"+id, ""); !strings.Contains(body["error"].(string), "Bearer") || !strings.Contains(body["error"].(string), "Basic") {
		t.Errorf("no credentials: %v, want both schemes named", body)
	}
}

// TestBasicUserIsNotTheTokenSubject: with both schemes, Basic user alice
// and the token subject alice are two owners (neither sees the other's
// task), unless the operator says the users file names the issuer's
// subjects (SharedOwners).
func TestBasicUserIsNotTheTokenSubject(t *testing.T) {
	is := newIssuer(t)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "alice", "s3cret"))
	b, err := NewBasic(BasicConfig{File: file})
	if err != nil {
		t.Fatal(err)
	}
	token := "Bearer " + is.token("alice", "tesk", time.Now().Add(time.Hour), "")
	for _, shared := range []bool{false, true} {
		a := newAPITestWith(t, Schemes{Bearer: o, Basic: b, SharedOwners: shared})
		want := http.StatusForbidden
		if shared {
			want = http.StatusOK
		}
		for _, pair := range [][2]string{{basicAuth("alice", "s3cret"), token}, {token, basicAuth("alice", "s3cret")}} {
			code, body, _ := a.withAuthorization(pair[0], http.MethodPost, "/tasks", helloTask)
			if code != http.StatusOK {
				t.Fatalf("shared %v: alice creates: %d %v", shared, code, body)
			}
			id := body["id"].(string)
			if code, body, _ := a.withAuthorization(pair[1], http.MethodGet, "/tasks/"+id, ""); code != want {
				t.Errorf("shared %v: the other alice reads the task: %d %v, want %d", shared, code, body, want)
			}
			if code, body, _ := a.withAuthorization(pair[0], http.MethodGet, "/tasks/"+id, ""); code != http.StatusOK {
				t.Errorf("shared %v: alice reads her task: %d %v", shared, code, body)
			}
		}
	}
}

// TestNoBasicChallengeToAPagesScript: a 401 to a request a page's script
// marks (X-Requested-With: XMLHttpRequest, as the dashboard sends) leaves
// the Basic challenge out, so that no browser prompts for a user name and
// password and keeps them for the origin; the bearer challenge stays, and
// so does the message. Other requests get every challenge.
func TestNoBasicChallengeToAPagesScript(t *testing.T) {
	is := newIssuer(t)
	o, err := NewOIDC(context.Background(), OIDCConfig{Issuer: is.url, Audience: "tesk"})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "alice", "wonderland"))
	b, err := NewBasic(BasicConfig{File: file})
	if err != nil {
		t.Fatal(err)
	}
	apis := map[string]*apiTest{
		"basic":         newAPITestWith(t, b),
		"schemes basic": newAPITestWith(t, Schemes{Basic: b}),
		"both":          newAPITestWith(t, Schemes{Bearer: o, Basic: b}),
		"oidc":          newAPITestWith(t, o),
	}
	for _, tc := range []struct {
		api, marker, authz string
		want               []string
	}{
		{"basic", "", "", []string{BasicChallenge}},
		{"basic", "XMLHttpRequest", "", nil},
		{"basic", "xmlhttprequest", basicAuth("alice", "guess"), nil},
		{"basic", "fetch", "", []string{BasicChallenge}},
		{"schemes basic", "", basicAuth("alice", "guess"), []string{BasicChallenge}},
		{"schemes basic", "XMLHttpRequest", basicAuth("alice", "guess"), nil},
		{"both", "", "", []string{BearerChallenge, BasicChallenge}},
		{"both", "XMLHttpRequest", "", []string{BearerChallenge}},
		{"both", "XMLHttpRequest", "Bearer abc", []string{BearerChallenge}},
		{"oidc", "", "", []string{BearerChallenge}},
		{"oidc", "XMLHttpRequest", "", []string{BearerChallenge}},
	} {
		h := http.Header{}
		if tc.marker != "" {
			h.Set(RequestedWith, tc.marker)
		}
		if tc.authz != "" {
			h.Set("Authorization", tc.authz)
		}
		code, body, ch := apis[tc.api].withHeaders(h, http.MethodGet, "/tasks", "")
		if code != http.StatusUnauthorized || body["error"] == nil || !slices.Equal(ch, tc.want) {
			t.Errorf("%s, %s %q, Authorization %q: %d %v %q, want 401 with a message and the challenges %q", tc.api, RequestedWith, tc.marker, tc.authz, code, body, ch, tc.want)
		}
	}
	// The right user name and password pass whether marked or not.
	h := http.Header{RequestedWith: {"XMLHttpRequest"}, "Authorization": {basicAuth("alice", "wonderland")}}
	if code, body, _ := apis["both"].withHeaders(h, http.MethodPost, "/tasks", helloTask); code != http.StatusOK {
		t.Errorf("alice from a page's script: %d %v", code, body)
	}
}
