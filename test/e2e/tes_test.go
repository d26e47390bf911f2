//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/coreos/go-oidc/v3/oidc/oidctest"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/test/apicheck"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// tesAPI is the TES API serving an env's namespace under the Role of
// config/knative/tes-rbac.yaml, posting its events to sink ("" posts none).
type tesAPI struct {
	t     *testing.T
	e     *env
	url   string // ends in /ga4gh/tes/v1
	token string // the bearer token of the requests, if any
	// authz is the Authorization header of the requests without a token,
	// if any (e.g. Basic credentials).
	authz string
	srv   *httptest.Server
}

func newTESAPI(t *testing.T, e *env, sink string) *tesAPI { return newTESAPIWith(t, e, sink, nil) }

func newTESAPIWith(t *testing.T, e *env, sink string, auth tes.Authenticator) *tesAPI {
	t.Helper()
	return newTESAPIDashboard(t, e, sink, tesAPIOptions{Auth: auth, Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 16})
}

// tesAPIOptions are a test's TES API's access control, its dashboard's
// configuration and its executors' log tail.
type tesAPIOptions struct {
	Auth         tes.Authenticator
	Dashboard    dashboard.Config
	LogTailBytes int
	// BackendParameters: the operator's configuration of them (nil: none).
	BackendParameters *backendparams.Config
	// Steps changes the handler's settings the TES API reads too (e.g.
	// the transfer volume of file:// URLs).
	Steps func(*steps.Config)
	// Storage is service-info's storage (TES_STORAGE; nil: the default).
	Storage []string
	// Wrap, if set, wraps the server's handler (e.g. to record what the
	// API answers).
	Wrap func(http.Handler) http.Handler
}

// newTESAPIDashboard serves the TES API and its dashboard; every answer of
// the API is held to its OpenAPI document (a test fails on one that does
// not fit).
func newTESAPIDashboard(t *testing.T, e *env, sink string, o tesAPIOptions) *tesAPI {
	t.Helper()
	ctx := context.Background()
	if err := devstack.ApplyTESRBAC(ctx, e.c, filepath.Join(repoRoot(t), "config", "knative", "tes-rbac.yaml"), e.ns); err != nil {
		t.Fatalf("apply the TES API's RBAC: %v", err)
	}
	kubeconfig, err := e.c.ServiceAccountKubeconfig(ctx, e.ns, devstack.TESRole)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := steps.DefaultConfig()
	cfg.Namespace = e.ns
	cfg.BackendParameters = o.BackendParameters
	if o.Steps != nil {
		o.Steps(&cfg)
	}
	s := &tes.Server{
		Client: client, Metadata: md,
		Config: tes.Config{Namespace: e.ns, Sink: sink, Steps: cfg, LogTailBytes: o.LogTailBytes,
			Info: tesv1.ServiceInfo{ID: "test.tes", Name: "TES", Organization: tesv1.Organization{Name: "test", URL: "https://example.org"}, Version: "1", Storage: o.Storage}},
		Auth: o.Auth,
		Log:  zaptest.NewLogger(t, zaptest.Level(e2eLogLevel())).Sugar().Named("tes"),
	}
	if sink != "" {
		if s.Events, err = cloudevents.NewClientHTTP(); err != nil {
			t.Fatal(err)
		}
	}
	routes := s.Echo()
	dashboard.Mount(routes, o.Dashboard)
	h := openAPIChecker(t).Handler(routes, func(err error) { t.Errorf("OpenAPI: %v", err) })
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &tesAPI{t: t, e: e, url: hs.URL + tes.BasePath, srv: hs}
}

var (
	checkerOnce sync.Once
	checker     *apicheck.Checker
	checkerErr  error
)

// openAPIChecker is the OpenAPI document of the TES API, loaded once.
func openAPIChecker(t *testing.T) *apicheck.Checker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = apicheck.Load() })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

