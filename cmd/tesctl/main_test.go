package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
)

// fakeAPI is a TES API of scripted tasks: each GET of a task moves it one
// state along its script.
type fakeAPI struct {
	mu      sync.Mutex
	scripts map[string][]map[string]any // id -> the task as it is read, one after another
	reads   map[string]int
	created []map[string]any
	cancels []string
	auth    []string
	lists   []string // the query of each GET /tasks, encoded
}

func newFake(t *testing.T) (*fakeAPI, string) {
	f := &fakeAPI{scripts: map[string][]map[string]any{}, reads: map[string]int{}}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	return f, hs.URL
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	path := strings.TrimPrefix(r.URL.Path, basePath)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && path == "/tasks":
		var t map[string]any
		if err := json.NewDecoder(r.Body).Decode(&t); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"the body is not valid JSON: %v"}`, err)
			return
		}
		if _, ok := t["executors"]; !ok {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"executors: a task needs at least one executor"}`)
			return
		}
		f.created = append(f.created, t)
		fmt.Fprintf(w, `{"id":"task-%08d"}`, len(f.created))
	case r.Method == http.MethodPost && strings.HasSuffix(path, ":cancel"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/tasks/"), ":cancel")
		if _, ok := f.scripts[id]; !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("no task %q", id)})
			return
		}
		f.cancels = append(f.cancels, id)
		fmt.Fprint(w, `{}`)
	case r.Method == http.MethodGet && path == "/tasks":
		q := r.URL.Query()
		f.lists = append(f.lists, q.Encode())
		var tasks []any
		for i := 1; i <= 3; i++ {
			tasks = append(tasks, map[string]any{"id": fmt.Sprintf("task-%d", i), "state": "COMPLETE", "name": fmt.Sprintf("n%d", i),
				"creation_time": "2026-01-01T00:00:00Z", "executors": []any{map[string]any{}}, "tags": map[string]any{"b": "2", "a": "1"}})
		}
		page := map[string]any{"tasks": tasks[:2]}
		if q.Get("page_token") == "p2" {
			page = map[string]any{"tasks": tasks[2:]}
		} else {
			page["next_page_token"] = "p2"
		}
		_ = json.NewEncoder(w).Encode(page)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/tasks/"):
		id := strings.TrimPrefix(path, "/tasks/")
		script, ok := f.scripts[id]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf("no task %q", id)})
			return
		}
		i := min(f.reads[id], len(script)-1)
		f.reads[id]++
		t := map[string]any{"view": r.URL.Query().Get("view")}
		for k, v := range script[i] {
			t[k] = v
		}
		_ = json.NewEncoder(w).Encode(t)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"no such endpoint"}`)
	}
}

func (f *fakeAPI) script(id string, states ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scripts[id] = states
}

func tesctl(t *testing.T, url string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"TES_URL": url}
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func execLog(code int, stdout string) map[string]any {
	return map[string]any{"exit_code": code, "stdout": stdout, "start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-01T00:01:00Z"}
}

func running(done int, n int) map[string]any {
	var logs []any
	for i := 0; i < done; i++ {
		logs = append(logs, execLog(0, fmt.Sprintf("output of %d\n", i)))
	}
	if done < n {
		// The executor that runs: in the log without an end time, its
		// output so far not yet printed.
		logs = append(logs, map[string]any{"exit_code": 0, "stdout": "partial output", "start_time": "2026-01-01T00:02:00Z"})
	}
	return map[string]any{"state": "RUNNING", "executors": make([]any, n), "logs": []any{map[string]any{"logs": logs, "outputs": []any{}}}}
}

func TestVersionFlag(t *testing.T) {
	old := version.Version
	t.Cleanup(func() { version.Version = old })
	version.Version = "v7.7.7"
	code, stdout, stderr := tesctl(t, "", "", "--version")
	if code != 0 || stdout != "tesctl version v7.7.7\n" || stderr != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want the version v7.7.7", code, stdout, stderr)
	}
}

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8081":                 "http://localhost:8081/ga4gh/tes/v1",
		"http://localhost:8081/":                "http://localhost:8081/ga4gh/tes/v1",
		"https://tes.example.org/ga4gh/tes/v1/": "https://tes.example.org/ga4gh/tes/v1",
		"https://example.org/prefix":            "https://example.org/prefix/ga4gh/tes/v1",
	} {
		if got, err := baseURL(in); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "localhost:8081", "ftp://x"} {
		if _, err := baseURL(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	code, _, stderr := tesctl(t, "", "", "list")
	if code != ExitFailed || !strings.Contains(stderr, "TES_URL") {
		t.Errorf("no URL: %d %q", code, stderr)
	}
}

// submit sends a file, stdin, or the short form's task, and prints the id;
// the token goes as a bearer token.
func TestSubmit(t *testing.T) {
	f, url := newFake(t)
	dir := t.TempDir()
	file := dir + "/task.json"
	if err := os.WriteFile(file, []byte(`{"name":"from-file","executors":[{"image":"alpine","command":["true"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := tesctl(t, url, "", "submit", file, "--token", "tok"); code != 0 || out != "task-00000001\n" {
		t.Fatalf("submit FILE: %d %q %q", code, out, errs)
	}
	if code, out, _ := tesctl(t, url, `{"name":"from-stdin","executors":[]}`, "submit", "-"); code != 0 || out != "task-00000002\n" {
		t.Errorf("submit -: %d %q", code, out)
	}
	code, out, errs := tesctl(t, url, "", "submit", "--image", "ubuntu:24.04", "--name", "short", "--tag", "project=demo",
		"-i", "s3://b/in?x=1=/data/in.txt", "-o", "/data/out.txt=s3://b/out.txt", "-e", "A=1", "--cpu", "2", "--ram", "0.5", "--workdir", "/data",
		"--", "sh", "-c", "tr a-z A-Z < /data/in.txt > /data/out.txt")
	if code != 0 || out != "task-00000003\n" {
		t.Fatalf("short form: %d %q %q", code, out, errs)
	}
	got, _ := json.Marshal(f.created[2])
	want := `{"executors":[{"command":["sh","-c","tr a-z A-Z \u003c /data/in.txt \u003e /data/out.txt"],"env":{"A":"1"},"image":"ubuntu:24.04","workdir":"/data"}],` +
		`"inputs":[{"path":"/data/in.txt","url":"s3://b/in?x=1"}],"name":"short","outputs":[{"path":"/data/out.txt","url":"s3://b/out.txt"}],` +
		`"resources":{"cpu_cores":2,"ram_gb":0.5},"tags":{"project":"demo"}}`
	if string(got) != want {
		t.Errorf("short form task\n %s\nwant\n %s", got, want)
	}
	if f.auth[0] != "Bearer tok" || f.auth[1] != "" {
		t.Errorf("authorization headers %q", f.auth)
	}
	for _, args := range [][]string{
		{"submit"},
		{"submit", "--image", "alpine"},
		{"submit", "--image", "alpine", "-i", "nopath", "--", "true"},
		{"submit", "--image", "alpine", "-e", "NOVALUE", "--", "true"},
		{"submit", dir + "/missing.json"},
	} {
		if code, _, errs := tesctl(t, url, "", args...); code != ExitFailed || errs == "" {
			t.Errorf("%v: %d %q, want a usage error", args, code, errs)
		}
	}
	// The API's error is printed.
	if code, _, errs := tesctl(t, url, `{"name":"x"}`, "submit", "-"); code != ExitFailed || !strings.Contains(errs, "400 Bad Request: executors: a task needs at least one executor") {
		t.Errorf("refused task: %d %q", code, errs)
	}
}

func TestGetListCancel(t *testing.T) {
	f, url := newFake(t)
	f.script("task-1", map[string]any{"id": "task-1", "state": "QUEUED"})
	code, out, _ := tesctl(t, url, "", "get", "task-1", "--view", "full")
	if code != 0 || !strings.Contains(out, `"view": "FULL"`) || !strings.Contains(out, `"state": "QUEUED"`) {
		t.Errorf("get: %d %s", code, out)
	}
	if code, _, errs := tesctl(t, url, "", "get", "task-9"); code != ExitFailed || !strings.Contains(errs, `404 Not Found: no task "task-9"`) {
		t.Errorf("get unknown: %d %q", code, errs)
	}
	if code, _, _ := tesctl(t, url, "", "get", "task-1", "--view", "ALL"); code != ExitFailed {
		t.Errorf("bad view accepted")
	}
	code, out, errs := tesctl(t, url, "", "list", "--state", "complete", "--name-prefix", "n", "--tag", "a=1", "--tag", "b")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "task-1") || !strings.Contains(lines[1], "a=1,b=2") ||
		!strings.Contains(errs, "--page-token p2") {
		t.Errorf("list: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = tesctl(t, url, "", "list", "--all", "-o", "json")
	var all struct{ Tasks []map[string]any }
	if err := json.Unmarshal([]byte(out), &all); code != 0 || err != nil || len(all.Tasks) != 3 {
		t.Errorf("list --all -o json: %d %v\n%s", code, err, out)
	}
	code, out, errs = tesctl(t, url, "", "list", "--page-token", "p2")
	if lines = strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.Contains(lines[1], "task-3") || errs != "" {
		t.Errorf("list --page-token p2: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = tesctl(t, url, "", "cancel", "task-1", "task-9")
	if code != ExitFailed || out != "task-1: cancel requested\n" || !strings.Contains(errs, "task-9: 404") || len(f.cancels) != 1 {
		t.Errorf("cancel: %d %q %q", code, out, errs)
	}
}

// list sends each filter as the API's query parameter: the state in upper
// case, the name prefix, each tag as a tag_key and a tag_value at the same
// position (an empty value for KEY alone), the page size and the page
// token; --all follows the next page's token.
func TestListQuery(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // the query of each GET /tasks
	}{
		{nil, []string{"view=BASIC"}},
		{[]string{"--state", "complete"}, []string{"state=COMPLETE&view=BASIC"}},
		{[]string{"--name-prefix", "n"}, []string{"name_prefix=n&view=BASIC"}},
		{[]string{"--tag", "a=1", "--tag", "b", "--tag", "c=x=y"}, []string{"tag_key=a&tag_key=b&tag_key=c&tag_value=1&tag_value=&tag_value=x%3Dy&view=BASIC"}},
		{[]string{"--page-size", "2"}, []string{"page_size=2&view=BASIC"}},
		{[]string{"--page-token", "p2"}, []string{"page_token=p2&view=BASIC"}},
		{[]string{"--all"}, []string{"view=BASIC", "page_token=p2&view=BASIC"}},
		{[]string{"--all", "--page-size", "2", "--state", "RUNNING", "--name-prefix", "n", "--tag", "a=1"}, []string{
			"name_prefix=n&page_size=2&state=RUNNING&tag_key=a&tag_value=1&view=BASIC",
			"name_prefix=n&page_size=2&page_token=p2&state=RUNNING&tag_key=a&tag_value=1&view=BASIC",
		}},
	} {
		f, url := newFake(t)
		if code, out, errs := tesctl(t, url, "", append([]string{"list"}, c.args...)...); code != 0 {
			t.Errorf("list %q: %d\n%s\n%s", c.args, code, out, errs)
		}
		if !slices.Equal(f.lists, c.want) {
			t.Errorf("list %q: queries\n %q\nwant\n %q", c.args, f.lists, c.want)
		}
	}
	f, url := newFake(t)
	if code, _, errs := tesctl(t, url, "", "list", "--tag", "=1"); code != ExitFailed || !strings.Contains(errs, `--tag "=1"`) || len(f.lists) != 0 {
		t.Errorf("list --tag =1: %d %q, %d queries; want a usage error and none", code, errs, len(f.lists))
	}
}

// wait follows the task with a progress line per change and exits with its
// outcome; a task that failed has its system logs printed.
func TestWaitExitCodes(t *testing.T) {
	f, url := newFake(t)
	f.script("task-ok", map[string]any{"state": "QUEUED", "executors": make([]any, 2)}, running(0, 2), running(1, 2), running(1, 2),
		map[string]any{"state": "COMPLETE", "executors": make([]any, 2)})
	code, _, errs := tesctl(t, url, "", "wait", "task-ok", "--interval", "100ms")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != ExitComplete || len(lines) != 4 || !strings.HasPrefix(lines[0], "task-ok: QUEUED") ||
		!strings.HasPrefix(lines[1], "task-ok: RUNNING · 0 of 2 executors done") || !strings.HasPrefix(lines[2], "task-ok: RUNNING · 1 of 2 executors done") ||
		!strings.HasPrefix(lines[3], "task-ok: COMPLETE") {
		t.Errorf("wait: %d\n%s", code, errs)
	}
	failed := map[string]any{"state": "EXECUTOR_ERROR", "logs": []any{map[string]any{"logs": []any{execLog(3, "")}, "outputs": []any{}, "system_logs": []any{"executor ex-00 exited with 3"}}}}
	for state, want := range map[string]int{"EXECUTOR_ERROR": ExitExecutorError, "SYSTEM_ERROR": ExitSystemError, "CANCELED": ExitCanceled, "PREEMPTED": ExitCanceled} {
		failed["state"] = state
		f.script("task-x", failed)
		code, _, errs := tesctl(t, url, "", "wait", "task-x", "--interval", "100ms")
		if code != want || !strings.Contains(errs, "task-x: executor ex-00 exited with 3") || !strings.Contains(errs, "task-x: executor 0 exited with code 3") {
			t.Errorf("%s: exit %d, want %d; %q", state, code, want, errs)
		}
	}
	// With several, the worst outcome.
	failed["state"] = "CANCELED"
	f.script("task-x", failed)
	if code, _, _ := tesctl(t, url, "", "wait", "task-ok", "task-x", "--interval", "100ms"); code != ExitCanceled {
		t.Errorf("two tasks: %d", code)
	}
	f.script("task-slow", map[string]any{"state": "RUNNING"})
	if code, _, errs := tesctl(t, url, "", "wait", "task-slow", "--interval", "100ms", "--timeout", "300ms"); code != ExitTimeout || !strings.Contains(errs, "still RUNNING") {
		t.Errorf("timeout: %d %q", code, errs)
	}
	if code, _, errs := tesctl(t, url, "", "wait", "task-none"); code != ExitFailed || !strings.Contains(errs, "404") {
		t.Errorf("unknown: %d %q", code, errs)
	}
	// submit --wait: the id, then the outcome.
	f.script("task-00000001", map[string]any{"state": "COMPLETE"})
	if code, out, _ := tesctl(t, url, "", "submit", "--wait", "--image", "alpine", "--", "true"); code != 0 || out != "task-00000001\n" {
		t.Errorf("submit --wait: %d %q", code, out)
	}
}

func TestLogs(t *testing.T) {
	f, url := newFake(t)
	f.script("task-1", running(1, 3))
	code, out, errs := tesctl(t, url, "", "logs", "task-1")
	if code != 0 || out != "==> executor 0 (exit code 0) <==\noutput of 0\n" || !strings.Contains(errs, "executor 1 has not ended") {
		t.Errorf("logs: %d %q %q", code, out, errs)
	}
	if code, out, _ := tesctl(t, url, "", "logs", "task-1", "--executor", "0"); code != 0 || out != "output of 0\n" {
		t.Errorf("logs --executor 0: %d %q", code, out)
	}
	if code, _, _ := tesctl(t, url, "", "logs", "task-1", "--executor", "5"); code != ExitFailed {
		t.Errorf("logs --executor 5: %d", code)
	}
	// stderr goes to standard error, each line marked with its executor.
	failing := running(1, 1)
	failing["state"] = "EXECUTOR_ERROR"
	l := failing["logs"].([]any)[0].(map[string]any)["logs"].([]any)[0].(map[string]any)
	l["exit_code"], l["stderr"] = 2, "no such file\nstopping\n"
	f.script("task-err", failing)
	code, out, errs = tesctl(t, url, "", "logs", "task-err")
	if code != 0 || out != "==> executor 0 (exit code 2) <==\noutput of 0\n" || errs != "executor 0 stderr: no such file\nexecutor 0 stderr: stopping\n" {
		t.Errorf("logs with stderr: %d %q %q", code, out, errs)
	}
	// --follow prints each executor as it ends, until the task ends.
	done := running(3, 3)
	done["state"] = "COMPLETE"
	f.script("task-2", running(0, 3), running(1, 3), running(1, 3), running(2, 3), done)
	code, out, errs = tesctl(t, url, "", "logs", "task-2", "--follow", "--interval", "100ms")
	want := "==> executor 0 (exit code 0) <==\noutput of 0\n==> executor 1 (exit code 0) <==\noutput of 1\n==> executor 2 (exit code 0) <==\noutput of 2\n"
	if code != 0 || out != want {
		t.Errorf("logs --follow: %d\n%s\nwant\n%s\nstderr %s", code, out, want, errs)
	}
	f.script("task-3", running(0, 3), running(1, 3), running(2, 3))
	if code, out, _ := tesctl(t, url, "", "logs", "task-3", "--follow", "--executor", "1", "--interval", "100ms"); code != 0 || out != "output of 1\n" {
		t.Errorf("logs --follow --executor 1: %d %q", code, out)
	}
	// A task that ends before an executor ran says so.
	cancelled := running(1, 3)
	cancelled["state"] = "CANCELED"
	f.script("task-4", cancelled)
	if code, _, errs := tesctl(t, url, "", "logs", "task-4", "--follow", "--executor", "2", "--interval", "100ms"); code != 0 || !strings.Contains(errs, "ended CANCELED before executor 2 ran") {
		t.Errorf("follow of a cancelled task: %d %q", code, errs)
	}
}
