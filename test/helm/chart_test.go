package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var oidc = map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://login.example.org/oidc/"}}}

func TestLint(t *testing.T) {
	basic := map[string]any{"auth": map[string]any{"mode": "basic", "basic": map[string]any{"usersSecret": "tes-users"}}}
	for _, vals := range []map[string]any{oidc, basic, {"auth": map[string]any{"mode": "none"}},
		{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}}}} {
		if msgs := Lint(vals); len(msgs) > 0 {
			t.Errorf("lint %v: %s", vals, strings.Join(msgs, "\n"))
		}
	}
}

// Every value of values.yaml is set to something other than its default and
// shows in the rendering.
func TestTemplateValues(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want []string
	}{
		{"namespaces", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "p1", "tasks": "t1"}},
			[]string{"namespace: p1", "namespace: t1", `NAMESPACE: "t1"`, "kubernetes.io/metadata.name: t1"}},
		{"images", map[string]any{"auth": map[string]any{"mode": "none"}, "images": map[string]any{
			"handler":      map[string]any{"repository": "r/h", "tag": "v1"},
			"tes":          map[string]any{"repository": "r/t", "tag": ""},
			"filer":        map[string]any{"repository": "r/f", "tag": "v3"},
			"eventDisplay": map[string]any{"repository": "r/d", "tag": "v4"}}},
			[]string{"image: r/h:v1", "image: r/t\n", `FILER_NAME: "r/f"`, `FILER_VERSION: "v3"`, "image: r/d:v4"}},
		{"auth", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://i.example/", "audience": "aud", "groupsClaim": "g", "adminGroup": "admins"}}},
			[]string{`TES_AUTH: "oidc"`, `OIDC_ISSUER: "https://i.example/"`, `OIDC_AUDIENCE: "aud"`, `OIDC_GROUPS_CLAIM: "g"`, `OIDC_ADMIN_GROUP: "admins"`}},
		{"basic", map[string]any{"auth": map[string]any{"mode": "oidc,basic", "oidc": map[string]any{"issuer": "https://i.example/", "opaqueTokens": "off"}, "basic": map[string]any{"usersSecret": "tes-users", "admins": "root,ops"}}},
			[]string{`TES_AUTH: "oidc,basic"`, `OIDC_OPAQUE_TOKENS: "off"`, `TES_BASIC_AUTH_FILE: "/etc/tesk/basic-auth/users"`, `TES_BASIC_AUTH_ADMINS: "root,ops"`, "secretName: tes-users", "mountPath: /etc/tesk/basic-auth"}},
		{"tasks", map[string]any{"auth": map[string]any{"mode": "none"}, "tasks": map[string]any{"executorRetries": 5, "filerRetries": 1, "podTimeoutSeconds": 60, "maxQueueSeconds": 3600, "ttlSeconds": 86400}},
			[]string{`TES_AUTH: "none"`, `EXECUTOR_BACKOFF_LIMIT: "5"`, `FILER_BACKOFF_LIMIT: "1"`, `POD_TIMEOUT: "60"`, `TESK_MAX_QUEUE_SECONDS: "3600"`, `TASK_TTL_SECONDS: "86400"`}},
		{"trustEvents", map[string]any{"auth": map[string]any{"mode": "none"}, "trustEvents": true}, []string{`TRUST_EVENTS: "true"`}},
		{"backendParameters", map[string]any{"auth": map[string]any{"mode": "none"}, "backendParameters": map[string]any{"zones": map[string]any{"allowed": []any{"a", "b"}}}},
			[]string{`BACKEND_PARAMETERS: "{\"zones\":{\"allowed\":[\"a\",\"b\"]}}"`}},
		{"metrics", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{
			"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}}}},
			[]string{"kind: PodMonitor", "interval: 15s", "release: prom", `K_OBSERVABILITY_CONFIG: "{\"metrics-protocol\": \"prometheus\"}"`}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		out, err := Render(c.vals)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: rendering lacks %q", c.name, w)
			}
		}
		leaves("", c.vals, covered)
	}
	defaults := map[string]any{}
	if err := yamlUnmarshalFile(filepath.Join(ChartDir(), "values.yaml"), &defaults); err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	leaves("", defaults, all)
	for k := range all {
		if !covered[k] && !coveredBelow(covered, k) {
			t.Errorf("value %s of values.yaml has no template test", k)
		}
	}
}

// coveredBelow reports whether a test sets a key of the map value k.
func coveredBelow(covered map[string]bool, k string) bool {
	for c := range covered {
		if strings.HasPrefix(c, k+".") {
			return true
		}
	}
	return false
}

// leaves are the values of m, by path; a map that is empty by default (a
// set of labels) is a value of its own.
func leaves(prefix string, m map[string]any, into map[string]bool) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			leaves(prefix+k+".", sub, into)
			continue
		}
		into[prefix+k] = true
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no auth mode", nil, "auth"},
		{"unknown auth mode", map[string]any{"auth": map[string]any{"mode": "ldap"}}, "/auth/mode"},
		{"basic without users", map[string]any{"auth": map[string]any{"mode": "basic"}}, "set auth.basic.usersSecret"},
		{"unknown opaque tokens", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "https://i.example/", "opaqueTokens": "introspect"}}}, "opaqueTokens"},
		{"oidc without issuer", map[string]any{"auth": map[string]any{"mode": "oidc"}}, "set auth.oidc.issuer"},
		{"issuer not a URL", map[string]any{"auth": map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": "login.example"}}}, "issuer"},
		{"same namespace", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "x", "tasks": "x"}}, "must differ"},
		{"bad namespace", map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "Tesk"}}, "/namespaces/platform"},
		{"negative retries", map[string]any{"auth": map[string]any{"mode": "none"}, "tasks": map[string]any{"executorRetries": -1}}, "executorRetries"},
		{"unknown value", map[string]any{"auth": map[string]any{"mode": "none"}, "typo": 1}, "typo"},
		{"podMonitor not a boolean", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"enabled": "yes"}}}, "/metrics/podMonitor/enabled"},
		{"scrape interval not a duration", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"interval": "30"}}}, "/metrics/podMonitor/interval"},
		{"label not a string", map[string]any{"auth": map[string]any{"mode": "none"}, "metrics": map[string]any{"podMonitor": map[string]any{"labels": map[string]any{"n": 1}}}}, "/metrics/podMonitor/labels"},
	}
	for _, c := range cases {
		_, err := Render(c.vals)
		if err == nil {
			t.Errorf("%s: rendered", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q lacks %q", c.name, err, c.want)
		}
	}
}

var _ = os.ReadFile
