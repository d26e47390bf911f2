//go:build e2e

// Package e2e runs tasks end to end on a real local control plane (etcd,
// kube-apiserver, the Job controller, the scheduler, kwok playing nodes and
// pods), with the handler fed by the real Knative ApiServerSource adapter.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// shared is the cluster of every test of the package (see TestMain).
var shared *cluster.Cluster

// auditLog is the shared cluster's audit log: every request of every
// ServiceAccount (benchkit.ServiceAccountsPolicy).
var auditLog string

func TestMain(m *testing.M) {
	begin := time.Now()
	dir, err := os.MkdirTemp("", "tesk-e2e-audit-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit log:", err)
		os.Exit(1)
	}
	policy := filepath.Join(dir, "policy.yaml")
	auditLog = filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(benchkit.ServiceAccountsPolicy), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "audit policy:", err)
		os.Exit(1)
	}
	// Mutating admission policies stand for the webhooks of a real cluster
	// that add init containers to pods (sidecar injectors): the tasks' own
	// specs may hold none (behaviour §8.8).
	c, err := cluster.Start(context.Background(), cluster.Options{APIServerFlags: append([]string{
		"--feature-gates=MutatingAdmissionPolicy=true", "--runtime-config=admissionregistration.k8s.io/v1beta1=true",
	}, benchkit.AuditFlags(policy, auditLog)...)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start cluster:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Printf("local cluster started in %.1fs\n", time.Since(begin).Seconds())
	shared = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop cluster:", err)
		code = 1
	}
	if err := stopRealNodeCluster(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the real node's cluster:", err)
		code = 1
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// HandlerServiceAccount is the handler's ServiceAccount in config/knative.
const HandlerServiceAccount = devstack.HandlerRole

// repoRoot is the module's root, from the test's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var nsCounter atomic.Int64

// env is one test's namespace, with the handler serving it under the Role of
// config/knative and the ApiServerSource adapter feeding it under its own.
type env struct {
	t  *testing.T
	c  *cluster.Cluster // shared, or the real node's cluster
	ns string
	// config are the objects of config/knative as the env deployed them
	// (their ServiceAccounts, Roles and RoleBindings): in ns, with the
	// handler's Role as envOptions.role made it.
	config  []*unstructured.Unstructured
	url     string // the handler
	srv     *eventserver.Server
	adapter *cluster.Adapter
	posted  atomic.Int64
	// delivered is what the adapter delivered (see settle); nil without
	// an adapter.
	delivered *deliveries
	markers   atomic.Int64
}

type envOptions struct {
	// cluster is the cluster of the test (default: shared).
	cluster *cluster.Cluster
	// config changes the handler's configuration.
	config func(*steps.Config)
	// role changes the handler's Role before it is applied.
	role func(map[string]any)
	// noAdapter: events are posted by the test only.
	noAdapter bool
	// sink wraps the handler as the adapter's sink (e.g. to duplicate
	// events).
	sink func(handler http.Handler) http.Handler
	// states, when set, is told each task's state changes.
	states runner.StatePublisher
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	c := o.cluster
	if c == nil {
		c = shared
	}
	name := fmt.Sprintf("e%d-%s", nsCounter.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	config := applyConfigRBAC(t, c, name, o.role)
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, name, HandlerServiceAccount)
	if err != nil {
		t.Fatalf("service account kubeconfig: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000

	cfg := envConfig(name)
	if n := c.RealNode(); n != nil {
		// The tests' HTTP and FTP servers listen on this machine's
		// address on the pods' bridge, a private one.
		cfg.FilerAllowedCIDRs = n.HostIP + "/32"
	}
	if o.config != nil {
		o.config(&cfg)
	}
	log := zaptest.NewLogger(t, zaptest.Level(e2eLogLevel())).Sugar()
	srv, err := eventserver.New(rc, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv.Runner.States = o.states
	var h http.Handler = srv.Echo()
	e := &env{t: t, c: c, ns: name, srv: srv, config: config}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	if !o.noAdapter {
		inner := h
		if o.sink != nil {
			inner = o.sink(h)
		}
		e.delivered = &deliveries{markers: map[string]bool{}}
		ss := httptest.NewServer(e.delivered.track(inner))
		t.Cleanup(ss.Close)
		sink := ss.URL
		// The adapter runs as the ApiServerSource's ServiceAccount, under
		// its Role, as Knative runs it.
		sa, err := devstack.SourceServiceAccount(config)
		if err != nil {
			t.Fatal(err)
		}
		sourceKubeconfig, err := c.ServiceAccountKubeconfig(ctx, name, sa)
		if err != nil {
			t.Fatalf("the adapter's service account kubeconfig: %v", err)
		}
		a, err := c.StartAdapter(ctx, cluster.AdapterOptions{
			Name:       "tesk-events",
			Namespace:  name,
			Sink:       sink,
			Resources:  devstack.AdapterResources(),
			Kubeconfig: sourceKubeconfig,
		})
		if err != nil {
			t.Fatalf("start adapter: %v", err)
		}
		t.Cleanup(func() { _ = a.Stop() })
		e.adapter = a
	}
	return e
}

// envConfig is the handler's configuration in an env's namespace.
func envConfig(ns string) steps.Config {
	cfg := steps.DefaultConfig()
	cfg.Namespace = ns
	cfg.FilerName, cfg.FilerVersion = "tesk-filer", "test"
	cfg.PodTimeout = 3 * time.Second
	cfg.TrustEvents = true // the tests submit the task JSON in the events
	cfg.ExecutorPodAnnotations = []string{cluster.FateAnnotationPrefix}
	return cfg
}

// applyConfigRBAC applies every ServiceAccount, Role and RoleBinding of
// config/knative into the namespace, the handler's Role edited by change,
// and returns config/knative's objects as deployed there.
func applyConfigRBAC(t *testing.T, c *cluster.Cluster, ns string, change func(map[string]any)) []*unstructured.Unstructured {
	t.Helper()
	objs, err := devstack.ConfigObjects(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	objs = devstack.InNamespace(objs, ns)
	role, err := devstack.HandlerRoleOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(role.Object)
	}
	if err := devstack.ApplyRBACObjects(context.Background(), c, objs); err != nil {
		t.Fatalf("apply config/knative's RBAC: %v", err)
	}
	return objs
}

// post sends a binary-mode CloudEvent to the handler and returns the status
// and body.
func (e *env) post(typ string, data any) (int, string) {
	e.t.Helper()
	code, body := e.postTo(e.url, typ, data)
	if code == 0 {
		e.t.Fatalf("post %s: %s", typ, body)
	}
	return code, body
}

// postTo sends a binary-mode CloudEvent to a handler; a request that got no
// answer is status 0 with the error.
func (e *env) postTo(url, typ string, data any) (int, string) {
	var body []byte
	switch d := data.(type) {
	case []byte:
		body = d
	case string:
		body = []byte(d)
	default:
		var err error
		if body, err = json.Marshal(d); err != nil {
			return 0, err.Error()
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", fmt.Sprintf("test-%d-%d", time.Now().UnixNano(), e.posted.Add(1)))
	req.Header.Set("Ce-Source", "e2e-test")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// submit posts task.submitted with the task JSON and checks the answer.
func (e *env) submit(task string, spec map[string]any) {
	e.t.Helper()
	code, body := e.post("task.submitted", map[string]any{"task": task, "namespace": e.ns, "input": spec})
	if code != http.StatusOK {
		e.t.Fatalf("task.submitted: %d %s", code, body)
	}
}

// sweep posts a PingSource event.
func (e *env) sweep() string {
	e.t.Helper()
	code, body := e.post("dev.knative.sources.ping", map[string]any{})
	if code != http.StatusOK {
		e.t.Fatalf("sweep: %d %s", code, body)
	}
	return body
}

// view reads the TES view of a task.
func (e *env) view(task string) (tesv1.Task, int) {
	e.t.Helper()
	resp, err := http.Get(e.url + "/tasks/" + e.ns + "/" + task)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v tesv1.Task
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			e.t.Fatal(err)
		}
	}
	return v, resp.StatusCode
}

// waitState waits until the task's TES state is want, and returns the view.
func (e *env) waitState(task, want string, timeout time.Duration) tesv1.Task {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var last tesv1.Task
	for time.Now().Before(deadline) {
		v, code := e.view(task)
		if code == http.StatusOK {
			last = v
			if v.State == want {
				return v
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("task %s: state %q after %s, want %s; view: %+v; jobs: %s", task, last.State, timeout, want, last, e.describeJobs(task))
	return last
}

// waitFor polls cond until it holds.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

func (e *env) describeJobs(task string) string {
	jobs, err := e.c.Client.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "%s:%s", j.Name, taskmeta.StatusOf(&j))
		for _, c := range j.Status.Conditions {
			fmt.Fprintf(&b, "[%s=%s %s]", c.Type, c.Status, c.Reason)
		}
		b.WriteString(" ")
	}
	cm, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), task, metav1.GetOptions{})
	if err == nil {
		fmt.Fprintf(&b, "anchor: %v %v", cm.Labels, cm.Annotations)
	}
	return b.String()
}

func (e *env) job(name string) (*batchv1.Job, error) {
	return e.c.Client.BatchV1().Jobs(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

func (e *env) jobNames(task string) []string {
	jobs, err := e.c.Client.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	return names
}

// pvcGone reports whether the task's PVC is deleted or being deleted.
func (e *env) pvcGone(task string) bool {
	pvc, err := e.c.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), taskmeta.PVCName(task), metav1.GetOptions{})
	return err != nil || pvc.DeletionTimestamp != nil
}

// setLogs makes the pods of a job return content as their log.
func (e *env) setLogs(job, content string) {
	e.t.Helper()
	stop, err := e.c.SetLogsForSelector(context.Background(), e.ns, batchv1.JobNameLabel+"="+job, content)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(stop)
}

// jobAdds counts the creations of each job of the namespace, from a watch.
type jobAdds struct {
	mu     sync.Mutex
	counts map[string]int
}

func (e *env) watchJobAdds() *jobAdds {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	w, err := e.c.Dynamic.Resource(schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}).Namespace(e.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	a := &jobAdds{counts: map[string]int{}}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != "ADDED" {
				continue
			}
			if o, ok := ev.Object.(metav1.Object); ok {
				a.mu.Lock()
				a.counts[o.GetName()]++
				a.mu.Unlock()
			}
		}
	}()
	return a
}

// snapshot is how many times each Job was created, settle's markers left
// out.
func (a *jobAdds) snapshot() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.counts))
	for k, v := range a.counts {
		if !strings.HasPrefix(k, markerPrefix) {
			out[k] = v
		}
	}
	return out
}

// through waits until the watch has seen the marker Job settle created: it
// has then seen every Job created before it.
func (a *jobAdds) through(e *env, marker string) {
	e.t.Helper()
	e.waitFor("the job watch to see "+marker, 30*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.counts[marker] > 0
	})
}

func readAll(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

// replay is a copy of a request, to deliver it again.
func replay(r *http.Request, hdr http.Header, body []byte) *http.Request {
	c := r.Clone(context.Background())
	c.Header = hdr.Clone()
	c.Body = io.NopCloser(bytes.NewReader(body))
	c.ContentLength = int64(len(body))
	return c
}

// discard is a ResponseWriter that drops the answer.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// e2eLogLevel is the handler's log level in tests: E2E_DEBUG=1 for debug.
func e2eLogLevel() zapcore.Level {
	if os.Getenv("E2E_DEBUG") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}
