package version

import "testing"

func TestGet(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"", Dev},
		{"  ", Dev},
		{"v0.3.0", "v0.3.0"},
		{"v0.3.0-4-gabc1234-dirty", "v0.3.0-4-gabc1234-dirty"},
		{" abc1234\n", "abc1234"},
	} {
		old := Version
		Version = c.set
		if got := Get(); got != c.want {
			t.Errorf("Version %q: Get() = %q, want %q", c.set, got, c.want)
		}
		Version = old
	}
}
