package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
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
		{"limits", map[string]string{"TES_MAX_EXECUTORS": "3", "TES_MAX_INPUTS": "0", "TES_MAX_RAM_GB": "0.5", "TES_MAX_DISK_GB": " 20 "}, ""},
		{"executors not a number", map[string]string{"TES_MAX_EXECUTORS": "many"}, "TES_MAX_EXECUTORS"},
		{"cores below 0", map[string]string{"TES_MAX_CPU_CORES": "-1"}, "TES_MAX_CPU_CORES"},
		{"ram not a number", map[string]string{"TES_MAX_RAM_GB": "NaN"}, "TES_MAX_RAM_GB"},
		{"disk infinite", map[string]string{"TES_MAX_DISK_GB": "+Inf"}, "TES_MAX_DISK_GB"},
		{"create rate", map[string]string{"TES_CREATE_RATE_PER_USER": "120"}, ""},
		{"create rate not a number", map[string]string{"TES_CREATE_RATE_PER_USER": "fast"}, "TES_CREATE_RATE_PER_USER"},
		{"unfinished bounds", map[string]string{"TES_MAX_UNFINISHED_TASKS_PER_USER": "50", "TES_MAX_UNFINISHED_BYTES_PER_USER": " 1048576 "}, ""},
		{"unfinished bounds lifted", map[string]string{"TES_MAX_UNFINISHED_TASKS_PER_USER": "0", "TES_MAX_UNFINISHED_BYTES_PER_USER": "0"}, ""},
		{"unfinished tasks not a number", map[string]string{"TES_MAX_UNFINISHED_TASKS_PER_USER": "lots"}, "TES_MAX_UNFINISHED_TASKS_PER_USER"},
		{"unfinished tasks below 0", map[string]string{"TES_MAX_UNFINISHED_TASKS_PER_USER": "-1"}, "TES_MAX_UNFINISHED_TASKS_PER_USER"},
		{"unfinished bytes with a unit", map[string]string{"TES_MAX_UNFINISHED_BYTES_PER_USER": "64Mi"}, "TES_MAX_UNFINISHED_BYTES_PER_USER"},
		{"unfinished bytes below 0", map[string]string{"TES_MAX_UNFINISHED_BYTES_PER_USER": "-5"}, "TES_MAX_UNFINISHED_BYTES_PER_USER"},
		{"unfinished bytes a fraction", map[string]string{"TES_MAX_UNFINISHED_BYTES_PER_USER": "1.5"}, "TES_MAX_UNFINISHED_BYTES_PER_USER"},
		{"prices", map[string]string{"TES_PRICE_PER_CORE_HOUR_USD": "0.04", "TES_PRICE_PER_RAM_GB_HOUR_USD": " 0.005 ", "TES_PRICE_PER_DISK_GB_HOUR_USD": "0"}, ""},
		{"a price not a number", map[string]string{"TES_PRICE_PER_RAM_GB_HOUR_USD": "cheap"}, "TES_PRICE_PER_RAM_GB_HOUR_USD"},
		{"a price below 0", map[string]string{"TES_PRICE_PER_CORE_HOUR_USD": "-1"}, "TES_PRICE_PER_CORE_HOUR_USD"},
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
			switch c.name {
			case "defaults":
				if cfg.Limits != tes.DefaultLimits() {
					t.Errorf("limits %+v, want the defaults %+v", cfg.Limits, tes.DefaultLimits())
				}
				if cfg.Backlog != tes.DefaultBacklog() || cfg.Backlog.Tasks == 0 || cfg.Backlog.Bytes == 0 {
					t.Errorf("unfinished bounds %+v, want the defaults %+v, both on", cfg.Backlog, tes.DefaultBacklog())
				}
			case "unfinished bounds":
				if cfg.Backlog != (tes.Backlog{Tasks: 50, Bytes: 1 << 20}) {
					t.Errorf("unfinished bounds %+v, want 50 tasks and 1048576 bytes", cfg.Backlog)
				}
			case "unfinished bounds lifted":
				if cfg.Backlog != (tes.Backlog{}) {
					t.Errorf("unfinished bounds %+v, want none", cfg.Backlog)
				}
			case "prices":
				if cfg.Prices != (steps.Prices{CoreHour: 0.04, RAMGBHour: 0.005}) {
					t.Errorf("prices %+v", cfg.Prices)
				}
			case "create rate":
				if cfg.CreatesPerMinute != 120 {
					t.Errorf("creates a minute %g, want 120", cfg.CreatesPerMinute)
				}
			case "limits":
				want := tes.DefaultLimits()
				want.Executors, want.Inputs, want.RAMGB, want.DiskGB = 3, 0, 0.5, 20
				if cfg.Limits != want {
					t.Errorf("limits %+v, want %+v", cfg.Limits, want)
				}
			}
			if c.name == "storage and tail" && (len(cfg.Info.Storage) != 2 || cfg.Info.Storage[1] != "file:///b" || cfg.LogTailBytes != 1024) {
				t.Errorf("storage %q tail %d", cfg.Info.Storage, cfg.LogTailBytes)
			}
		})
	}
}

