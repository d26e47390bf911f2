package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// TestMain lets the filer reach the tests' servers, which listen on
// loopback, a private address.
func TestMain(m *testing.M) {
	os.Setenv("FILER_ALLOWED_CIDRS", "127.0.0.0/8, ::1/128")
	os.Exit(m.Run())
}

func taskJSON(t *testing.T, inputs []taskspec.Input, outputs []taskspec.Output) []byte {
	t.Helper()
	task := map[string]any{
		"executors": []any{map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "ex", "image": "busybox"}},
		}}}}},
		"inputs":  inputs,
		"outputs": outputs,
	}
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putServer stores what is PUT to it.
func putServer(t *testing.T) (*httptest.Server, map[string]string) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = string(b)
		mu.Unlock()
		if r.Method == http.MethodGet {
			w.Write([]byte("served " + r.URL.Path))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v0.3.1"
	for _, args := range [][]string{{"--version"}, {"outputs", "--version"}} {
		if code, stdout, stderr := runCLI(t, "", args...); code != 0 || stdout != "v0.3.1\n" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and the version", args, code, stdout, stderr)
		}
	}
}

func TestInputsFromGzipFile(t *testing.T) {
	srv, _ := putServer(t)
	dir := t.TempDir()
	raw := taskJSON(t, []taskspec.Input{
		{Content: "hello", Path: "/data/hello.txt"},
		{URL: srv.URL + "/remote.txt", Path: "/data/remote.txt"},
	}, nil)
	gz := filepath.Join(t.TempDir(), "JSON_INPUT.gz")
	writeFile(t, gz, taskspec.Gzip(raw))
	code, stdout, stderr := runCLI(t, "", "inputs", "--file", gz, "--task-dir", dir)
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data/hello.txt")); string(b) != "hello" {
		t.Errorf("hello.txt holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "data/remote.txt")); string(b) != "served /remote.txt" {
		t.Errorf("remote.txt holds %q", b)
	}
}

func TestOutputsLine(t *testing.T) {
	srv, got := putServer(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data/out/a.txt"), []byte("aaa"))
	raw := taskJSON(t, nil, []taskspec.Output{
		{URL: srv.URL + "/a.txt", Path: "/data/out/a.txt"},
		{URL: srv.URL + "/all", Path: "/data/out/*.txt", PathPrefix: "/data/out"},
	})
	for _, how := range []struct {
		name  string
		args  []string
		stdin string
		env   string
	}{
		{"argument", []string{"outputs", string(raw)}, "", ""},
		{"stdin", []string{"--file", "-", "outputs"}, string(raw), ""},
		{"env", []string{"outputs"}, "", string(raw)},
		{"plain file, flags after the mode", []string{"outputs", "--file", writeTemp(t, raw)}, "", ""},
	} {
		t.Run(how.name, func(t *testing.T) {
			t.Setenv("JSON_INPUT", how.env)
			t.Setenv("TESK_TASK_DIR", dir)
			code, stdout, stderr := runCLI(t, how.stdin, how.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			want := `TESK_OUTPUT_FILE_LOGS [{"output":0,"path":"/data/out/a.txt","size_bytes":"3"},{"output":1,"path":"/data/out/a.txt","size_bytes":"3"}]` + "\n"
			if stdout != want {
				t.Errorf("stdout %q, want %q", stdout, want)
			}
			if stderr != "" {
				t.Errorf("stderr %q", stderr)
			}
		})
	}
	if got["/a.txt"] != "aaa" || got["/all/a.txt"] != "aaa" {
		t.Errorf("server got %v", got)
	}
}

func TestOutputsLineWithoutOutputs(t *testing.T) {
	code, stdout, _ := runCLI(t, "", "outputs", "--task-dir", t.TempDir(), string(taskJSON(t, nil, nil)))
	if code != 0 || stdout != "TESK_OUTPUT_FILE_LOGS []\n" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
}

func TestDebugLogs(t *testing.T) {
	srv, _ := putServer(t)
	raw := taskJSON(t, []taskspec.Input{{URL: srv.URL + "/x?token=secret-token", Path: "/data/x"}}, nil)
	t.Setenv("DEBUG", "")
	code, _, stderr := runCLI(t, "", "--debug", "inputs", "--task-dir", t.TempDir(), string(raw))
	if code != 0 || !strings.Contains(stderr, "level=DEBUG") || !strings.Contains(stderr, srv.URL+"/x") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if strings.Contains(stderr, "secret-token") {
		t.Errorf("the query shows in the logs: %q", stderr)
	}
	t.Setenv("DEBUG", "true")
	_, _, stderr = runCLI(t, "", "inputs", "--task-dir", t.TempDir(), string(raw))
	if !strings.Contains(stderr, "level=DEBUG") {
		t.Errorf("DEBUG=true: no debug logs: %q", stderr)
	}
}

func TestFailures(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	t.Setenv("JSON_INPUT", "")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no mode", nil, 2, "missing mode"},
		{"bad mode", []string{"sideways"}, 2, "neither inputs nor outputs"},
		{"parallel 0", []string{"inputs", "--parallel", "0", "{}"}, 2, "not a whole number from 1 to 256"},
		{"parallel too many", []string{"inputs", "--parallel=1000", "{}"}, 2, "not a whole number from 1 to 256"},
		{"no task", []string{"inputs"}, 1, "no task JSON"},
		{"bad JSON", []string{"inputs", "{"}, 1, "invalid task"},
		{"missing file", []string{"inputs", "--file", "/nonexistent/JSON_INPUT.gz"}, 1, "no such file"},
		{"not gzip", []string{"inputs", "--file", writeTempName(t, "x.gz", []byte("{}"))}, 1, "not gzip"},
		{"404", []string{"inputs", "--task-dir", t.TempDir(), string(taskJSON(t, []taskspec.Input{{URL: srv.URL + "/gone?sig=abcdef", Path: "/data/x"}}, nil))},
			1, "filer: inputs[0] " + srv.URL + "/gone -> /data/x: GET: HTTP status 404 Not Found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q", stdout)
			}
			if strings.Contains(stderr, "abcdef") {
				t.Errorf("the query shows: %q", stderr)
			}
		})
	}
	t.Setenv("FILER_PARALLELISM", "x")
	if code, _, stderr := runCLI(t, "", "inputs", "{}"); code != 1 || !strings.Contains(stderr, "FILER_PARALLELISM") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	t.Setenv("FILER_PARALLELISM", "")
	t.Setenv("FILER_HTTP_TIMEOUT", "soon")
	if code, _, stderr := runCLI(t, "", "inputs", "{}"); code != 1 || !strings.Contains(stderr, "FILER_HTTP_TIMEOUT") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	t.Setenv("FILER_HTTP_TIMEOUT", "")
	t.Setenv("FILER_ALLOWED_CIDRS", "10.0.0.0/8, loopback")
	if code, _, stderr := runCLI(t, "", "inputs", "{}"); code != 1 || !strings.Contains(stderr, `FILER_ALLOWED_CIDRS: "loopback" is not a CIDR`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	// By default, a private address is refused, and nothing is fetched.
	t.Setenv("FILER_ALLOWED_CIDRS", "")
	got := 0
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got++ }))
	defer private.Close()
	task := string(taskJSON(t, []taskspec.Input{{URL: private.URL + "/x", Path: "/data/x"}}, nil))
	if code, _, stderr := runCLI(t, "", "inputs", "--task-dir", t.TempDir(), task); code != 1 || !strings.Contains(stderr, "a private address, which the filer may not reach") || got != 0 {
		t.Errorf("a loopback input by default: exit %d, stderr %q, %d requests served", code, stderr, got)
	}
}

