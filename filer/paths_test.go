package filer

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestHostPath(t *testing.T) {
	for _, tc := range []struct {
		exec, want, err string
	}{
		{"/data/x", "/tesk/task/data/x", ""},
		{"/data/dir/", "/tesk/task/data/dir", ""},
		{"/data//x", "/tesk/task/data/x", ""},
		{"/data/./x", "/tesk/task/data/x", ""},
		{"/", "/tesk/task", ""},
		{"/data/../x", "", "'..'"},
		{"/..", "", "'..'"},
		{"data/x", "", "not absolute"},
		{"", "", "not absolute"},
		{"/a\x00b", "", "NUL"},
	} {
		got, err := HostPath("/tesk/task", tc.exec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("HostPath(%q): error %v, want one with %q", tc.exec, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("HostPath(%q) = %q, %v; want %q", tc.exec, got, err, tc.want)
		}
		// It agrees with taskspec for the default task directory.
		if tc.exec != "/" && got != taskspec.FilerPath(tc.exec) {
			t.Errorf("HostPath(%q) = %q, taskspec.FilerPath = %q", tc.exec, got, taskspec.FilerPath(tc.exec))
		}
	}
}

func TestSafeRel(t *testing.T) {
	for _, tc := range []struct {
		rel   string
		clean string
		dir   bool
		ok    bool
	}{
		{"a", "a", false, true},
		{"a/b/c.txt", "a/b/c.txt", false, true},
		{"a/b/", "a/b", true, true},
		{"..", "", false, false},
		{"../x", "", false, false},
		{"a/../../x", "", false, false},
		{"a/./b", "", false, false},
		{"a//b", "", false, false},
		{"/abs", "", false, false},
		{"", "", false, false},
		{"/", "", true, false},
		{"a\x00", "", false, false},
		{"..a/b..", "..a/b..", false, true},
	} {
		clean, dir, err := safeRel(tc.rel)
		if (err == nil) != tc.ok || (tc.ok && (clean != tc.clean || dir != tc.dir)) {
			t.Errorf("safeRel(%q) = %q, %v, %v", tc.rel, clean, dir, err)
		}
	}
}

func TestSafeName(t *testing.T) {
	for name, ok := range map[string]bool{"a": true, "a b": true, ".hidden": true, "": false, ".": false, "..": false, "a/b": false, "x\x00": false} {
		if err := safeName(name); (err == nil) != ok {
			t.Errorf("safeName(%q): %v", name, err)
		}
	}
}

// Symbolic links resolve as in the executors: an absolute target is an
// executor path, so below the task directory; nothing leads out of it.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret"), "secret")
	writeFile(t, filepath.Join(dir, "data/in/real.txt"), "real")
	links := map[string]string{
		"data/out/abs":       "/data/in/real.txt",
		"data/out/rel":       "../in/real.txt",
		"data/out/dirlink":   "/data/in",
		"data/out/escape":    "../../../" + strings.TrimPrefix(outside, "/") + "/secret",
		"data/out/hostabs":   filepath.Join(outside, "secret"),
		"data/out/loop":      "loop",
		"data/out/chain":     "abs",
		"data/out/upandover": "/../../data/in/real.txt",
	}
	for l, target := range links {
		mkdirAll(t, filepath.Dir(filepath.Join(dir, l)))
		if err := os.Symlink(target, filepath.Join(dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		rel, want, err string
	}{
		{"data/in/real.txt", "data/in/real.txt", ""},
		{"data/out/abs", "data/in/real.txt", ""},
		{"data/out/rel", "data/in/real.txt", ""},
		{"data/out/chain", "data/in/real.txt", ""},
		{"data/out/dirlink/real.txt", "data/in/real.txt", ""},
		{"data/out/escape", "", "above the task directory"},
		{"data/out/upandover", "", "above the task directory"},
		{"data/out/hostabs", "", "no such file"}, // a host path is not an executor path
		{"data/out/loop", "", "too many levels"},
	} {
		got, err := resolve(root, tc.rel)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("resolve(%q) = %q, %v; want error with %q", tc.rel, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.rel, got, err, tc.want)
		}
	}
}

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"data/a/out.txt", "data/b/out.txt", "data/b/other.txt", "data/c/d/out.txt", "data/x.txt", "data/[lit]/out.txt",
		"data/.hidden.txt", "data/.cache/out.txt", "work/.command.out", "work/.exitcode", "work/a.txt", "work/b.csv"} {
		writeFile(t, filepath.Join(dir, f), f)
	}
	mkdirAll(t, filepath.Join(dir, "data/dir.txt"))
	symlink(t, "/data/a/out.txt", filepath.Join(dir, "data/link.txt"))
	symlink(t, "/nowhere", filepath.Join(dir, "data/dangling.txt"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, tc := range []struct {
		pattern     string
		files, dirs []string
	}{
		{"/data/*/out.txt", []string{"/data/[lit]/out.txt", "/data/a/out.txt", "/data/b/out.txt"}, nil},
		{"/data/*.txt", []string{"/data/link.txt", "/data/x.txt"}, []string{"/data/dir.txt"}},
		{"/data/?/o*", []string{"/data/a/out.txt", "/data/b/other.txt", "/data/b/out.txt"}, nil},
		{"/data/[ab]/out.txt", []string{"/data/a/out.txt", "/data/b/out.txt"}, nil},
		{"/data/\\[lit]/*", []string{"/data/[lit]/out.txt"}, nil},
		{"/data/*/d/*", []string{"/data/c/d/out.txt"}, nil},
		{"/nothing/*", nil, nil},
		// POSIX: a leading period is matched only by a period written
		// first, so a work directory's control files stay out of `*`.
		{"/work/*", []string{"/work/a.txt", "/work/b.csv"}, nil},
		{"/work/.*", []string{"/work/.command.out", "/work/.exitcode"}, nil},
		{"/work/.command.*", []string{"/work/.command.out"}, nil},
		{"/data/.*/out.txt", []string{"/data/.cache/out.txt"}, nil},
		{"/work/[!a]*", []string{"/work/b.csv"}, nil},
		{"/work/?exitcode", nil, nil},
	} {
		files, dirs, err := glob(root, tc.pattern)
		if err != nil || !reflect.DeepEqual(files, tc.files) || !reflect.DeepEqual(dirs, tc.dirs) {
			t.Errorf("glob(%q) = %q, %q, %v; want %q, %q", tc.pattern, files, dirs, err, tc.files, tc.dirs)
		}
		// Every match belongs to the output, as URLFor sees it.
		out := taskspec.Output{URL: "s3://b/p", Path: tc.pattern, PathPrefix: taskspec.StaticDir(tc.pattern)}
		for _, f := range files {
			if _, ok := out.URLFor(f); !ok {
				t.Errorf("glob(%q) matched %q, which URLFor refuses", tc.pattern, f)
			}
		}
	}
}

// Inputs never write outside the task directory, whatever links are there.
func TestInputsStayInTaskDir(t *testing.T) {
	outside := t.TempDir()
	for _, link := range []string{outside, "../../../../../../../../" + strings.TrimPrefix(outside, "/")} {
		opts, _ := testOptions(t)
		mkdirAll(t, inTask(opts, "/data"))
		symlink(t, link, inTask(opts, "/data/evil"))
		task := newTask([]taskspec.Input{{Content: "pwned", Path: "/data/evil/x"}}, nil)
		msg := runErr(t, ModeInputs, task, opts)
		wantContains(t, "error", msg, "inputs[0] /data/evil/x")
		if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
			t.Fatalf("an input was written through the link %s", link)
		}
	}
}

