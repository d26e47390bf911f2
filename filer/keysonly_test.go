package filer

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// With a user's own credentials (KeysOnly) the filer signs with the keys of
// the user's files or sends anonymous requests: it never asks the instance
// metadata service or a container credentials endpoint, which would lend
// it the node's or the pod's identity (behaviour §3.14). Without KeysOnly
// the SDK's default chain does ask the container endpoint: the stubs count.
func TestUserCredentialsAreKeysOrNothing(t *testing.T) {
	var ambient atomic.Int64
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ambient.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer stub.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", stub.URL+"/")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", stub.URL+"/creds")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")

	var mu sync.Mutex
	var auth []string
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("ETag", `"e"`)
	}))
	defer s3.Close()

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	withKeys := filepath.Join(dir, "credentials")
	writeFile(t, empty, "")
	writeFile(t, withKeys, "[default]\naws_access_key_id = AKIDUSER\naws_secret_access_key = user-secret\n")
	up := filepath.Join(dir, "up")
	writeFile(t, up, "payload")

	put := func(a AWSOptions) (string, error) {
		t.Helper()
		mu.Lock()
		auth = nil
		mu.Unlock()
		a.Endpoint, a.Region = s3.URL, "us-east-1"
		tr, err := newS3Transport(Options{AWS: a, Logger: slog.New(slog.DiscardHandler)}, &scrubber{})
		if err != nil {
			return "", err
		}
		f, err := os.Open(up)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		err = tr.put(t.Context(), "s3://b/k", f, 7)
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(auth, " | "), err
	}

	got, err := put(AWSOptions{KeysOnly: true, ConfigFile: empty, CredentialsFile: filepath.Join(dir, "missing")})
	if err != nil || got != "" {
		t.Errorf("a user without keys: %v, Authorization %q; want an anonymous PUT", err, got)
	}
	got, err = put(AWSOptions{KeysOnly: true, ConfigFile: empty, CredentialsFile: withKeys})
	if err != nil || !strings.Contains(got, "Credential=AKIDUSER/") {
		t.Errorf("a user with keys: %v, Authorization %q; want signed with AKIDUSER", err, got)
	}
	if n := ambient.Load(); n != 0 {
		t.Errorf("%d requests for ambient credentials with a user's own", n)
	}

	_, _ = put(AWSOptions{ConfigFile: empty, CredentialsFile: empty})
	if ambient.Load() == 0 {
		t.Error("the default chain asked no stub: the check above proves nothing")
	}
}
