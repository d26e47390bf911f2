//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The dashboard's tests drive headless Chromium (Debian's package, make
// browser-deps) with chromedp against the TES API of a test's namespace on
// the local cluster. DASHBOARD_SCREENSHOTS=<dir> writes their screenshots
// there (TestRealNodeDashboard's are the README's: dashboard-list.png,
// dashboard-task.png).

// browser starts a headless Chromium of its own for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium (make browser-deps installs it): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	start := time.Now()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("chromium started in %.1f s", time.Since(start).Seconds())
	return ctx
}

// page is a browser tab on the dashboard of a TES API.
type page struct {
	t     *testing.T
	ctx   context.Context
	close context.CancelFunc // closes the tab
	base  string             // the dashboard's URL

	mu         sync.Mutex
	exceptions []string
}

func newPage(t *testing.T, browserCtx context.Context, api *tesAPI) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, close: cancel, base: strings.TrimSuffix(api.url, tes.BasePath) + dashboard.Path}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			msg := (&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error()
			p.mu.Lock()
			p.exceptions = append(p.exceptions, msg)
			p.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// The page never fails in its own code: no uncaught exception.
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.exceptions {
			t.Errorf("the page threw: %s", e)
		}
	})
	return p
}

func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.describe())
	}
}

// open loads the dashboard at a route (#/..., or "" for the list).
func (p *page) open(route string) {
	p.t.Helper()
	p.run("open "+route, chromedp.Navigate(p.base+route))
}

// eval evaluates a JavaScript expression.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v\n%s", expr, err, p.describe())
	}
	return v
}

func (p *page) exec(expr string) {
	p.t.Helper()
	eval[any](p, expr+`; true`)
}

func (p *page) str(expr string) string {
	p.t.Helper()
	return eval[string](p, `String(`+expr+`)`)
}

// waitFor polls a JavaScript condition until it is true.
func (p *page) waitFor(what, cond string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`Boolean(`+cond+`)`))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("timed out after %s waiting for %s (%s)\n%s", timeout, what, cond, p.describe())
}

// describe is what the page shows, for failures.
func (p *page) describe() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 3000)`))
	return "the page: " + s
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.run("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// screenshot writes what a window of width x height shows of the page as a
// PNG into DASHBOARD_SCREENSHOTS, or the test's directory; it checks that
// the picture is not empty.
func (p *page) screenshot(name string, width, height int64) {
	p.t.Helper()
	p.run("window size", chromedp.EmulateViewport(width, height))
	p.waitFor("the window's new size", fmt.Sprintf(`window.innerWidth === %d && window.innerHeight === %d`, width, height), 10*time.Second)
	// Two frames drawn at that size.
	fctx, fcancel := context.WithTimeout(p.ctx, 10*time.Second)
	_, err := chromedp.Run(fctx, chromedp.Evaluate[string](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r('drawn'))))`, chromedp.EvalAwaitPromise))
	fcancel()
	if err != nil {
		p.t.Fatalf("screenshot: the frames at %dx%d: %v", width, height, err)
	}
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if len(buf) < 10000 {
		p.t.Errorf("screenshot %s: only %d bytes", name, len(buf))
	}
	dir := os.Getenv("DASHBOARD_SCREENSHOTS")
	if dir == "" {
		dir = p.t.TempDir()
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(repoRoot(p.t), dir)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s (%d bytes)", path, len(buf))
}

// rowState is the state the list shows for a task.
func rowState(id string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-id=%q]') || {dataset: {}}).dataset.state`, id)
}