// The built command: exit status and streams, as the filer jobs see them.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "filer")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data/o"), []byte("o"))
	srv, _ := putServer(t)
	raw := taskJSON(t, nil, []taskspec.Output{{URL: srv.URL + "/o", Path: "/data/o"}, {URL: srv.URL + "/m", Path: "/data/missing"}})
	cmd := exec.Command(bin, "outputs", "--task-dir", dir, string(raw))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v", err)
	}
	if out.Len() != 0 || !strings.HasPrefix(errb.String(), "filer: outputs[1] /data/missing -> "+srv.URL+"/m: ") || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
}

func writeTemp(t *testing.T, b []byte) string { return writeTempName(t, "task.json", b) }

func writeTempName(t *testing.T, name string, b []byte) string {
	p := filepath.Join(t.TempDir(), name)
	writeFile(t, p, b)
	return p
}

// writeFile writes a file of the test's setup, with its directory; an error
// fails the test.
func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The built command as a root outputs filer with FILER_WRITE_AS: its
// file:// uploads are written by the binary itself, started as that user
// (behaviour §3.13): another user's file stays as it was, a new file is
// the user's. FILER_WRITE_AS root is refused, naming the setting.
func TestBinaryWritesFileURLsAsTheFilersUser(t *testing.T) {
	if os.Geteuid() != 0 {
		// CI runs as root (.ci/run, make test): there it must run.
		if os.Getenv("CI") != "" {
			t.Fatal("starts the file writer as another user, which needs root: CI must run as root")
		}
		t.Skip("starts the file writer as another user, which needs root")
	}
	open := func() string { // a directory every user may enter
		d, err := os.MkdirTemp("", "tesk-filer-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
		return d
	}
	bin := filepath.Join(open(), "filer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	base, dir := open(), t.TempDir()
	victim := filepath.Join(base, "victim.txt")
	writeFile(t, victim, []byte("theirs\n"))
	if err := os.Chown(victim, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "data/o"), []byte("mine\n"))
	run := func(as string, url string) (int, string) {
		raw := taskJSON(t, nil, []taskspec.Output{{URL: url, Path: "/data/o"}})
		cmd := exec.Command(bin, "outputs", "--task-dir", dir, string(raw))
		cmd.Env = []string{"HOST_BASE_PATH=/transfer", "CONTAINER_BASE_PATH=" + base, "FILER_WRITE_AS=" + as}
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, errb.String()
	}
	if code, stderr := run("65532:65532", "file:///transfer/victim.txt"); code != 1 || !strings.Contains(stderr, "permission denied (file:// outputs are written as the filer's user 65532, group 65532)") {
		t.Errorf("over another user's file: exit %d, stderr %q", code, stderr)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "theirs\n" {
		t.Errorf("another user's file holds %q, %v", b, err)
	}
	if code, stderr := run("65532:65532", "file:///transfer/new/mine.txt"); code != 0 {
		t.Errorf("a new file: exit %d, stderr %q", code, stderr)
	}
	fi, err := os.Stat(filepath.Join(base, "new/mine.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65532 || st.Gid != 65532 {
		t.Errorf("the new file is owned by %d:%d, want 65532:65532", st.Uid, st.Gid)
	}
	if code, stderr := run("0:0", "file:///transfer/new/root.txt"); code != 1 || !strings.Contains(stderr, "FILER_WRITE_AS: user 0 is root") {
		t.Errorf("FILER_WRITE_AS root: exit %d, stderr %q", code, stderr)
	}
}
