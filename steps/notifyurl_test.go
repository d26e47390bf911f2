package steps

import (
	"strings"
	"testing"
)

func TestNotifyURLAllowed(t *testing.T) {
	prefixes := []string{"https://hooks.example.org/tes", "http://10.0.0.5:8080/"}
	for _, c := range []struct {
		url  string
		want string // "" allowed, else part of the error
	}{
		{"https://hooks.example.org/tes", ""},
		{"https://hooks.example.org/tes/", ""},
		{"https://hooks.example.org/tes/task-1?run=2", ""},
		{"https://HOOKS.example.org/tes/x", ""},
		{"http://10.0.0.5:8080/anything", ""},
		{"http://10.0.0.5:8080", ""},
		{"https://hooks.example.org/tes2", "not among"},
		{"https://hooks.example.org/", "not among"},
		{"http://hooks.example.org/tes", "not among"},           // another scheme
		{"https://hooks.example.org:8443/tes", "not among"},     // another port
		{"https://hooks.example.org.evil.net/tes", "not among"}, // a host that only starts alike
		{"http://10.0.0.5/x", "not among"},
		{"https://hooks.example.org/tes/../admin", "plain form"},
		{"https://hooks.example.org/tes/%2e%2e/admin", "plain form"},
		{"https://hooks.example.org/tes//x", "plain form"},
		{"https://user:pw@hooks.example.org/tes", "not an http"},
		{"https://hooks.example.org/tes#x", "not an http"},
		{"ftp://hooks.example.org/tes", "not an http"},
		{"/tes", "not an http"},
		{"", "not an http"},
	} {
		err := NotifyURLAllowed(c.url, prefixes)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want allowed", c.url, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error saying %q", c.url, err, c.want)
		}
	}
	if err := NotifyURLAllowed("https://hooks.example.org/tes", nil); err == nil || !strings.Contains(err.Error(), "NOTIFY_URL_PREFIXES") {
		t.Errorf("no prefixes: %v, want a refusal naming NOTIFY_URL_PREFIXES", err)
	}
}

func TestNotifyURLPrefixesFromEnv(t *testing.T) {
	for _, c := range []struct {
		env     string
		want    []string
		problem bool
	}{
		{"", nil, false},
		{"https://a.example/x, http://10.0.0.5:8080/", []string{"https://a.example/x", "http://10.0.0.5:8080/"}, false},
		{"https://a.example https://b.example", []string{"https://a.example", "https://b.example"}, false},
		{"https://a.example,ftp://b.example", nil, true},
		{"a.example/x", nil, true},
		{"https://a.example/?q=1", nil, true},
	} {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			if k == "NOTIFY_URL_PREFIXES" {
				return c.env
			}
			return ""
		})
		if got := strings.Join(cfg.NotifyURLPrefixes, " "); got != strings.Join(c.want, " ") {
			t.Errorf("%q: prefixes %q, want %q", c.env, cfg.NotifyURLPrefixes, c.want)
		}
		if (len(issues) > 0) != c.problem {
			t.Errorf("%q: issues %v, want a problem: %v", c.env, issues, c.problem)
		}
		if c.problem && (issues[0].Name != "NOTIFY_URL_PREFIXES" || issues[0].Level != "error") {
			t.Errorf("%q: issue %+v, want an error of NOTIFY_URL_PREFIXES", c.env, issues[0])
		}
	}
}