// The list follows a task from QUEUED through RUNNING to COMPLETE: the TES
// API posts no event, so that the task waits until the test submits it to
// the handler, and the executor's pod is left to the test (kwok's manual
// fate), which ends it.
func TestDashboardListFollowsATask(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, "")
	b := browser(t)
	id := api.create(map[string]any{"name": "follow-me", "tags": map[string]any{"project": "dashboard"},
		"executors": []any{map[string]any{"image": manualImage, "command": []any{"echo", "hello"}}}})
	p := newPage(t, b, api)
	p.open("#/")
	p.waitFor("the list", `document.querySelector('main[data-ready="list"]')`, 30*time.Second)
	// Refresh every second, and record every state the row shows.
	p.run("refresh every second", chromedp.SetValue(chromedp.CSS("#f-refresh"), "1"))
	p.exec(`document.querySelector('#f-refresh').dispatchEvent(new Event('change'))`)
	p.exec(fmt.Sprintf(`window.seen = []; setInterval(() => { const s = %s; if (s && window.seen[window.seen.length-1] !== s) window.seen.push(s); }, 50)`, rowState(id)))
	p.waitFor("the task QUEUED", `window.seen[window.seen.length-1] === "QUEUED"`, 30*time.Second)
	if got := p.str(fmt.Sprintf(`document.querySelector('tr[data-id=%q]').innerText`, id)); !strings.Contains(got, "follow-me") || !strings.Contains(got, "project=dashboard") {
		t.Errorf("the row shows %q, want the name and the tag", got)
	}
	if code, body := e.post("task.submitted", map[string]any{"task": id, "namespace": e.ns}); code != http.StatusOK {
		t.Fatalf("task.submitted: %d %s", code, body)
	}
	p.waitFor("the task RUNNING", `window.seen[window.seen.length-1] === "RUNNING"`, 60*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = playKubelet(ctx, e.ns, id, func(*corev1.Pod) (string, int32, error) { return "hello\n", 0, nil })
	}()
	p.waitFor("the task COMPLETE", `window.seen[window.seen.length-1] === "COMPLETE"`, 60*time.Second)
	seen := eval[[]string](p, `window.seen`)
	if fmt.Sprint(seen) != "[QUEUED RUNNING COMPLETE]" {
		t.Errorf("the list showed %v, want [QUEUED RUNNING COMPLETE]", seen)
	}
	// The state filter.
	p.run("filter COMPLETE", chromedp.SetValue(chromedp.CSS("#f-state"), "EXECUTOR_ERROR"))
	p.click("#f-apply")
	p.waitFor("no task EXECUTOR_ERROR", `document.querySelector('#no-tasks')`, 30*time.Second)
	p.run("filter COMPLETE", chromedp.SetValue(chromedp.CSS("#f-state"), "COMPLETE"))
	p.click("#f-apply")
	p.waitFor("the task under COMPLETE", rowState(id)+` === "COMPLETE"`, 30*time.Second)
	if !strings.Contains(p.str(`location.hash`), "state=COMPLETE") {
		t.Errorf("the filter is not in the address: %s", p.str(`location.hash`))
	}
}