// service-info's version is the build's, unless TES_SERVICE_VERSION says
// otherwise; --version prints the build's.
func TestServiceVersion(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v1.4.2"
	if cfg, err := apiConfig(env(nil)); err != nil || cfg.Info.Version != "v1.4.2" {
		t.Errorf("default: %q %v, want the build's v1.4.2", cfg.Info.Version, err)
	}
	if cfg, err := apiConfig(env(map[string]string{"TES_SERVICE_VERSION": " 2.0-site "})); err != nil || cfg.Info.Version != "2.0-site" {
		t.Errorf("TES_SERVICE_VERSION: %q %v, want 2.0-site", cfg.Info.Version, err)
	}
	version.Version = ""
	if cfg, _ := apiConfig(env(nil)); cfg.Info.Version != version.Dev {
		t.Errorf("unset: %q, want %s", cfg.Info.Version, version.Dev)
	}
	version.Version = "v1.4.2"
	var out strings.Builder
	old2 := stdout
	stdout = &out
	t.Cleanup(func() { stdout = old2 })
	if err := run([]string{"--version"}, env(nil)); err != nil || out.String() != "v1.4.2\n" {
		t.Errorf("--version: %q %v", out.String(), err)
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
	if _, ready, err := authenticator(ctx, env(map[string]string{"TES_AUTH": "basic"}), false, log); err != nil || ready == nil || !strings.Contains(fmt.Sprint(ready()), "TES_BASIC_AUTH_FILE") {
		t.Errorf("basic without a users file: %v", err)
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
	// SINK_REQUIRED: a revision the SinkBinding has not bound yet does not
	// start; one it bound does.
	if o, err := parseOptions(nil, env(map[string]string{"SINK_REQUIRED": "true", "K_SINK": "http://broker"})); err != nil || !o.sinkRequired {
		t.Errorf("SINK_REQUIRED with K_SINK: %+v %v", o, err)
	}
	if _, err := parseOptions(nil, env(map[string]string{"SINK_REQUIRED": "true"})); err == nil || !strings.Contains(err.Error(), "K_SINK is not") {
		t.Errorf("SINK_REQUIRED without K_SINK: %v, want an error naming K_SINK", err)
	}
	if _, err := parseOptions([]string{"-sink-required"}, env(nil)); err == nil || !strings.Contains(err.Error(), "K_SINK is not") {
		t.Errorf("-sink-required without K_SINK: %v, want an error naming K_SINK", err)
	}
	if _, err := parseOptions(nil, env(map[string]string{"SINK_REQUIRED": "maybe", "K_SINK": "http://broker"})); err == nil || !strings.Contains(err.Error(), "SINK_REQUIRED") {
		t.Errorf("SINK_REQUIRED=maybe: %v, want an error naming it", err)
	}
	if o, err := parseOptions(nil, env(nil)); err != nil || o.sinkRequired {
		t.Errorf("no K_SINK, not required: %+v %v, want it to start (the sweep starts the tasks)", o, err)
	}
}

func TestAuthModes(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string // the modes, or part of the error
	}{
		{"nothing", nil, ""},
		{"inferred oidc", map[string]string{"OIDC_ISSUER": "http://x"}, "oidc"},
		{"inferred basic", map[string]string{"TES_BASIC_AUTH_FILE": "/u"}, "basic"},
		{"inferred both", map[string]string{"OIDC_ISSUER": "http://x", "TES_BASIC_AUTH_FILE": "/u"}, "basic,oidc"},
		{"oidc", map[string]string{"TES_AUTH": "oidc"}, "oidc"},
		{"basic", map[string]string{"TES_AUTH": " Basic "}, "basic"},
		{"both", map[string]string{"TES_AUTH": "oidc, basic"}, "basic,oidc"},
		{"twice", map[string]string{"TES_AUTH": "basic,basic"}, "basic"},
		{"none", map[string]string{"TES_AUTH": "none", "OIDC_ISSUER": "http://x"}, "none"},
		{"none and more", map[string]string{"TES_AUTH": "none,basic"}, "error: none goes alone"},
		{"unknown", map[string]string{"TES_AUTH": "ldap"}, "error: use oidc, basic"},
		{"empty item", map[string]string{"TES_AUTH": "oidc,"}, "error: use oidc, basic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			modes, err := authModes(env(c.env), false)
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%v %v, want an error naming %q", modes, err, want)
				}
				return
			}
			if err != nil || strings.Join(modes, ",") != c.want {
				t.Errorf("%v %v, want %q", modes, err, c.want)
			}
		})
	}
	if modes, err := authModes(env(map[string]string{"TES_AUTH": "oidc"}), true); err != nil || strings.Join(modes, ",") != "none" {
		t.Errorf("--no-auth: %v %v", modes, err)
	}
}

