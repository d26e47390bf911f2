package tes

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// With Knative Eventing's authentication-oidc, the SinkBinding mounts a
// token for the Broker: each event carries it as a bearer token, read
// anew each time (the SinkBinding renews it); without the file, events go
// without one.
func TestEventsCarryTheSinkToken(t *testing.T) {
	a := newAPITest(t)
	file := filepath.Join(t.TempDir(), "token")
	a.srv.Config.SinkTokenFile = file
	create := func() {
		t.Helper()
		if code, body := a.do(http.MethodPost, "/tasks", `{"executors":[{"image":"a","command":["x"]}]}`); code != http.StatusOK {
			t.Fatalf("create: %d %v", code, body)
		}
	}
	create() // no file yet
	if err := os.WriteFile(file, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	create()
	if err := os.WriteFile(file, []byte("renewed-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	create()
	a.sink.mu.Lock()
	got := slices.Clone(a.sink.auth)
	a.sink.mu.Unlock()
	if want := []string{"", "Bearer first-token", "Bearer renewed-token"}; !slices.Equal(got, want) {
		t.Errorf("Authorization of the events %q, want %q", got, want)
	}
}