// slowPods makes kwok run every container of the namespace's pods for d (the
// pod annotation fate.tesk.test/delay, added by a MutatingAdmissionPolicy),
// so that the steps take a visible time.
func (e *env) slowPods(d string) {
	e.t.Helper()
	name := "slow-" + e.ns
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >-
        Object{metadata: Object.metadata{annotations: {"fate.tesk.test/delay": "%[2]s"}}}
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: %[3]s
`, name, d, e.ns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.c.Apply(ctx, []byte(policy)); err != nil {
		e.t.Fatalf("mutating admission policy: %v", err)
	}
	e.t.Cleanup(func() {
		_ = e.c.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = e.c.Client.AdmissionregistrationV1beta1().MutatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	e.waitFor("the admission policy to slow the pods", 30*time.Second, func() bool {
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: e.ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
		}
		p, err := e.c.Client.CoreV1().Pods(e.ns).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && p.Annotations["fate.tesk.test/delay"] == d
	})
}

// The task page: each executor's exit code and output, the inputs and
// outputs, the timeline with one bar per job in the order they ran, the
// task's Events, and a screenshot of each page on kwok's played pods (the
// README's come from TestRealNodeDashboard, on the real node).
func TestDashboardTaskPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.slowPods("1500ms")
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 4096})
	stop, err := shared.SetLogsForSelector(context.Background(), e.ns, taskmeta.LabelTask, "reading /data/in/greeting.txt\nHELLO\nwrote /data/out/result.txt\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	b := browser(t)
	id, failing, running, cancelled := listPicture(t, api,
		map[string]any{"image": "fate.tesk.test/fail:2", "command": []any{"bwa", "mem"}},
		map[string]any{"image": "fate.tesk.test/forever", "command": []any{"sleep", "3600"}}, 90*time.Second)

	p := newPage(t, b, api)
	p.open("#/tasks/" + id)
	p.waitFor("the task page", `document.querySelector('main[data-ready="task"]')`, 30*time.Second)
	if got := p.str(`document.querySelector('.taskhead .state').dataset.state`); got != tesv1.StateComplete {
		t.Errorf("the page shows state %s", got)
	}
	codes := eval[[]string](p, `[...document.querySelectorAll('.executor')].map(e => e.dataset.exitCode)`)
	if fmt.Sprint(codes) != "[0 0]" {
		t.Errorf("exit codes %v, want [0 0]", codes)
	}
	if got := p.str(`document.querySelector('.executor[data-index="0"] pre.stdout').innerText`); !strings.Contains(got, "HELLO") {
		t.Errorf("executor 0's output %q, want its log", got)
	}
	if got := p.str(`document.querySelector('.executor[data-index="1"] .exit-code').innerText`); got != "exit code 0" {
		t.Errorf("executor 1 shows %q", got)
	}
	if got := p.str(`document.querySelector('#inputs').innerText`); !strings.Contains(got, "/data/in/greeting.txt") || !strings.Contains(got, "6 B") {
		t.Errorf("inputs %q, want the path and the content's size", got)
	}
	if got := p.str(`document.querySelector('#outputs').innerText`); !strings.Contains(got, "s3://results/result.txt") {
		t.Errorf("outputs %q", got)
	}
	// One bar per job, in the order the jobs ran, after the volume's.
	type bar struct {
		Part, Kind, Status, Start string
		Runs                      int
	}
	bars := eval[[]bar](p, `[...document.querySelectorAll('svg.timeline g.bar')].map(g => ({Part: g.dataset.part, Kind: g.dataset.kind, Status: g.dataset.status,
		Start: g.dataset.start, Runs: g.querySelectorAll('rect.run').length}))`)
	jobs := e.jobNames(id)
	sort.Strings(jobs)
	var jobBars []string
	for i, b := range bars {
		if b.Kind == tes.StepVolume {
			if i != 0 {
				t.Errorf("the volume's bar is row %d, want the first", i)
			}
			continue
		}
		jobBars = append(jobBars, id+"-"+b.Part)
		if b.Status != tes.StepSucceeded || b.Runs != 1 {
			t.Errorf("bar %+v, want a succeeded step with its run drawn", b)
		}
		// data-start is the step's start in milliseconds since the epoch.
		start, err := strconv.ParseInt(b.Start, 10, 64)
		if err != nil || start <= 0 {
			t.Errorf("bar %s has no start time (data-start %q)", b.Part, b.Start)
		}
		if prev, err := strconv.ParseInt(bars[i-1].Start, 10, 64); i > 1 && (err != nil || start < prev) {
			t.Errorf("bar %s starts before the one above it: %+v", b.Part, bars)
		}
	}
	if want := []string{id + "-inputs-filer", id + "-ex-00", id + "-ex-01", id + "-outputs-filer"}; !slices.Equal(jobBars, want) {
		t.Errorf("bars %v, want %v", jobBars, want)
	}
	if sorted := slices.Sorted(slices.Values(jobBars)); !slices.Equal(sorted, jobs) {
		t.Errorf("bars for %v, jobs %v", jobBars, jobs)
	}
	reasons := eval[[]string](p, `[...document.querySelectorAll('#events tr[data-reason]')].map(r => r.dataset.reason)`)
	for _, want := range []string{taskmeta.ReasonStarted, taskmeta.ReasonJobCreated, taskmeta.ReasonEnded} {
		if !slices.Contains(reasons, want) {
			t.Errorf("the Events %v have no %s", reasons, want)
		}
	}
	p.screenshot("played-dashboard-task.png", 1280, 1180)

	p.open("#/")
	p.waitFor("the list with the four tasks", fmt.Sprintf(`%s === "COMPLETE" && %s === "EXECUTOR_ERROR" && %s === "RUNNING" && %s === "CANCELED"`,
		rowState(id), rowState(failing), rowState(running), rowState(cancelled)), 30*time.Second)
	p.screenshot("played-dashboard-list.png", 1280, 420)
	// The API's page, linked from every page.
	p.click("#nav-api")
	p.waitFor("the API's page", `document.querySelector('main[data-ready="api"] [data-op="GetTaskEvents"]')`, 30*time.Second)
	if got := p.str(`document.querySelectorAll('.apidoc details.op').length`); got != "7" {
		t.Errorf("the API page shows %s operations, want 7", got)
	}
	if got := p.str(`document.querySelector('#schema-tesTaskView') !== null`); got != "true" {
		t.Errorf("the API page has no tesTaskView schema")
	}
}

// Cancel from the page: a confirmation, then the running task ends
// CANCELED.
func TestDashboardCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, e.url)
	b := browser(t)
	id := api.create(map[string]any{"name": "to-cancel", "executors": []any{map[string]any{"image": "fate.tesk.test/forever", "command": []any{"sleep", "3600"}}}})
	api.waitState(id, tesv1.StateRunning, 60*time.Second)
	p := newPage(t, b, api)
	p.open("#/tasks/" + id)
	p.waitFor("the running task", `document.querySelector('.taskhead .state[data-state="RUNNING"]')`, 30*time.Second)
	p.click("#cancel")
	p.waitFor("the confirmation", `document.querySelector('#cancel-yes')`, 10*time.Second)
	// Keeping it running changes nothing: the dialog closes and the page
	// sends no request but GETs.
	p.str(`(() => { window.sent = []; const f = window.fetch; window.fetch = (u, o) => { sent.push(((o && o.method) || 'GET') + ' ' + u); return f(u, o); }; })()`)
	p.click("#cancel-no")
	p.waitFor("the dialog to close", `!document.querySelector('#cancel-yes')`, 10*time.Second)
	if sent := p.str(`sent.filter(r => !r.startsWith('GET ')).join(', ')`); sent != "" {
		t.Errorf("after 'keep it running' the page sent %s", sent)
	}
	if s := api.get(id, tesv1.ViewMinimal)["state"]; s != tesv1.StateRunning {
		t.Fatalf("after 'keep it running': %v", s)
	}
	p.click("#cancel")
	p.click("#cancel-yes")
	p.waitFor("CANCELED on the page", `document.querySelector('.taskhead .state[data-state="CANCELED"]')`, 60*time.Second)
	if s := api.get(id, tesv1.ViewMinimal)["state"]; s != tesv1.StateCanceled {
		t.Errorf("the API says %v", s)
	}
	if p.str(`document.querySelector('#cancel').disabled`) != "true" {
		t.Errorf("the cancel button of a cancelled task is enabled")
	}
	if got := p.str(`document.querySelector('svg.timeline g.bar[data-part="ex-00"]').dataset.status`); got != tes.StepDeleted {
		t.Errorf("the executor's bar is %s, want deleted", got)
	}
}

// A failing task says why: the executor's exit code and the system logs.
func TestDashboardFailingTaskShowsItsReason(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, e.url)
	b := browser(t)
	id := api.create(map[string]any{"name": "fails", "executors": []any{map[string]any{"image": "fate.tesk.test/fail:3", "command": []any{"false"}}}})
	api.waitState(id, tesv1.StateExecutorError, 60*time.Second)
	full := api.get(id, tesv1.ViewFull)
	sys := full["logs"].([]any)[0].(map[string]any)["system_logs"].([]any)
	p := newPage(t, b, api)
	p.open("#/tasks/" + id)
	p.waitFor("the page", `document.querySelector('main[data-ready="task"]')`, 30*time.Second)
	reason := p.str(`document.querySelector('#reason').innerText`)
	if !strings.Contains(reason, "executor 0 exited with code 3") || !strings.Contains(reason, sys[0].(string)) {
		t.Errorf("the reason shown: %q, want the exit code and %q", reason, sys[0])
	}
	if got := p.str(`document.querySelector('.executor[data-index="0"]').dataset.exitCode`); got != "3" {
		t.Errorf("exit code %s", got)
	}
	if got := p.str(`document.querySelector('svg.timeline g.bar[data-part="ex-00"]').dataset.status`); got != tes.StepFailed {
		t.Errorf("the executor's bar is %s, want failed", got)
	}
}

// A task that is gone, one deleted while its page is open, and an API that
// stops answering: each shows a message, never a blank page.
func TestDashboardGoneTaskAndUnreachableAPI(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	api := newTESAPI(t, e, "")
	b := browser(t)
	p := newPage(t, b, api)
	p.open("#/tasks/task-00000000")
	p.waitFor("the message", `document.querySelector('#gone')`, 30*time.Second)
	if got := p.str(`document.querySelector('#gone').innerText`); !strings.Contains(got, "task-00000000 is gone") {
		t.Errorf("message %q", got)
	}
	id := api.create(map[string]any{"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
	other := api.create(map[string]any{"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
	p.open("#/tasks/" + id)
	p.waitFor("the queued task", `document.querySelector('.taskhead .state[data-state="QUEUED"]')`, 30*time.Second)
	if got := p.str(`document.querySelector('#no-steps').innerText`); !strings.Contains(got, "queued") {
		t.Errorf("timeline of a queued task: %q", got)
	}
	if err := shared.Client.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), id, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p.waitFor("the deleted task gone", `document.querySelector('#gone')`, 30*time.Second)
	p.click("#gone button")
	p.waitFor("the list", `document.querySelector('main[data-ready="list"]')`, 30*time.Second)
	// The API goes away: the list's next refresh says so, and keeps the rows
	// it had.
	api.srv.CloseClientConnections()
	api.srv.Close()
	p.waitFor("the message", `document.querySelector('#list-error .error[data-status="0"]')`, 30*time.Second)
	if got := p.str(`document.querySelector('#list-error').innerText`); !strings.Contains(got, "cannot be reached") {
		t.Errorf("with the API down the page shows %q", got)
	}
	if got := p.str(rowState(other)); got != tesv1.StateQueued {
		t.Errorf("the row of %s shows %s, want the state it had", other, got)
	}
}

// oidcIssuer is an OIDC issuer for a browser: its discovery document and
// keys (oidctest), an authorization endpoint that logs alice in at once and
// a token endpoint that gives the code's ID token only for the PKCE
// verifier of its challenge.
type oidcIssuer struct {
	t   *testing.T
	srv *httptest.Server
	key *rsa.PrivateKey

	mu    sync.Mutex
	codes map[string]url.Values // code -> the authorization request
	used  int                   // tokens given
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &oidcIssuer{t: t, key: key, codes: map[string]url.Values{}}
	o := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch r.URL.Path {
		case "/auth":
			q := r.URL.Query()
			if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("client_id") != "tesk-dashboard" {
				t.Errorf("authorization request %v: want the code flow with PKCE (S256) for tesk-dashboard", q)
			}
			code := fmt.Sprintf("code-%d", time.Now().UnixNano())
			is.mu.Lock()
			is.codes[code] = q
			is.mu.Unlock()
			back, _ := url.Parse(q.Get("redirect_uri"))
			v := url.Values{"code": {code}, "state": {q.Get("state")}}
			back.RawQuery = v.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		case "/token":
			_ = r.ParseForm()
			is.mu.Lock()
			q, ok := is.codes[r.PostForm.Get("code")]
			delete(is.codes, r.PostForm.Get("code"))
			is.mu.Unlock()
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			switch {
			case !ok:
				http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
				return
			case base64.RawURLEncoding.EncodeToString(sum[:]) != q.Get("code_challenge"):
				http.Error(w, `{"error":"invalid_grant","error_description":"PKCE verification failed"}`, http.StatusBadRequest)
				return
			case r.PostForm.Get("redirect_uri") != q.Get("redirect_uri") || r.PostForm.Get("grant_type") != "authorization_code":
				http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
				return
			}
			is.mu.Lock()
			is.used++
			is.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"id_token": is.token("alice", time.Hour, q.Get("nonce")), "access_token": "opaque", "token_type": "Bearer"})
		default:
			o.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(is.srv.Close)
	o.SetIssuer(is.srv.URL)
	return is
}

func (is *oidcIssuer) token(sub string, ttl time.Duration, nonce string) string {
	claims := map[string]any{"iss": is.srv.URL, "aud": "tesk-dashboard", "sub": sub, "exp": time.Now().Add(ttl).Unix(), "iat": time.Now().Add(-time.Minute).Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	b, _ := json.Marshal(claims)
	return oidctest.SignIDToken(is.key, "k1", oidc.RS256, string(b))
}

// With OIDC: no token, an expired one and one that is not a token each get
// a message saying what to do; a pasted token works; a login through the
// issuer (authorization code with PKCE) works; another user's task is
// refused with a message.
func TestDashboardOIDC(t *testing.T) {
	e := newEnv(t, envOptions{})
	is := newOIDCIssuer(t)
	auth, err := tes.NewOIDC(context.Background(), tes.OIDCConfig{Issuer: is.srv.URL, Audience: "tesk-dashboard"})
	if err != nil {
		t.Fatal(err)
	}
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Auth: auth, LogTailBytes: 4096,
		Dashboard: dashboard.Config{API: tes.BasePath, Auth: "oidc", Issuer: is.srv.URL, ClientID: "tesk-dashboard"}})
	api.token = is.token("alice", time.Hour, "")
	mine := api.create(map[string]any{"name": "alices", "executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
	api.token = is.token("bob", time.Hour, "")
	bobs := api.create(map[string]any{"name": "bobs", "executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
	b := browser(t)
	p := newPage(t, b, api)
	p.open("#/")
	p.waitFor("the 401 message", `document.querySelector('#list-error .error[data-status="401"]')`, 30*time.Second)
	if got := p.str(`document.querySelector('#list-error').innerText`); !strings.Contains(got, "not logged in") {
		t.Errorf("without a token: %q", got)
	}
	paste := func(token string) {
		t.Helper()
		p.click("#paste-token")
		p.run("paste", chromedp.SetValue(chromedp.CSS("#token-input"), token))
		p.click("#token-use")
	}
	paste(is.token("alice", -time.Minute, ""))
	p.waitFor("the expired token's message", `/expired/.test((document.querySelector('#list-error .error[data-status="401"]') || {}).innerText)`, 30*time.Second)
	paste("not-a-token")
	p.waitFor("the bad token's message", `/not accepted/.test((document.querySelector('#list-error .error[data-status="401"]') || {}).innerText)`, 30*time.Second)
	paste(is.token("alice", time.Hour, ""))
	p.waitFor("alice's task", rowState(mine)+` !== undefined`, 30*time.Second)
	if got := p.str(`document.querySelectorAll('#rows tr[data-id]').length`); got != "1" {
		t.Errorf("alice sees %s tasks, want her one", got)
	}
	p.open("#/tasks/" + bobs)
	p.waitFor("the 403 message", `document.querySelector('.error[data-status="403"]')`, 30*time.Second)

	// Log out, then log in through the issuer.
	p.open("#/")
	p.click("#logout")
	p.waitFor("logged out", `document.querySelector('#list-error .error[data-status="401"]')`, 30*time.Second)
	p.click("#login")
	p.waitFor("logged in through the issuer", rowState(mine)+` !== undefined`, 30*time.Second)
	if got := p.str(`document.querySelector('#auth-user').innerText`); !strings.Contains(got, "alice") {
		t.Errorf("the header says %q", got)
	}
	is.mu.Lock()
	used := is.used
	is.mu.Unlock()
	if used != 1 {
		t.Errorf("the issuer gave %d tokens, want 1", used)
	}
	if strings.Contains(p.str(`location.href`), "code=") {
		t.Errorf("the code stays in the address: %s", p.str(`location.href`))
	}
}

// apiAnswers records the TES API's answers to the requests under
// tes.BasePath.
type apiAnswers struct {
	mu   sync.Mutex
	list []apiAnswer
}

// apiAnswer is a request to the TES API and its answer.
type apiAnswer struct {
	path       string
	marker     string // its X-Requested-With
	authz      string // its Authorization
	status     int
	challenges []string // the answer's WWW-Authenticate
}

// statusWriter keeps the status a handler writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader keeps the status and writes it.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// wrap records the answers of next to requests under tes.BasePath.
func (a *apiAnswers) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if !strings.HasPrefix(r.URL.Path, tes.BasePath) {
			return
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.list = append(a.list, apiAnswer{path: r.URL.Path, marker: r.Header.Get(tes.RequestedWith), authz: r.Header.Get("Authorization"),
			status: sw.status, challenges: sw.Header().Values("WWW-Authenticate")})
	})
}

// answers is what was recorded, and forgets it.
func (a *apiAnswers) answers() []apiAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.list
	a.list = nil
	return l
}

// usersFile writes a users file of bcrypt hashes, user and password
// alternating.
func usersFile(t *testing.T, pairs ...string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		h, err := bcrypt.GenerateFromPassword([]byte(pairs[i+1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s\n", pairs[i], h)
	}
	file := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// With HTTP Basic the page asks for the user name and password itself: the
// first list is refused with a message offering Sign in, and the API's 401
// to the page's requests, which the page marks, never carries the Basic
// challenge (no browser prompt, nothing the browser keeps), while a client
// that does not mark its requests gets it; the right password (not ASCII:
// sent as UTF-8) lists that user's task only and the header says who is
// signed in, a wrong one gets the 401 message; signing out forgets them.
func TestDashboardBasic(t *testing.T) {
	e := newEnv(t, envOptions{})
	const password = "wönderland ✓"
	auth, err := tes.NewBasic(tes.BasicConfig{File: usersFile(t, "alice", password, "bob", "builder")})
	if err != nil {
		t.Fatal(err)
	}
	rec := &apiAnswers{}
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Auth: tes.Schemes{Basic: auth}, LogTailBytes: 4096, Wrap: rec.wrap,
		Dashboard: dashboard.Config{API: tes.BasePath, Auth: "basic"}})
	alice := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+password))
	api.authz = alice
	mine := api.create(map[string]any{"name": "alices", "executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
	api.authz = "Basic " + base64.StdEncoding.EncodeToString([]byte("bob:builder"))
	bobs := api.create(map[string]any{"name": "bobs", "executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})

	// A client that does not mark its requests gets the Basic challenge.
	resp, err := http.Get(api.url + "/tasks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !slices.Equal(got, []string{tes.BasicChallenge}) {
		t.Errorf("an unmarked request: %d %q, want 401 with the Basic challenge", resp.StatusCode, got)
	}
	rec.answers()
	// checkMarked holds the page's requests since the last call to being
	// marked, and their 401s to carrying no Basic challenge; it returns
	// the marked requests.
	checkMarked := func(what string) []apiAnswer {
		t.Helper()
		l := rec.answers()
		for _, a := range l {
			if a.marker != "XMLHttpRequest" {
				t.Errorf("%s: the page's request %s has %s %q, want XMLHttpRequest", what, a.path, tes.RequestedWith, a.marker)
			}
			if a.status == http.StatusUnauthorized && len(a.challenges) != 0 {
				t.Errorf("%s: the 401 to the page's %s carries %q, want no challenge", what, a.path, a.challenges)
			}
		}
		return l
	}
	unauthorized := func(l []apiAnswer) int {
		n := 0
		for _, a := range l {
			if a.status == http.StatusUnauthorized && a.path == tes.BasePath+"/tasks" {
				n++
			}
		}
		return n
	}

	b := browser(t)
	p := newPage(t, b, api)
	p.open("#/")
	p.waitFor("the 401 message", `document.querySelector('#list-error .error[data-status="401"]')`, 30*time.Second)
	if got := p.str(`document.querySelector('#list-error').innerText`); !strings.Contains(got, "not signed in") || !strings.Contains(got, "user name and password") {
		t.Errorf("without credentials: %q", got)
	}
	if got := p.str(`[...document.querySelectorAll('#list-error button')].map(b => b.id + '=' + b.innerText).join(',')`); got != "error-sign-in=Sign in" {
		t.Errorf("the 401 message's actions: %q, want Sign in only", got)
	}
	if got := p.str(`document.querySelector('#auth').innerText`); !strings.Contains(got, "Sign in") || strings.Contains(got, "signed in as") {
		t.Errorf("the header without credentials: %q", got)
	}
	if l := checkMarked("without credentials"); unauthorized(l) == 0 {
		t.Errorf("the page's list got no 401: %+v", l)
	}

	signIn := func(button, user, password string) {
		t.Helper()
		p.click(button)
		p.run("the user name and password", chromedp.SetValue(chromedp.CSS("#basic-user"), user), chromedp.SetValue(chromedp.CSS("#basic-password"), password))
		p.click("#basic-use")
	}
	// A wrong password: the 401 message, and the header says so.
	signIn("#error-sign-in", "alice", "looking-glass")
	p.waitFor("the wrong password's message", `/not accepted/.test((document.querySelector('#list-error .error[data-status="401"]') || {}).innerText)`, 30*time.Second)
	if got := p.str(`document.querySelector('#auth').innerText`); !strings.Contains(got, "not accepted") || strings.Contains(got, "signed in as") {
		t.Errorf("the header after a wrong password: %q", got)
	}
	if l := checkMarked("a wrong password"); unauthorized(l) == 0 || l[len(l)-1].authz != "Basic "+base64.StdEncoding.EncodeToString([]byte("alice:looking-glass")) {
		t.Errorf("the page's requests with a wrong password: %+v", l)
	}

	// The right one: alice's task, not bob's.
	signIn("#sign-in", "alice", password)
	p.waitFor("alice's task", rowState(mine)+` !== undefined`, 30*time.Second)
	if got := p.str(`[...document.querySelectorAll('#rows tr[data-id]')].map(r => r.dataset.id).join(',')`); got != mine {
		t.Errorf("alice sees %q, want her task %s only (not bob's %s)", got, mine, bobs)
	}
	if got := p.str(`document.querySelector('#auth-user').innerText`); got != "signed in as alice" {
		t.Errorf("the header says %q", got)
	}
	if got := p.str(`JSON.parse(sessionStorage.getItem('tesk.dashboard.basic')).user`); got != "alice" {
		t.Errorf("the tab keeps the user %q", got)
	}
	l := checkMarked("alice")
	if len(l) == 0 || unauthorized(l) != 0 {
		t.Errorf("the page's requests as alice: %+v", l)
	}
	for _, a := range l {
		if a.authz != alice {
			t.Errorf("the page's %s sent Authorization %q, want %q", a.path, a.authz, alice)
		}
	}

	// Sign out: the tab forgets them, and the next list is refused.
	p.click("#sign-out")
	p.waitFor("signed out", `document.querySelector('#list-error .error[data-status="401"]') && document.querySelector('#sign-in')`, 30*time.Second)
	if got := p.str(`sessionStorage.length + ' ' + sessionStorage.getItem('tesk.dashboard.basic')`); got != "0 null" {
		t.Errorf("after signing out the tab keeps %q", got)
	}
	if got := p.str(`document.querySelectorAll('#auth-user, #sign-out').length`); got != "0" {
		t.Errorf("after signing out the header shows %s signed-in elements", got)
	}
	if l := checkMarked("signed out"); unauthorized(l) == 0 || l[len(l)-1].authz != "" {
		t.Errorf("the page's requests after signing out: %+v", l)
	}
}

// The list's first page over 10,000 tasks: the time from the page's
// navigation to the first page's rows, measured in the browser (reported,
// not held to a bound: the machine is shared).
func TestDashboardListOf10000Tasks(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	api := newTESAPI(t, e, "")
	const n = 10000
	begin := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			api.create(map[string]any{"name": fmt.Sprintf("load-%05d", i), "tags": map[string]any{"batch": fmt.Sprint(i % 10)},
				"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}})
		}()
	}
	wg.Wait()
	t.Logf("created %d tasks through the TES API in %.1f s", n, time.Since(begin).Seconds())
	b := browser(t)
	// Each load in a tab of its own, closed afterwards (an open list
	// refreshes itself, and would load the API during the next).
	var times, request []float64
	for i := 0; i < 5; i++ {
		p := newPage(t, b, api)
		p.open("#/")
		p.waitFor("the first page", `document.querySelector('main[data-ready="list"]')`, 60*time.Second)
		times = append(times, eval[float64](p, `window.teskTimings.listFirstRows`))
		// The list's request, as the browser timed it.
		request = append(request, eval[float64](p, `(e => e.responseEnd - e.startTime)(performance.getEntriesByType('resource').find(e => e.name.includes('/tasks?')))`))
		if got := p.str(`document.querySelectorAll('#rows tr[data-id]').length`); got != "50" {
			t.Errorf("the first page has %s rows, want 50", got)
		}
		if p.str(`document.querySelector('#older').disabled`) != "false" {
			t.Errorf("no next page over %d tasks", n)
		}
		p.close()
	}
	// Paging: the next page, and back.
	p := newPage(t, b, api)
	p.open("#/")
	p.waitFor("the first page", `document.querySelector('main[data-ready="list"]')`, 60*time.Second)
	first := p.str(`document.querySelector('#rows tr[data-id]').dataset.id`)
	p.click("#older")
	p.waitFor("the second page", `document.querySelector('#page-no').innerText === "page 2" && document.querySelectorAll('#rows tr[data-id]').length === 50`, 60*time.Second)
	if second := p.str(`document.querySelector('#rows tr[data-id]').dataset.id`); second == first {
		t.Errorf("the second page begins with %s, as the first", second)
	}
	p.click("#newer")
	p.waitFor("the first page again", fmt.Sprintf(`document.querySelector('#page-no').innerText === "page 1" && document.querySelector('#rows tr[data-id]').dataset.id === %q`, first), 60*time.Second)

	// The API's answer alone, for the page's query and the MINIMAL view.
	apiMedian := func(query string) float64 {
		var ms []float64
		for i := 0; i < 5; i++ {
			start := time.Now()
			if code, body := api.do(http.MethodGet, "/tasks?"+query, nil); code != http.StatusOK {
				t.Fatalf("list %s: %d %s", query, code, body)
			}
			ms = append(ms, float64(time.Since(start).Microseconds())/1000)
		}
		return median(ms)
	}
	basic, minimal := apiMedian("view=BASIC&page_size=50"), apiMedian("view=MINIMAL&page_size=50")
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("the list page's first load over %d tasks (navigation to the first 50 rows): %.0f ms median of %.0f ms, "+
		"of which the list's request %.0f ms (median of %.0f ms); the API's answer to the test alone: BASIC %.0f ms, MINIMAL %.0f ms (medians of 5); load average %s",
		n, median(times), times, median(request), request, basic, minimal, strings.Join(strings.Fields(string(load))[:3], " "))
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
