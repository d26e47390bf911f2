package taskspec

import "testing"

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"/work/*.txt", "/work/a.txt", true},
		{"/work/*.txt", "/work/.hidden.txt", false},
		{"/work/*", "/work/.command.out", false},
		{"/work/?command.out", "/work/.command.out", false},
		{"/work/[.]command.out", "/work/.command.out", false},
		{"/work/.*", "/work/.command.out", true},
		{`/work/\.c*`, "/work/.command.out", true},
		{"/work/.command.*", "/work/.command.err", true},
		{"/work/*/x.txt", "/work/.nf/x.txt", false},
		{"/work/.nf/*.txt", "/work/.nf/x.txt", true},
		{"/work/*.txt", "/work/sub/a.txt", false},
		{"/work/*/*.txt", "/work/sub/a.txt", true},
		{"/work/[!a]*", "/work/b.txt", true},
		{"/work/[!a]*", "/work/a.txt", false},
		{"/work/[!a]*", "/work/!x", true},
		{"/work/[^a]*", "/work/a.txt", false},
		{`/work/\[!a]`, "/work/[!a]", true},
		{"/work/a.txt", "/work/a.txt", true},
	} {
		got, err := MatchPattern(tc.pattern, tc.path)
		if err != nil || got != tc.want {
			t.Errorf("MatchPattern(%q, %q) = %v, %v; want %v", tc.pattern, tc.path, got, err, tc.want)
		}
	}
	if _, err := MatchPattern("/work/[a", "/work/a"); err == nil {
		t.Error("a malformed pattern matched without an error")
	}
}

func TestOutputPattern(t *testing.T) {
	for _, tc := range []struct {
		out      Output
		pattern  bool
		mountDir string
	}{
		{Output{Path: "/work/*.txt", PathPrefix: "/work"}, true, "/work"},
		{Output{Path: "/work/a?/b.txt", PathPrefix: "/work"}, true, "/work"},
		{Output{Path: "/work/x[1]/y.txt", PathPrefix: "/work"}, true, "/work"},
		{Output{Path: "/work/x[1]/y.txt"}, false, "/work/x[1]"},
		{Output{Path: "/work/x[1]", Type: TypeDirectory}, false, "/work/x[1]"},
		{Output{Path: "/work/plain.txt", PathPrefix: "/work"}, false, "/work"},
	} {
		if got := tc.out.Pattern(); got != tc.pattern {
			t.Errorf("%+v: Pattern() = %v", tc.out, got)
		}
		if got := tc.out.MountDir(); got != tc.mountDir {
			t.Errorf("%+v: MountDir() = %q, want %q", tc.out, got, tc.mountDir)
		}
		task := Task{Outputs: []Output{tc.out}}
		if err := task.Refusal(); err != nil {
			t.Errorf("%+v refused: %v", tc.out, err)
		}
	}
}