func (a *tesAPI) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		r = bytes.NewReader(mustJSON(a.t, b))
	}
	req, _ := http.NewRequest(method, a.url+path, r)
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	} else if a.authz != "" {
		req.Header.Set("Authorization", a.authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (a *tesAPI) create(task any) string {
	a.t.Helper()
	code, body := a.do(http.MethodPost, "/tasks", task)
	if code != http.StatusOK {
		a.t.Fatalf("create: %d %s", code, body)
	}
	var r map[string]any
	if err := json.Unmarshal(body, &r); err != nil || len(r) != 1 || r["id"] == "" {
		a.t.Fatalf("create answered %s", body)
	}
	return r["id"].(string)
}

// get reads a task in a view and checks the body against the specification's
// requirements.
func (a *tesAPI) get(id, view string) map[string]any {
	a.t.Helper()
	code, body := a.do(http.MethodGet, "/tasks/"+id+"?view="+view, nil)
	if code != http.StatusOK {
		a.t.Fatalf("get %s %s: %d %s", id, view, code, body)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		a.t.Fatal(err)
	}
	checkTaskBody(a.t, m, view)
	return m
}

// checkTaskBody holds a tesTask to the specification: MINIMAL is id and
// state only; every task log has lists logs and outputs, every executor log
// an exit_code; BASIC has no content, stdout, stderr or system_logs.
func checkTaskBody(t *testing.T, m map[string]any, view string) {
	t.Helper()
	if _, ok := m["id"].(string); !ok {
		t.Errorf("no id: %v", m)
	}
	if s, _ := m["state"].(string); !contains(tesv1.States, s) {
		t.Errorf("state %v is not a tesState", m["state"])
	}
	if view == tesv1.ViewMinimal {
		if len(m) != 2 {
			t.Errorf("MINIMAL has more than id and state: %v", m)
		}
		return
	}
	if ex, ok := m["executors"].([]any); !ok || len(ex) == 0 {
		t.Errorf("%s: no executors: %v", view, m)
	}
	logs, _ := m["logs"].([]any)
	for _, l := range logs {
		tl := l.(map[string]any)
		if _, ok := tl["logs"].([]any); !ok {
			t.Errorf("%s: task log without a list of executor logs: %v", view, tl)
		}
		if _, ok := tl["outputs"].([]any); !ok {
			t.Errorf("%s: task log without a list of outputs: %v", view, tl)
		}
		if _, ok := tl["system_logs"]; ok && view == tesv1.ViewBasic {
			t.Errorf("BASIC has system_logs")
		}
		for _, el := range tl["logs"].([]any) {
			e := el.(map[string]any)
			if _, ok := e["exit_code"].(float64); !ok {
				t.Errorf("%s: executor log without exit_code: %v", view, e)
			}
			if view == tesv1.ViewBasic && (e["stdout"] != nil || e["stderr"] != nil) {
				t.Errorf("BASIC has stdout or stderr: %v", e)
			}
		}
	}
	if view == tesv1.ViewBasic {
		ins, _ := m["inputs"].([]any)
		for _, in := range ins {
			if _, ok := in.(map[string]any)["content"]; ok {
				t.Errorf("BASIC has an input's content")
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (a *tesAPI) waitState(id, want string, timeout time.Duration) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		last = a.get(id, tesv1.ViewMinimal)
		if last["state"] == want {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.t.Fatalf("task %s: %v after %s, want %s; jobs: %s", id, last, timeout, want, a.e.describeJobs(id))
	return nil
}

// demoTask is a content input, two executors and an output.
func demoTask(name string) map[string]any {
	return map[string]any{
		"name":        name,
		"description": "upper-cases a greeting",
		"tags":        map[string]any{"project": "demo"},
		"inputs":      []any{map[string]any{"name": "greeting", "path": "/data/in/greeting.txt", "content": "hello\n"}},
		"outputs":     []any{map[string]any{"name": "result", "path": "/data/out/result.txt", "url": "s3://results/result.txt"}},
		"executors": []any{
			map[string]any{"image": "ubuntu:24.04", "command": []any{"tr", "a-z", "A-Z"}, "stdin": "/data/in/greeting.txt", "stdout": "/data/out/result.txt"},
			map[string]any{"image": "ubuntu:24.04", "command": []any{"cat", "/data/out/result.txt"}, "env": map[string]any{"LANG": "C"}},
		},
		"resources": map[string]any{"cpu_cores": 1, "ram_gb": 0.25},
	}
}

// A task created through the TES API runs to COMPLETE through the handler
// and the adapter; each view says what the specification asks.
func TestTESTaskRunsToComplete(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.LogTailBytes = 16 }})
	api := newTESAPI(t, e, e.url)
	stop, err := shared.SetLogsForSelector(context.Background(), e.ns, taskmeta.LabelTask, "line one\nHELLO FROM THE EXECUTOR\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	id := api.create(demoTask("demo-1"))
	api.waitState(id, tesv1.StateComplete, 60*time.Second)

	basic := api.get(id, tesv1.ViewBasic)
	if basic["name"] != "demo-1" || basic["description"] != "upper-cases a greeting" || basic["creation_time"] == nil {
		t.Errorf("BASIC: %v", basic)
	}
	logs := basic["logs"].([]any)[0].(map[string]any)
	if ex := logs["logs"].([]any); len(ex) != 2 || ex[0].(map[string]any)["exit_code"] != 0.0 || ex[1].(map[string]any)["end_time"] == nil {
		t.Errorf("BASIC executor logs: %v", logs["logs"])
	}
	if logs["start_time"] == nil || logs["end_time"] == nil {
		t.Errorf("BASIC task log times: %v", logs)
	}
	full := api.get(id, tesv1.ViewFull)
	if full["inputs"].([]any)[0].(map[string]any)["content"] != "hello\n" {
		t.Errorf("FULL: input content %v", full["inputs"])
	}
	exlogs := full["logs"].([]any)[0].(map[string]any)["logs"].([]any)
	// The handler recorded the executor's log when it ended, its end
	// bounded by the handler's TES_LOG_TAIL_BYTES (16 bytes here).
	if got := exlogs[0].(map[string]any)["stdout"]; got != "OM THE EXECUTOR\n" {
		t.Errorf("FULL stdout %q, want the log's last 16 bytes", got)
	}
	// The executor's job is as the TESK API makes it.
	j, err := e.job(id + "-ex-00")
	if err != nil {
		t.Fatal(err)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if j.Labels["job-type"] != "executor" || j.Labels["executor-no"] != "0" || j.Annotations["tes-task-name"] != "demo-1" ||
		strings.Join(c.Command, " ") != "/bin/sh -c tr a-z A-Z < /data/in/greeting.txt > /data/out/result.txt" ||
		c.Resources.Limits.Cpu().String() != "1" || c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("executor job: labels %v annotations %v command %q resources %v", j.Labels, j.Annotations, c.Command, c.Resources)
	}
	// Cancelling an ended task: 200, and it stays COMPLETE.
	if code, body := api.do(http.MethodPost, "/tasks/"+id+":cancel", nil); code != http.StatusOK || string(body) != "{}\n" {
		t.Errorf("cancel of an ended task: %d %s", code, body)
	}
	if s := api.get(id, tesv1.ViewMinimal)["state"]; s != tesv1.StateComplete {
		t.Errorf("after cancel: %v", s)
	}
}

// An executor that fails ends the task EXECUTOR_ERROR with its exit code.
func TestTESExecutorError(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, e.url)
	id := api.create(map[string]any{"executors": []any{map[string]any{"image": "fate.tesk.test/fail:3", "command": []any{"false"}}}})
	api.waitState(id, tesv1.StateExecutorError, 60*time.Second)
	full := api.get(id, tesv1.ViewFull)
	tl := full["logs"].([]any)[0].(map[string]any)
	if ex := tl["logs"].([]any); len(ex) != 1 || ex[0].(map[string]any)["exit_code"] != 3.0 {
		t.Errorf("executor logs %v", tl["logs"])
	}
	if sl, _ := tl["system_logs"].([]any); len(sl) == 0 {
		t.Errorf("FULL: no system_logs saying why the task stopped: %v", tl)
	}
}

// Cancel: the label, then CANCELING and CANCELED through the handler; an
// unknown task is 404.
func TestTESCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, e.url)
	// fate.tesk.test/manual: the executor's pod is scheduled and never ends.
	id := api.create(map[string]any{"executors": []any{map[string]any{"image": "fate.tesk.test/manual", "command": []any{"sleep", "1000"}}}})
	e.waitFor("the executor's job", 30*time.Second, func() bool { _, err := e.job(id + "-ex-00"); return err == nil })
	if code, body := api.do(http.MethodPost, "/tasks/"+id+":cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	api.waitState(id, tesv1.StateCanceled, 60*time.Second)
	if _, err := e.job(id + "-ex-00"); err == nil {
		t.Errorf("the running executor's job is still there")
	}
	if code, _ := api.do(http.MethodPost, "/tasks/task-00000000:cancel", nil); code != http.StatusNotFound {
		t.Errorf("cancel of an unknown task: %d", code)
	}
	if code, _ := api.do(http.MethodGet, "/tasks/task-00000000", nil); code != http.StatusNotFound {
		t.Errorf("get of an unknown task: %d", code)
	}
}

// A task whose task.submitted never arrived is started by the sweep once
// it has waited steps.StartGrace.
func TestTESLostSubmissionStartedBySweep(t *testing.T) {
	e := newEnv(t, envOptions{})
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) }))
	t.Cleanup(dead.Close)
	api := newTESAPI(t, e, dead.URL)
	id := api.create(map[string]any{"executors": []any{map[string]any{"image": "ubuntu:24.04", "command": []any{"true"}}}})
	e.sweep()
	if s := api.get(id, tesv1.ViewMinimal)["state"]; s != tesv1.StateQueued {
		t.Fatalf("within the grace: %v, want QUEUED", s)
	}
	time.Sleep(steps.StartGrace + time.Second)
	e.sweep()
	api.waitState(id, tesv1.StateComplete, 60*time.Second)
}

