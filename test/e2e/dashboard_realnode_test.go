//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The dashboard over tasks that ran on the real node, where every log line
// is a container's own output: the README's example task (executor 0
// upper-cases the greeting into a file, executor 1 prints it), one that
// fails with a message on stderr, one running and one cancelled. The task
// page shows each executor's real output; the README's screenshots are
// these pages (DASHBOARD_SCREENSHOTS=docs go test -tags e2e -run
// TestRealNodeDashboard ./test/e2e/ writes them there).
func TestRealNodeDashboard(t *testing.T) {
	ctx := context.Background()
	e := newRealEnv(t, 60*time.Second, nil)
	srv, _ := engineS3(t, e, "results")
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 4096})
	b := browser(t)

	id, failing, running, cancelled := listPicture(t, api,
		map[string]any{"image": "busybox", "command": []any{"sh", "-c",
			"echo 'aligning sample 7'; echo 'reference not found: /data/ref/hg38.fa' >&2; exit 2"}},
		map[string]any{"image": "busybox", "command": []any{"sleep", "3600"}}, 3*time.Minute)
	if out, err := srv.Get(ctx, "results", "result.txt"); err != nil || out != "HELLO\n" {
		t.Errorf("the output in S3: %q, %v", out, err)
	}

	p := newPage(t, b, api)
	p.open("#/tasks/" + id)
	p.waitFor("the task page", `document.querySelector('main[data-ready="task"]')`, 30*time.Second)
	codes := eval[[]string](p, `[...document.querySelectorAll('.executor')].map(e => e.dataset.exitCode)`)
	if fmt.Sprint(codes) != "[0 0]" {
		t.Errorf("exit codes %v, want [0 0]", codes)
	}
	if got := p.str(`(document.querySelector('.executor[data-index="1"] pre.stdout') || {innerText: ''}).innerText`); strings.TrimSpace(got) != "HELLO" {
		t.Errorf("executor 1's output on the page %q, want what its container printed (HELLO)", got)
	}
	p.screenshot("dashboard-task.png", 1280, 1180)

	// The page of another task: wait for its own content, not the last
	// page's.
	p.open("#/tasks/" + failing)
	p.waitFor("the failing executor's stderr, as its container wrote it", fmt.Sprintf(
		`document.querySelector('main[data-ready="task"]') && document.querySelector('main').innerText.includes(%q) &&
		(document.querySelector('.executor[data-index="0"] pre.stderr') || {innerText: ''}).innerText.includes('reference not found: /data/ref/hg38.fa')`, failing), 30*time.Second)
	if got := p.str(`document.querySelector('.executor[data-index="0"]').dataset.exitCode`); got != "2" {
		t.Errorf("the failing executor's exit code on the page %s, want 2", got)
	}

	p.open("#/")
	p.waitFor("the list with the four tasks", fmt.Sprintf(`%s === "COMPLETE" && %s === "EXECUTOR_ERROR" && %s === "RUNNING" && %s === "CANCELED"`,
		rowState(id), rowState(failing), rowState(running), rowState(cancelled)), 30*time.Second)
	p.screenshot("dashboard-list.png", 1280, 420)
}

// listPicture creates the dashboard's pictured tasks through api: the
// README's example task (complete), a task of the failing executor, one
// of the forever executor left running and one cancelled while it runs;
// it returns their ids once each is in that state.
func listPicture(t *testing.T, api *tesAPI, failingExecutor, foreverExecutor map[string]any, timeout time.Duration) (id, failing, running, cancelled string) {
	t.Helper()
	demo := func(name string, executor map[string]any) string {
		return api.create(map[string]any{"name": name, "tags": map[string]any{"project": "demo"}, "executors": []any{executor}})
	}
	id = api.create(demoTask("greeting"))
	failing = demo("align-sample-7", failingExecutor)
	running = demo("call-variants", foreverExecutor)
	cancelled = demo("call-variants-old", foreverExecutor)
	api.waitState(cancelled, tesv1.StateRunning, timeout)
	if code, body := api.do(http.MethodPost, "/tasks/"+cancelled+":cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	api.waitState(id, tesv1.StateComplete, timeout)
	api.waitState(failing, tesv1.StateExecutorError, timeout)
	api.waitState(running, tesv1.StateRunning, timeout)
	api.waitState(cancelled, tesv1.StateCanceled, timeout)
	return id, failing, running, cancelled
}
