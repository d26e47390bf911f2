package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SINK_TOKEN_REQUIRED: a revision the SinkBinding bound to the Broker
// before it mounted the OIDC token does not start; one with the token
// does, as does one that publishes no state changes.
func TestSinkTokenRequired(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("abc.def"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "none")
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		name    string
		args    []string
		env     func(string) string
		wantErr string
	}{
		{name: "bound, the token mounted", env: env("SINK_TOKEN_REQUIRED", "true", "K_SINK", "http://broker", "SINK_TOKEN_FILE", token)},
		{name: "bound, the token not mounted yet", env: env("SINK_TOKEN_REQUIRED", "true", "K_SINK", "http://broker", "SINK_TOKEN_FILE", missing), wantErr: "no token in"},
		{name: "the flag", args: []string{"-sink-token-required", "-sink-token-file", missing}, env: env("K_SINK", "http://broker"), wantErr: "no token in"},
		{name: "not required", env: env("K_SINK", "http://broker", "SINK_TOKEN_FILE", missing)},
		{name: "no state events published", env: env("SINK_TOKEN_REQUIRED", "true", "SINK_TOKEN_FILE", missing)},
		{name: "a bad value", env: env("SINK_TOKEN_REQUIRED", "maybe"), wantErr: "SINK_TOKEN_REQUIRED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, err := parseOptions(c.args, c.env)
			if err == nil {
				err = o.sinkReady()
			}
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("%v, want %q", err, c.wantErr)
			}
		})
	}
}