// Each validation error is a 400 naming the field, and writes nothing.
func TestTESValidationErrors(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	api := newTESAPI(t, e, e.url)
	ex := `{"image":"alpine","command":["true"]}`
	for body, field := range map[string]string{
		`{}`:                                 "executors",
		`{"executors":[{"image":"alpine"}]}`: "executors[0].command",
		`{"executors":[{"command":["x"]}]}`:  "executors[0].image",
		`{"executors":[` + ex + `],"inputs":[{"path":"/data/a"}]}`:                                                   "inputs[0]",
		`{"executors":[` + ex + `],"inputs":[{"path":"data/a","content":"x"}]}`:                                      "inputs[0].path",
		`{"executors":[` + ex + `],"outputs":[{"path":"/data/a"}]}`:                                                  "outputs[0].url",
		`{"executors":[` + ex + `],"outputs":[{"path":"/data/*.txt","url":"s3://b/"}]}`:                              "outputs[0].path_prefix",
		`{"executors":[` + ex + `],"inputs":[{"path":"/data/a","url":"s3://b/a","type":"BLOB"}]}`:                    "inputs[0].type",
		`{"executors":[` + ex + `],"volumes":["rel"]}`:                                                               "volumes[0]",
		`{"executors":[{"image":"a","command":["x"],"workdir":"w"}]}`:                                                "executors[0].workdir",
		`{"executors":[` + ex + `],"colour":"red"}`:                                                                  "colour",
		`{"executors":[` + ex + `],"resources":{"backend_parameters":{"gpu":"1"},"backend_parameters_strict":true}}`: "resources.backend_parameters",
	} {
		code, out := api.do(http.MethodPost, "/tasks", body)
		var m map[string]string
		_ = json.Unmarshal(out, &m)
		if code != http.StatusBadRequest || !strings.Contains(m["error"], field) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, code, out, field)
		}
	}
	cms, err := shared.Client.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
	if err != nil || len(cms.Items) != 0 {
		t.Errorf("refused tasks left %d anchors (%v)", len(cms.Items), err)
	}
}

