package filer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// The test binary is the file writer when the filer starts it as one, as
// cmd/filer's main is.
func init() {
	if len(os.Args) > 1 && os.Args[1] == WriterCommand {
		os.Exit(ServeFileWriter(os.Args[2:], os.Stderr))
	}
}

func TestParseFileWriter(t *testing.T) {
	for _, c := range []struct {
		as, groups string
		want       *FileWriter
		err        string
	}{
		{"65532:65532", "", &FileWriter{UID: 65532, GID: 65532}, ""},
		{" 1000:0 ", "65532, 7,", &FileWriter{UID: 1000, GID: 0, Groups: []uint32{65532, 7}}, ""},
		{"4294967294:4294967294", "", &FileWriter{UID: 4294967294, GID: 4294967294}, ""},
		{"65532", "", nil, `FILER_WRITE_AS: "65532" is not UID:GID`},
		{"0:65532", "", nil, "FILER_WRITE_AS: user 0 is root"},
		{"nobody:65532", "", nil, `FILER_WRITE_AS: user "nobody" is not a number`},
		{"65532:-1", "", nil, `FILER_WRITE_AS: group "-1" is not a number`},
		{"4294967295:1", "", nil, `FILER_WRITE_AS: user "4294967295" is not a number`},
		{"65532:65532", "65532,x", nil, `FILER_WRITE_GROUPS: "x" is not a number`},
	} {
		t.Run(c.as+"/"+c.groups, func(t *testing.T) {
			got, err := ParseFileWriter(c.as, c.groups)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestFileWriterFromEnv(t *testing.T) {
	for _, c := range []struct {
		as, groups string
		want       *FileWriter
		err        string
	}{
		{"", "", nil, ""},
		{"65532:65532", "65532", &FileWriter{UID: 65532, GID: 65532, Groups: []uint32{65532}}, ""},
		{"", "65532", nil, "FILER_WRITE_GROUPS is set without FILER_WRITE_AS"},
		{"0:0", "", nil, "FILER_WRITE_AS: user 0"},
	} {
		t.Setenv("FILER_WRITE_AS", c.as)
		t.Setenv("FILER_WRITE_GROUPS", c.groups)
		o, err := OptionsFromEnv()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q %q: error %v, want one with %q", c.as, c.groups, err, c.err)
		case c.err == "" && (err != nil || !reflect.DeepEqual(o.FileWriter, c.want)):
			t.Errorf("%q %q: %+v, %v; want %+v", c.as, c.groups, o.FileWriter, err, c.want)
		}
	}
}

// writerUID and writerGID are the writer's user and group in these tests,
// the filer's; ownerUID owns another user's files.
const (
	writerUID = 65532
	writerGID = 65532
	ownerUID  = 1000
)

// asRoot skips a test that starts writers as another user where it cannot.
func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		// CI runs as root (.ci/run, make test): there it must run.
		if os.Getenv("CI") != "" {
			t.Fatal("starts the file writer as another user, which needs root: CI must run as root")
		}
		t.Skip("starts the file writer as another user, which needs root")
	}
}

// openDir makes a directory that every user may enter and read.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tesk-writer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writerProgram is a copy of the test binary that the writer's user may
// run (go test's own directory is its builder's alone).
func writerProgram(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	prog := filepath.Join(openDir(t), "filer.test")
	out, err := os.OpenFile(prog, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return prog
}

// writerOptions are options whose file:// uploads go through writers of
// user writerUID, and the transfer volume's directory.
func writerOptions(t *testing.T) (Options, string) {
	t.Helper()
	opts, _ := testOptions(t)
	opts.HostBasePath = "/transfer/host"
	opts.ContainerBasePath = openDir(t)
	opts.FileWriter = &FileWriter{UID: writerUID, GID: writerGID, Program: writerProgram(t)}
	return opts, opts.ContainerBasePath
}

// owned creates a file or, for content "/", a directory of another user
// with mode.
func owned(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if content == "/" {
		mkdirAll(t, p)
	} else {
		writeFile(t, p, content)
	}
	if err := os.Chown(p, ownerUID, ownerUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// ownerOf is a file's owner and mode.
func ownerOf(t *testing.T, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d %v", st.Uid, st.Gid, fi.Mode().Perm())
}

// A root filer with a FileWriter writes file:// uploads as the writer's
// user (behaviour §3.13): a FILE, a DIRECTORY (its empty directories too)
// and a wildcard output go where that user may write, owned by it, and the
// file of another user (mode 0644) or a directory it may not write stays
// as it was, the error naming the user. The sources are read by the filer,
// whoever owns them (mode 0600), and a large one arrives whole.
func TestFileWriterWritesAsTheFilersUser(t *testing.T) {
	asRoot(t)
	opts, base := writerOptions(t)
	owned(t, filepath.Join(base, "victim.txt"), "theirs\n", 0o644)
	owned(t, filepath.Join(base, "theirs"), "/", 0o755)
	owned(t, filepath.Join(base, "theirs", "kept.txt"), "kept\n", 0o666)
	mkdirAll(t, filepath.Join(base, "open"))
	if err := os.Chmod(filepath.Join(base, "open"), 0o777); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	sources := map[string]string{
		"/data/out.txt":            "mine\n",
		"/data/big.bin":            string(big),
		"/data/tree/a.txt":         "a\n",
		"/data/tree/sub/b.txt":     "b\n",
		"/data/parts/x.log":        "x\n",
		"/data/parts/y.log":        "y\n",
		"/data/tree/empty/.keepme": "",
	}
	for p, content := range sources {
		owned(t, inTask(opts, p), content, 0o600)
	}
	if err := os.Remove(inTask(opts, "/data/tree/empty/.keepme")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		out  taskspec.Output
		err  string
	}{
		{"another user's file", taskspec.Output{URL: "file:///transfer/host/victim.txt", Path: "/data/out.txt"}, "permission denied"},
		{"a file in another user's directory", taskspec.Output{URL: "file:///transfer/host/theirs/kept.txt", Path: "/data/out.txt"}, ""},
		{"a new file in another user's directory", taskspec.Output{URL: "file:///transfer/host/theirs/new.txt", Path: "/data/out.txt"}, "permission denied"},
		{"a DIRECTORY into another user's directory", taskspec.Output{URL: "file:///transfer/host/theirs/tree", Path: "/data/tree", Type: taskspec.TypeDirectory}, "permission denied"},
		{"a wildcard into another user's directory", taskspec.Output{URL: "file:///transfer/host/theirs/parts", Path: "/data/parts/*.log", PathPrefix: "/data/parts"}, "permission denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := newTask(nil, []taskspec.Output{c.out})
			if c.err == "" {
				// kept.txt is writable by all (0666): the writer may.
				mustRun(t, ModeOutputs, task, opts)
				return
			}
			msg := runErr(t, ModeOutputs, task, opts)
			t.Log(msg)
			wantContains(t, "error", msg, "outputs[0]", c.err,
				fmt.Sprintf("written as the filer's user %d, group %d", writerUID, writerGID))
		})
	}
	if got := readFile(t, filepath.Join(base, "victim.txt")); got != "theirs\n" {
		t.Errorf("another user's file holds %q", got)
	}
	if got := ownerOf(t, filepath.Join(base, "victim.txt")); got != "1000:1000 -rw-r--r--" {
		t.Errorf("another user's file is %s now", got)
	}
	if got := readFile(t, filepath.Join(base, "theirs", "kept.txt")); got != "mine\n" {
		t.Errorf("a file writable by all holds %q", got)
	}
	if entries := readDir(t, filepath.Join(base, "theirs")); len(entries) != 1 {
		t.Errorf("another user's directory holds %v, want kept.txt alone", entries)
	}

	task := newTask(nil, []taskspec.Output{
		{URL: "file:///transfer/host/open/new.txt", Path: "/data/out.txt"},
		{URL: "file:///transfer/host/open/deeper/big.bin", Path: "/data/big.bin"},
		{URL: "file:///transfer/host/open/tree", Path: "/data/tree", Type: taskspec.TypeDirectory},
		{URL: "file:///transfer/host/open/parts", Path: "/data/parts/*.log", PathPrefix: "/data/parts"},
	})
	if files := mustRun(t, ModeOutputs, task, opts); len(files) != 6 {
		t.Errorf("uploaded %+v, want 6 files", files)
	}
	mine := fmt.Sprintf("%d:%d", writerUID, writerGID)
	for p, want := range map[string]string{
		"open/new.txt": "mine\n", "open/deeper/big.bin": string(big), "open/tree/a.txt": "a\n",
		"open/tree/sub/b.txt": "b\n", "open/parts/x.log": "x\n", "open/parts/y.log": "y\n",
	} {
		if got := readFile(t, filepath.Join(base, p)); got != want {
			t.Errorf("%s holds %d bytes, want %d", p, len(got), len(want))
		}
		if got := ownerOf(t, filepath.Join(base, p)); !strings.HasPrefix(got, mine+" ") {
			t.Errorf("%s is %s, want owned by %s", p, got, mine)
		}
	}
	for _, d := range []string{"open/deeper", "open/tree", "open/tree/sub", "open/tree/empty", "open/parts"} {
		if got := ownerOf(t, filepath.Join(base, d)); !strings.HasPrefix(got, mine+" ") {
			t.Errorf("directory %s is %s, want owned by %s", d, got, mine)
		}
	}
}

// A writer's symbolic links lead nowhere outside the base path either.
func TestFileWriterStaysBelowBasePath(t *testing.T) {
	asRoot(t)
	opts, base := writerOptions(t)
	outside := openDir(t)
	if err := os.Chmod(outside, 0o777); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(base, "escape"))
	writeFile(t, inTask(opts, "/data/o"), "o")
	task := newTask(nil, []taskspec.Output{{URL: "file:///transfer/host/escape/x", Path: "/data/o"}})
	wantContains(t, "error", runErr(t, ModeOutputs, task, opts), "outputs[0]", "escape")
	if entries := readDir(t, outside); len(entries) != 0 {
		t.Errorf("something was written outside the base path: %v", entries)
	}
}

// A base path the writer's user may not enter fails each upload, naming
// CONTAINER_BASE_PATH and the user.
func TestFileWriterBasePathClosedToItsUser(t *testing.T) {
	asRoot(t)
	opts, base := writerOptions(t)
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, inTask(opts, "/data/o"), "o")
	task := newTask(nil, []taskspec.Output{{URL: "file:///transfer/host/o", Path: "/data/o"}})
	wantContains(t, "error", runErr(t, ModeOutputs, task, opts), "outputs[0]", "CONTAINER_BASE_PATH: ", "permission denied", "the filer's user 65532, group 65532")
	if entries := readDir(t, base); len(entries) != 0 {
		t.Errorf("the base path holds %v", entries)
	}
}

// A writer runs as the writer's user, group and groups, with no
// capability, and ends with the run.
func TestFileWriterProcess(t *testing.T) {
	asRoot(t)
	ws := newWriters(FileWriter{UID: writerUID, GID: writerGID, Groups: []uint32{4242, 65532}, Program: writerProgram(t)}, openDir(t))
	p, err := ws.get()
	if err != nil {
		t.Fatal(err)
	}
	status := readFile(t, fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	want := map[string]string{
		"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532", "Groups": "4242 65532",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000", "CapAmb": "0000000000000000",
	}
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		if w, ok := want[k]; ok {
			if got := strings.Join(strings.Fields(v), " "); got != w {
				t.Errorf("writer's %s: %q, want %q", k, got, w)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("the writer's status lacks %v:\n%s", want, status)
	}
	ws.release(p)
	ws.close()
	select {
	case <-p.exited:
	default:
		t.Error("the writer is still running after the run")
	}
	if _, err := ws.get(); err == nil {
		t.Error("a writer was started after the run")
	}
}

// A run that stops ends the writer that is copying: a source that never
// ends (a FIFO) does not keep the run.
func TestFileWriterStopsWithTheRun(t *testing.T) {
	asRoot(t)
	ws := newWriters(FileWriter{UID: writerUID, GID: writerGID, Program: writerProgram(t)}, openDir(t))
	defer ws.close()
	if err := os.Chmod(ws.base, 0o777); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.WriteString("some bytes"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ws.put(ctx, "endless.txt", r) }()
	for { // until the writer copies
		if _, err := os.Stat(filepath.Join(ws.base, "endless.txt")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("put ended before it was stopped: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("put: %v, want %v", err, context.Canceled)
	}
}
