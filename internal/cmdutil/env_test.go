package cmdutil

import (
	"strings"
	"testing"
)

func envOf(kv ...string) Env {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestEnv(t *testing.T) {
	e := envOf("A", " a ", "BLANK", "  ", "T", "true", "F", "0", "BAD", "yes please")
	if got := e.String("A", "x"); got != "a" {
		t.Errorf("String(A) = %q, want a (trimmed)", got)
	}
	if got := e.String("BLANK", "x"); got != "x" {
		t.Errorf("String(BLANK) = %q, want the fallback", got)
	}
	for name, want := range map[string]bool{"T": true, "F": false, "UNSET": false} {
		if got, err := e.Bool(name); got != want || err != nil {
			t.Errorf("Bool(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := e.Bool("BAD"); err == nil || !strings.Contains(err.Error(), `BAD="yes please" is not a boolean`) {
		t.Errorf("Bool(BAD) error %v, want one naming the variable", err)
	}
}

func TestPort(t *testing.T) {
	cases := []struct {
		port string
		want int
		bad  bool
	}{{"", 8080, false}, {"9090", 9090, false}, {"0", 0, true}, {"65536", 0, true}, {"http", 0, true}}
	for _, c := range cases {
		got, err := envOf("PORT", c.port).Port(8080)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("PORT=%q: %d, %v; want %d (error: %v)", c.port, got, err, c.want, c.bad)
		}
		if c.bad && !strings.Contains(err.Error(), "PORT=") {
			t.Errorf("PORT=%q: error %v does not name PORT", c.port, err)
		}
	}
}
