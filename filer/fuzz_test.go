package filer

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// FuzzRedact: no panic, and no user info or query survives.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"https://user:pw@host/p?sig=x#frag", "s3://b/k", "ftp://u@h:21/x", "http://h/%zz?q", "user:pw@host/p?x",
		"http://[::1]:80/p?x=1", "file:///a/b", "://@@?", "http://a@b@c/d?e", "mailto:x@y?z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := Redact(raw)
		if strings.ContainsAny(got, "?#") {
			t.Fatalf("Redact(%q) = %q keeps a query or fragment", raw, got)
		}
		if u, err := url.Parse(got); err == nil && u.User != nil {
			t.Fatalf("Redact(%q) = %q keeps user info", raw, got)
		}
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && len(p) >= minSecret && strings.Contains(got, p) && !strings.Contains(u.Host+u.Path, p) {
				t.Fatalf("Redact(%q) = %q keeps the password", raw, got)
			}
		}
	})
}

// FuzzPaths: an executor path, a remote name below it (an S3 key, an FTP
// listing) and a wildcard output: no panic, and nothing is ever written
// outside the task directory, even with links on the volume that lead out.
func FuzzPaths(f *testing.F) {
	for _, s := range [][2]string{
		{"/data/x", "a/b"}, {"/data/link/x", "y"}, {"/data/rel/x", "y"}, {"/data/x", "../../../outside/y"},
		{"/data/../x", "z"}, {"/data/x", "a//b"}, {"/data/x", "/etc/passwd"}, {"/data/x", "dir/"},
		{"/data/x", "./y"}, {"/data/*/x", "?"}, {"/data/x\x00", "y"}, {"/data/link", "x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, execPath, rel string) {
		base := t.TempDir()
		taskDir := filepath.Join(base, "task")
		outside := filepath.Join(base, "outside")
		// The setup must hold, or the check below that nothing was written
		// outside would pass for want of an outside to write to.
		mkdirAll(t, filepath.Join(taskDir, "data"))
		mkdirAll(t, outside)
		symlink(t, outside, filepath.Join(taskDir, "data/link"))
		symlink(t, "../../outside", filepath.Join(taskDir, "data/rel"))

		if hp, err := HostPath(taskDir, execPath); err == nil {
			if hp != taskDir && !strings.HasPrefix(hp, taskDir+"/") {
				t.Fatalf("HostPath(%q) = %q is outside %s", execPath, hp, taskDir)
			}
		}
		target := execPath
		if clean, _, err := safeRel(rel); err == nil {
			if strings.Contains("/"+clean+"/", "/../") || path.IsAbs(clean) {
				t.Fatalf("safeRel(%q) = %q", rel, clean)
			}
			target = path.Join(execPath, clean)
		}
		xfer := filepath.Join(base, "xfer")
		mkdirAll(t, xfer)
		task := newTask([]taskspec.Input{{Content: "x", Path: target}}, []taskspec.Output{
			{URL: "file:///xfer/p", Path: target, PathPrefix: taskspec.StaticDir(target)},
		})
		if task.Validate() == nil {
			opts := Options{TaskDir: taskDir, Parallelism: 1, HostBasePath: "/xfer", ContainerBasePath: xfer}
			_, _ = Run(t.Context(), ModeInputs, task, opts)
			_, _ = Run(t.Context(), ModeOutputs, task, opts)
			for _, o := range task.Outputs {
				_, _ = o.URLFor(target)
			}
		}
		if entries := readDir(t, outside); len(entries) != 0 {
			t.Fatalf("%q (rel %q) wrote outside the task directory: %v", execPath, rel, entries)
		}
	})
}