// The list: 300 tasks in pages without duplicates or gaps, newest first,
// and each filter. No handler runs: the tasks stay as the API wrote them.
func TestTESListPagingAndFilters(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	api := newTESAPI(t, e, "")
	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			task := map[string]any{
				"name":      fmt.Sprintf("%s-%03d", map[bool]string{true: "align", false: "call"}[i%3 == 0], i),
				"tags":      map[string]any{"batch": fmt.Sprint(i % 2), "odd": map[bool]string{true: "yes", false: ""}[i%2 == 1]},
				"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}},
			}
			ids[i] = api.create(task)
		}()
	}
	wg.Wait()
	for _, id := range ids[:5] {
		if code, _ := api.do(http.MethodPost, "/tasks/"+id+":cancel", nil); code != http.StatusOK {
			t.Fatalf("cancel %s: %d", id, code)
		}
	}

	list := func(q string) (tesv1.ListTasksResponse, []map[string]any) {
		t.Helper()
		code, body := api.do(http.MethodGet, "/tasks?"+q, nil)
		if code != http.StatusOK {
			t.Fatalf("list %s: %d %s", q, code, body)
		}
		var r tesv1.ListTasksResponse
		var raw struct {
			Tasks []map[string]any `json:"tasks"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(body, &raw)
		if raw.Tasks == nil {
			t.Fatalf("list %s: tasks is not a list: %s", q, body)
		}
		return r, raw.Tasks
	}
	all := func(q string) []string {
		t.Helper()
		var got []string
		seen := map[string]bool{}
		token := ""
		for pages := 0; pages < 100; pages++ {
			qq := q
			if token != "" {
				qq += "&page_token=" + url.QueryEscape(token)
			}
			r, _ := list(qq)
			for _, tk := range r.Tasks {
				if seen[tk.ID] {
					t.Fatalf("%s: %s on two pages", q, tk.ID)
				}
				seen[tk.ID] = true
				got = append(got, tk.ID)
			}
			if r.NextPageToken == "" {
				return got
			}
			token = r.NextPageToken
		}
		t.Fatalf("%s: more than 100 pages", q)
		return nil
	}
	got := all("page_size=64")
	if len(got) != n {
		t.Fatalf("%d tasks listed, want %d", len(got), n)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("%s listed, not created here", id)
		}
	}
	// Newest first: in the order the TES API drew the ids, each within a
	// second of the task's creation time.
	r, raw := list("view=BASIC&page_size=300")
	var prev time.Time
	for i, tk := range raw {
		drawn, ok := taskmeta.IDTime(tk["id"].(string))
		created, err := time.Parse(time.RFC3339, tk["creation_time"].(string))
		if !ok || err != nil || created.Sub(drawn.Truncate(time.Second)).Abs() > time.Second {
			t.Fatalf("%v: id drawn at %v, created %v", tk["id"], drawn, tk["creation_time"])
		}
		if i > 0 && drawn.After(prev) {
			t.Fatalf("not newest first at %d: %v drawn at %v after %v", i, tk["id"], drawn, prev)
		}
		prev = drawn
	}
	for _, tk := range raw {
		checkTaskBody(t, tk, tesv1.ViewBasic)
	}
	if len(r.Tasks) != n || r.NextPageToken != "" {
		t.Errorf("one page of 300: %d tasks, token %q", len(r.Tasks), r.NextPageToken)
	}
	// The default page is 256.
	if r, _ := list(""); len(r.Tasks) != tes.DefaultPageSize || r.NextPageToken == "" {
		t.Errorf("default page: %d tasks, token %q", len(r.Tasks), r.NextPageToken)
	}
	count := func(pred func(i int) bool) int {
		c := 0
		for i := 0; i < n; i++ {
			if pred(i) {
				c++
			}
		}
		return c
	}
	for q, wantN := range map[string]int{
		"name_prefix=align":         count(func(i int) bool { return i%3 == 0 }),
		"name_prefix=call-00":       count(func(i int) bool { return i%3 != 0 && i < 10 }),
		"tag_key=batch&tag_value=1": count(func(i int) bool { return i%2 == 1 }),
		"tag_key=batch":             n,
		"tag_key=odd&tag_value=yes&tag_key=batch&tag_value=1": count(func(i int) bool { return i%2 == 1 }),
		"tag_key=odd&tag_value=yes&tag_key=batch&tag_value=0": 0,
		"tag_key=none":                      0,
		"state=CANCELING":                   5,
		"state=QUEUED":                      n - 5,
		"state=COMPLETE":                    0,
		"name_prefix=align&state=CANCELING": count(func(i int) bool { return i%3 == 0 && i < 5 }),
	} {
		if got := all(q + "&page_size=50"); len(got) != wantN {
			t.Errorf("%s: %d tasks, want %d", q, len(got), wantN)
		}
	}
	for _, q := range []string{"page_size=0", "state=DONE", "page_token=nonsense", "view=ALL"} {
		if code, body := api.do(http.MethodGet, "/tasks?"+q, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}

	// Anchors of TESK's ids (task- and 8 hex digits, as an earlier version
	// of this API drew them): listed after the others, in id order; one
	// ended before its final state was labelled.
	var legacy []string
	for i := range 12 {
		id := fmt.Sprintf("task-%08x", 0x1000+i*0x777)
		task := &tesv1.Task{Name: fmt.Sprintf("legacy-%02d", i), Executors: []tesv1.Executor{{Image: "alpine", Command: []string{"true"}}}}
		raw, err := tes.Convert(task, id, tes.ConvertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := tes.BuildAnchor(e.ns, id, task, raw, tes.Caller{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			cm.Annotations[taskmeta.AnnotationState] = tesv1.StateComplete
		}
		if _, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		legacy = append(legacy, id)
	}
	got = all("page_size=7")
	if len(got) != n+len(legacy) || !slices.Equal(got[n:], legacy) {
		t.Errorf("with TESK's ids: %d tasks, the last %d %v; want %d, the last TESK's in id order %v", len(got), len(legacy), got[min(n, len(got)):], n+len(legacy), legacy)
	}
	for q, want := range map[string][]string{
		"name_prefix=legacy-0": legacy[:10],
		"state=COMPLETE":       {legacy[3]},
	} {
		if got := all(q + "&page_size=4"); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
	if got := all("state=QUEUED&page_size=50"); len(got) != n-5+len(legacy)-1 {
		t.Errorf("state=QUEUED with TESK's ids: %d tasks, want %d", len(got), n-5+len(legacy)-1)
	}
}

// Access control with OIDC tokens of an issuer the test serves with keys it
// generated: each user sees, lists and cancels only their own tasks; a
// member of the administrators' group all of them; a bad token gets 401.
func TestTESAccessControl(t *testing.T) {
	e := newEnv(t, envOptions{})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &oidctest.Server{PublicKeys: []oidctest.PublicKey{{PublicKey: key.Public(), KeyID: "k1", Algorithm: oidc.RS256}}}
	hs := httptest.NewServer(is)
	t.Cleanup(hs.Close)
	is.SetIssuer(hs.URL)
	auth, err := tes.NewOIDC(context.Background(), tes.OIDCConfig{Issuer: hs.URL, Audience: "tesk", GroupsClaim: "groups", AdminGroup: "tes-admins"})
	if err != nil {
		t.Fatal(err)
	}
	token := func(sub, groups string) string {
		return oidctest.SignIDToken(key, "k1", oidc.RS256, fmt.Sprintf(`{"iss":%q,"aud":"tesk","sub":%q,"exp":%d,"groups":[%s]}`,
			hs.URL, sub, time.Now().Add(time.Hour).Unix(), groups))
	}
	api := newTESAPIWith(t, e, e.url, auth)
	task := map[string]any{"executors": []any{map[string]any{"image": "ubuntu:24.04", "command": []any{"true"}}}}

	api.token = ""
	if code, body := api.do(http.MethodGet, "/tasks", nil); code != http.StatusUnauthorized || !strings.Contains(string(body), "bearer token") {
		t.Errorf("no token: %d %s", code, body)
	}
	api.token = "not-a-token"
	if code, _ := api.do(http.MethodPost, "/tasks", task); code != http.StatusUnauthorized {
		t.Errorf("a bad token: %d", code)
	}
	api.token = token("alice@example.org", `"users"`)
	aliceTasks := []string{api.create(task), api.create(task)}
	api.waitState(aliceTasks[0], tesv1.StateComplete, 60*time.Second)
	api.token = token("bob|github", `"users"`)
	bobTask := api.create(task)

	ids := func(who string) []string {
		t.Helper()
		code, body := api.do(http.MethodGet, "/tasks?view=BASIC", nil)
		if code != http.StatusOK {
			t.Fatalf("%s lists: %d %s", who, code, body)
		}
		var r tesv1.ListTasksResponse
		_ = json.Unmarshal(body, &r)
		var out []string
		for _, tk := range r.Tasks {
			out = append(out, tk.ID)
		}
		sort.Strings(out)
		return out
	}
	if got := ids("bob"); fmt.Sprint(got) != fmt.Sprint([]string{bobTask}) {
		t.Errorf("bob lists %v, want only his %s", got, bobTask)
	}
	if code, _ := api.do(http.MethodGet, "/tasks/"+aliceTasks[0], nil); code != http.StatusForbidden {
		t.Errorf("bob reads alice's task: %d, want 403", code)
	}
	if code, _ := api.do(http.MethodPost, "/tasks/"+aliceTasks[1]+":cancel", nil); code != http.StatusForbidden {
		t.Errorf("bob cancels alice's task: %d, want 403", code)
	}
	api.token = token("alice@example.org", `"users"`)
	want := append([]string{}, aliceTasks...)
	sort.Strings(want)
	if got := ids("alice"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("alice lists %v, want %v", got, want)
	}
	api.token = token("carol", `"users","tes-admins"`)
	all := append(want, bobTask)
	sort.Strings(all)
	if got := ids("an administrator"); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Errorf("an administrator lists %v, want %v", got, all)
	}
	if code, _ := api.do(http.MethodGet, "/tasks/"+bobTask, nil); code != http.StatusOK {
		t.Errorf("an administrator reads bob's task: %d", code)
	}
	// The executor jobs carry the creator's label-safe form.
	j, err := e.job(aliceTasks[0] + "-ex-00")
	if err != nil {
		t.Fatal(err)
	}
	if j.Labels[taskmeta.LabelCreator] != tes.LabelSafe("alice@example.org") {
		t.Errorf("creator-user-id %q", j.Labels[taskmeta.LabelCreator])
	}
}

// ignore_error: a failing executor that ignores errors is logged with its
// exit code and the next one runs; one that does not stops the task.
func TestTESIgnoreError(t *testing.T) {
	e := newEnv(t, envOptions{})
	api := newTESAPI(t, e, e.url)
	task := func(ignore bool) map[string]any {
		return map[string]any{"executors": []any{
			map[string]any{"image": "fate.tesk.test/fail:2", "command": []any{"ERROR"}, "ignore_error": ignore},
			map[string]any{"image": "alpine", "command": []any{"echo", "hello"}},
		}}
	}
	exitCodes := func(id string) []float64 {
		var codes []float64
		for _, l := range api.get(id, tesv1.ViewFull)["logs"].([]any)[0].(map[string]any)["logs"].([]any) {
			codes = append(codes, l.(map[string]any)["exit_code"].(float64))
		}
		return codes
	}
	stops := api.create(task(false))
	goesOn := api.create(task(true))
	api.waitState(stops, tesv1.StateExecutorError, 60*time.Second)
	api.waitState(goesOn, tesv1.StateComplete, 60*time.Second)
	if got := exitCodes(stops); fmt.Sprint(got) != "[2]" {
		t.Errorf("without ignore_error: exit codes %v, want [2]", got)
	}
	if got := exitCodes(goesOn); fmt.Sprint(got) != "[2 0]" {
		t.Errorf("with ignore_error: exit codes %v, want [2 0]", got)
	}
}
