package filer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// newTask is a task with one executor and the given inputs and outputs.
func newTask(inputs []taskspec.Input, outputs []taskspec.Output) *taskspec.Task {
	var job batchv1.Job
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "ex", Image: "busybox"}}
	return &taskspec.Task{Executors: []batchv1.Job{job}, Inputs: inputs, Outputs: outputs}
}

// logBuffer collects the filer's debug logs, to check what they show.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testOptions are options for a fresh task directory, logging at debug level
// into the returned buffer.
func testOptions(t *testing.T) (Options, *logBuffer) {
	t.Helper()
	lb := &logBuffer{}
	return Options{
		TaskDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, lb
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mkdirAll and symlink are test setup: an error there fails the test, so
// that no check passes for want of what it checks against.
func mkdirAll(t testing.TB, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// readDir lists a directory a check looks into; an error fails the test.
func readDir(t testing.TB, p string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// inTask is the path of an executor path in the task directory.
func inTask(opts Options, execPath string) string {
	return filepath.Join(opts.TaskDir, filepath.FromSlash(execPath))
}

func mustRun(t *testing.T, mode string, task *taskspec.Task, opts Options) []taskspec.UploadedFile {
	t.Helper()
	files, err := Run(context.Background(), mode, task, opts)
	if err != nil {
		t.Fatalf("Run %s: %v", mode, err)
	}
	return files
}

// runErr runs the filer, expects an *Error and returns its text.
func runErr(t *testing.T, mode string, task *taskspec.Task, opts Options) string {
	t.Helper()
	_, err := Run(context.Background(), mode, task, opts)
	if err == nil {
		t.Fatalf("Run %s: no error", mode)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("Run %s: error %T %v is not a *filer.Error", mode, err, err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error spans lines: %q", err)
	}
	return err.Error()
}

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q lacks %q", what, s, sub)
		}
	}
}

func wantNotContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			t.Errorf("%s %q contains %q", what, s, sub)
		}
	}
}

func uploadedEq(a, b []taskspec.UploadedFile) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// newHTTPTestServer serves st on loopback for the test's duration.
func newHTTPTestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
