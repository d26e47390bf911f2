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
		// The redacted check decides alike, and its error names the
		// address by RedactNotifyURL only.
		rerr := NotifyURLAllowedRedacted(c.url, prefixes)
		switch {
		case (rerr == nil) != (err == nil):
			t.Errorf("%q: redacted %v, plain %v: want the same decision", c.url, rerr, err)
		case rerr != nil && (!strings.Contains(rerr.Error(), c.want) || !strings.Contains(rerr.Error(), RedactNotifyURL(c.url))):
			t.Errorf("%q: redacted %v, want an error saying %q and naming %s", c.url, rerr, c.want, RedactNotifyURL(c.url))
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

// RedactNotifyURL keeps a notification URL's scheme, host and port only:
// its path, query, fragment and user may hold a token, and never show,
// whatever the URL's form.
func TestRedactNotifyURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://hooks.example.org/tes/SECRET", "https://hooks.example.org/…"},
		{"https://hooks.example.org/tes?token=SECRET", "https://hooks.example.org/…"},
		{"https://hooks.example.org?token=SECRET", "https://hooks.example.org/…"},
		{"https://hooks.example.org#SECRET", "https://hooks.example.org/…"},
		{"https://hooks.example.org", "https://hooks.example.org/…"},
		{"http://10.0.0.5:8080/hooks/SECRET/x?a=SECRET#SECRET", "http://10.0.0.5:8080/…"},
		{"http://[fd00::5]:8080/SECRET", "http://[fd00::5]:8080/…"},
		{"https://SECRET:SECRET@hooks.example.org/SECRET", "https://hooks.example.org/…"},
		{"https://SECRET@hooks.example.org", "https://hooks.example.org/…"},
		{"https://a@SECRET@hooks.example.org/x", "https://hooks.example.org/…"},
		{"https://SECRET:p%zz@hooks.example.org/SECRET", "…"}, // does not parse
		{"https://hooks.example.org:SECRET/x", "…"},           // a port that is not one
		{"https://hooks SECRET.example.org/x", "…"},
		{"https:SECRET@hooks.example.org/SECRET", "…"}, // opaque
		{"https:///SECRET?SECRET", "…"},                // no host
		{"//hooks.example.org/SECRET", "…"},            // no scheme
		{"hooks.example.org/SECRET?token=SECRET", "…"},
		{"SECRET", "…"},
		{"", "…"},
	} {
		got := RedactNotifyURL(c.in)
		if got != c.want || strings.Contains(got, "SECRET") {
			t.Errorf("RedactNotifyURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