// Outputs never read outside the task directory (e.g. the filer's own
// credentials) through a link an executor left.
func TestOutputsStayInTaskDir(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "credentials"), "aws_secret_access_key = SECRET")
	st := newStore()
	srv := newHTTPTestServer(t, st)
	for _, tc := range []struct {
		name string
		out  taskspec.Output
		want string // in the error for a link that escapes
	}{
		{"file", taskspec.Output{URL: srv + "/f", Path: "/data/out/creds"}, "outputs[0] /data/out/creds"},
		{"directory", taskspec.Output{URL: srv + "/d", Path: "/data/out", Type: taskspec.TypeDirectory}, "/data/out/creds"},
		{"wildcard", taskspec.Output{URL: srv + "/w", Path: "/data/out/*", PathPrefix: "/data"}, "/data/out/creds"},
	} {
		// A link to a host path names an executor path that is not on the
		// task volume: a FILE output is missing, the others skip it.
		opts, _ := testOptions(t)
		mkdirAll(t, inTask(opts, "/data/out"))
		symlink(t, filepath.Join(outside, "credentials"), inTask(opts, "/data/out/creds"))
		files, err := Run(t.Context(), ModeOutputs, newTask(nil, []taskspec.Output{tc.out}), opts)
		if tc.name == "file" {
			if err == nil {
				t.Errorf("%s: no error", tc.name)
			} else {
				wantContains(t, "error", err.Error(), "no such file")
			}
		} else if err != nil || len(files) != 0 {
			t.Errorf("%s: uploaded %v, %v", tc.name, files, err)
		}
		// A relative link that climbs out of the task directory is an error.
		opts, _ = testOptions(t)
		mkdirAll(t, inTask(opts, "/data/out"))
		symlink(t, "../../../../../../../../"+strings.TrimPrefix(outside, "/")+"/credentials", inTask(opts, "/data/out/creds"))
		_, err = Run(t.Context(), ModeOutputs, newTask(nil, []taskspec.Output{tc.out}), opts)
		if err == nil {
			t.Errorf("%s: escaping link: no error", tc.name)
		} else {
			wantContains(t, "error", err.Error(), tc.want, "above the task directory")
		}
	}
	for p, b := range st.files {
		if strings.Contains(string(b), "SECRET") {
			t.Errorf("%s received the secret", p)
		}
	}
}