// TestBasicAccess: TES_AUTH=basic reads the users file at start (a file
// that does not parse is an exit naming its line), alone or with OIDC; the
// dashboard is told the modes.
func TestBasicAccess(t *testing.T) {
	log := zap.NewNop().Sugar()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "users"), filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("alice:"+string(h)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("alice:"+string(h)+"\nbob:plain\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  map[string]string
		want string // "error: ..." an exit naming it; "reason: ..." not ready naming it; else the dashboard's modes
	}{
		{"basic", map[string]string{"TES_AUTH": "basic", "TES_BASIC_AUTH_FILE": good, "TES_BASIC_AUTH_ADMINS": "alice, root"}, "basic"},
		{"inferred", map[string]string{"TES_BASIC_AUTH_FILE": good}, "basic"},
		{"bad file", map[string]string{"TES_AUTH": "basic", "TES_BASIC_AUTH_FILE": bad}, "error: line 2"},
		{"no file", map[string]string{"TES_AUTH": "basic", "TES_BASIC_AUTH_FILE": filepath.Join(dir, "none")}, "error: TES_BASIC_AUTH_FILE"},
		{"both", map[string]string{"TES_AUTH": "oidc,basic", "TES_BASIC_AUTH_FILE": good, "OIDC_ISSUER": "http://127.0.0.1:1", "OIDC_AUDIENCE": "tesk"}, "basic,oidc"},
		{"both without an issuer", map[string]string{"TES_AUTH": "oidc,basic", "TES_BASIC_AUTH_FILE": good}, "reason: OIDC_ISSUER"},
		{"both, shared owners", map[string]string{"TES_AUTH": "oidc,basic", "TES_BASIC_AUTH_FILE": good, "OIDC_ISSUER": "http://127.0.0.1:1", "OIDC_AUDIENCE": "tesk", "TES_AUTH_SHARED_OWNERS": "true"}, "basic,oidc"},
		{"shared owners not a boolean", map[string]string{"TES_AUTH": "oidc,basic", "TES_BASIC_AUTH_FILE": good, "OIDC_ISSUER": "http://127.0.0.1:1", "OIDC_AUDIENCE": "tesk", "TES_AUTH_SHARED_OWNERS": "maybe"}, "error: TES_AUTH_SHARED_OWNERS"},
		{"opaque tokens unknown", map[string]string{"TES_AUTH": "oidc", "OIDC_ISSUER": "http://x", "OIDC_AUDIENCE": "a", "OIDC_OPAQUE_TOKENS": "introspect"}, "error: OIDC_OPAQUE_TOKENS"},
		{"allowed groups without their claim", map[string]string{"TES_AUTH": "oidc", "OIDC_ISSUER": "http://x", "OIDC_AUDIENCE": "a", "OIDC_ALLOWED_GROUPS": "lab"}, "error: OIDC_GROUPS_CLAIM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ready, err := authenticator(ctx, env(c.env), false, log)
			if want, ok := strings.CutPrefix(c.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%v, want an error naming %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if want, ok := strings.CutPrefix(c.want, "reason: "); ok {
				if ready == nil || !strings.Contains(fmt.Sprint(ready()), want) {
					t.Errorf("not ready naming %q wanted", want)
				}
				return
			}
			if d := dashboardConfig(env(c.env), false, a); d.Auth != c.want || (d.Issuer != "") != strings.Contains(c.want, "oidc") {
				t.Errorf("dashboard %+v, want %s", d, c.want)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.SetBasicAuth("alice", "pw")
			caller, err := a.Authenticate(r)
			// With tokens too, Basic user alice is not the token subject
			// alice unless the operator says so.
			subject := "alice"
			if c.env["OIDC_ISSUER"] != "" && c.env["TES_AUTH_SHARED_OWNERS"] != "true" {
				subject = "basic:alice"
			}
			if err != nil || caller.Subject != subject || caller.All != (c.env["TES_BASIC_AUTH_ADMINS"] != "") {
				t.Errorf("alice: %+v %v", caller, err)
			}
			r.SetBasicAuth("alice", "wrong")
			if _, err := a.Authenticate(r); err == nil {
				t.Error("a wrong password let through")
			}
		})
	}
	// Without access control, or not ready, the dashboard is told none.
	if d := dashboardConfig(env(map[string]string{"TES_AUTH": "none"}), false, nil); d.Auth != "none" {
		t.Errorf("none: dashboard %+v", d)
	}
}

// A BACKEND_PARAMETERS that does not parse stops the TES API at start.
func TestInvalidBackendParameters(t *testing.T) {
	err := run([]string{"--no-auth"}, env(map[string]string{"BACKEND_PARAMETERS": "zones: {allowed: [a b]}", "NAMESPACE": "tesk"}))
	if err == nil || !strings.Contains(err.Error(), "BACKEND_PARAMETERS: zones.allowed[0]") {
		t.Errorf("%v, want an error naming BACKEND_PARAMETERS and zones.allowed[0]", err)
	}
}
