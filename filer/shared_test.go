package filer

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Whatever the umask, every directory the inputs filer creates on the task
// volume is 0777 and every input 0666: executors of any user write there
// (behaviour §3.13). What was there before (the volume's root) keeps its
// mode.
func TestInputsAreSharedWithTheExecutors(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	opts, base := fileOptions(t)
	writeFile(t, filepath.Join(base, "in/tree/sub/c.txt"), "C")
	mkdirAll(t, filepath.Join(base, "in/tree/empty"))
	if err := os.Chmod(opts.TaskDir, 0o750); err != nil {
		t.Fatal(err)
	}
	content := "#!/bin/sh\necho hi\n"
	task := newTask([]taskspec.Input{
		{Path: "/work/.command.run", Content: content},
		{Path: "/work/.command.sh", Content: content},
		{URL: "file:///transfer/host/in/tree", Path: "/data/deep/tree", Type: taskspec.TypeDirectory},
	}, nil)
	mustRun(t, ModeInputs, task, opts)

	for p, want := range map[string]fs.FileMode{
		"/":                         0o750,
		"/work":                     fs.ModeDir | 0o777,
		"/work/.command.run":        0o666,
		"/work/.command.sh":         0o666,
		"/data":                     fs.ModeDir | 0o777,
		"/data/deep":                fs.ModeDir | 0o777,
		"/data/deep/tree":           fs.ModeDir | 0o777,
		"/data/deep/tree/sub":       fs.ModeDir | 0o777,
		"/data/deep/tree/empty":     fs.ModeDir | 0o777,
		"/data/deep/tree/sub/c.txt": 0o666,
	} {
		fi, err := os.Stat(inTask(opts, p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if p == "/" {
			want |= fs.ModeDir
		}
		if got := fi.Mode() & (fs.ModeDir | fs.ModePerm); got != want {
			t.Errorf("%s has mode %v, want %v", p, got, want)
		}
	}
	if got := readFile(t, inTask(opts, "/data/deep/tree/sub/c.txt")); got != "C" {
		t.Errorf("c.txt = %q", got)
	}
}

// A file where an input's directory must go is an error, not a directory
// made elsewhere.
func TestMkdirSharedRefusesAFileInTheWay(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), "x")
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := mkdirShared(root, "a/b"); err == nil {
		t.Fatal("mkdirShared through a file succeeded")
	}
	if err := mkdirShared(root, "c/d"); err != nil {
		t.Fatal(err)
	}
	// Twice is the same as once.
	if err := mkdirShared(root, "c/d"); err != nil {
		t.Fatal(err)
	}
}
