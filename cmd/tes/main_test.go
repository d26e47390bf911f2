package main

import (
	"context"
	"strings"
	"testing"

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

func TestAccessNeedsAnIssuer(t *testing.T) {
	log := zap.NewNop().Sugar()
	if _, err := authenticator(context.Background(), env(nil), false, log); err == nil || !strings.Contains(err.Error(), "OIDC_ISSUER") {
		t.Errorf("without an issuer: %v, want a refusal to start", err)
	}
	if a, err := authenticator(context.Background(), env(nil), true, log); err != nil || a != nil {
		t.Errorf("--no-auth: %v %v", a, err)
	}
	if _, err := authenticator(context.Background(), env(map[string]string{"OIDC_ISSUER": "http://127.0.0.1:1", "OIDC_AUDIENCE": "a"}), false, log); err == nil {
		t.Errorf("an issuer that does not answer: no error")
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
