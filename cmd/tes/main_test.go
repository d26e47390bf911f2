package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestAPIConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string // part of the error; "" accepts
	}{
		{"defaults", nil, ""},
		{"storage and tail", map[string]string{"TES_STORAGE": " s3://a, file:///b ,", "TES_LOG_TAIL_BYTES": "1024"}, ""},
		{"tail not a number", map[string]string{"TES_LOG_TAIL_BYTES": "64k"}, "TES_LOG_TAIL_BYTES"},
		{"tail too large", map[string]string{"TES_LOG_TAIL_BYTES": "2000000"}, "TES_LOG_TAIL_BYTES"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := apiConfig(env(c.env))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
			if c.name == "storage and tail" && (len(cfg.Info.Storage) != 2 || cfg.Info.Storage[1] != "file:///b" || cfg.LogTailBytes != 1024) {
				t.Errorf("storage %q tail %d", cfg.Info.Storage, cfg.LogTailBytes)
			}
		})
	}
}

// TestAccessIsExplicit: access control is TES_AUTH's (or --no-auth); a
// mode that is not set, or an issuer that does not answer, is not an exit
// but a TES API that is not ready and says why.
func TestAccessIsExplicit(t *testing.T) {
	log := zap.NewNop().Sugar()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, ready, err := authenticator(ctx, env(nil), false, log)
	if err != nil || a == nil || ready == nil || ready() == nil || !strings.Contains(ready().Error(), "TES_AUTH") {
		t.Errorf("nothing set: %v %v, want not ready naming TES_AUTH", a, err)
	}
	if _, err := a.Authenticate(httptest.NewRequest(http.MethodGet, "/", nil)); err == nil {
		t.Error("a request was let through while nothing is set")
	}
	for _, e := range []map[string]string{{"TES_AUTH": "none"}, {"TES_AUTH": "NONE", "OIDC_ISSUER": "http://x"}} {
		if a, ready, err := authenticator(ctx, env(e), false, log); err != nil || a != nil || ready != nil {
			t.Errorf("%v: %v %v, want no access control", e, a, err)
		}
	}
	if a, _, err := authenticator(ctx, env(nil), true, log); err != nil || a != nil {
		t.Errorf("--no-auth: %v %v", a, err)
	}
	if _, ready, err := authenticator(ctx, env(map[string]string{"TES_AUTH": "oidc", "OIDC_AUDIENCE": "a"}), false, log); err != nil || ready == nil || !strings.Contains(fmt.Sprint(ready()), "OIDC_ISSUER") {
		t.Errorf("oidc without an issuer: %v", err)
	}
	if _, _, err := authenticator(ctx, env(map[string]string{"TES_AUTH": "basic"}), false, log); err == nil {
		t.Error("TES_AUTH=basic accepted")
	}
	// An issuer that does not answer: not ready, the reason names it.
	_, ready, err = authenticator(ctx, env(map[string]string{"OIDC_ISSUER": "http://127.0.0.1:1", "OIDC_AUDIENCE": "a"}), false, log)
	if err != nil || ready == nil {
		t.Fatalf("an issuer that does not answer: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ready() == nil || !strings.Contains(ready().Error(), "127.0.0.1:1") {
		if time.Now().After(deadline) {
			t.Fatalf("ready: %v, want the issuer's error", ready())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOptions(t *testing.T) {
	o, err := parseOptions([]string{"--port", "8081", "--no-auth"}, env(map[string]string{"K_SINK": "http://broker", "NAMESPACE": "tesk"}))
	if err != nil || o.port != 8081 || !o.noAuth || o.sink != "http://broker" || o.namespace != "tesk" {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := parseOptions(nil, env(map[string]string{"PORT": "x"})); err == nil {
		t.Errorf("PORT=x accepted")
	}
	if _, err := parseOptions(nil, env(map[string]string{"DEBUG": "maybe"})); err == nil {
		t.Errorf("DEBUG=maybe accepted")
	}
}
