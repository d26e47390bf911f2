package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
)

// Options of a chaos run. Zero counts and rates mean none of that fault;
// make chaos runs 200 tasks with 3 kills, 10 % of events dropped, each
// delivered 1 to 3 times within 2 s, and 5 % of the handler's writes
// failed and 2 % done but answered 500.
type Options struct {
	// Root is the repository (config/knative is read from it).
	Root string
	// Handler and TES are the binaries of cmd/handler and cmd/tes.
	Handler, TES string
	// Dir receives each run's logs (handler, TES API, adapter).
	Dir string

	Tasks int
	Seed  uint64
	// Kills is how often the chaos run's handler is SIGKILLed and restarted.
	Kills int
	// DropRate, MaxCopies and MaxDelay shape the chaos run's delivery.
	DropRate  float64
	MaxCopies int
	MaxDelay  time.Duration
	// WriteFaultRate is the share of the handler's writes the API fault
	// proxy answers itself with 429, 500 and 409 in turn.
	WriteFaultRate float64
	// LostAnswerRate is the share of the handler's writes the proxy passes
	// on and then answers 500, as if the answer was lost.
	LostAnswerRate float64
	// ReadDelayRate is the share of the handler's reads (not watches) the
	// proxy holds back, each up to 300 ms.
	ReadDelayRate float64
	// TTL is the handler's TASK_TTL_SECONDS; Sweep how often the sweep is
	// posted to it, as a PingSource would.
	TTL   time.Duration
	Sweep time.Duration
	// Timeout bounds each run: all tasks ended, then nothing left.
	Timeout time.Duration
	// Out receives progress and the report (default: os.Stdout).
	Out io.Writer
}

func (o *Options) defaults() {
	if o.Tasks == 0 {
		o.Tasks = 200
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.MaxCopies == 0 {
		o.MaxCopies = 3
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = 2 * time.Second
	}
	if o.TTL == 0 {
		o.TTL = 30 * time.Second
	}
	if o.Sweep == 0 {
		o.Sweep = 10 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 20 * time.Minute
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
}

// Result is what one run of the task set did.
type Result struct {
	// Name is "clean" or "chaos"; Namespace where its tasks ran.
	Name, Namespace string
	// States maps each task's name to the TES state its anchor ended in,
	// Reasons to the reason recorded with it (system_logs), if any.
	States, Reasons map[string]string
	// Converged is from the first submission to the last task's end;
	// Cleared from then until nothing of the tasks was left.
	Converged, Cleared time.Duration
	// PVCsLeft are the PVCs not deleted when every task had ended,
	// PVCsTerminating those deleted and held by the pods of their ended
	// task (as Kubernetes does until the pods go); Left what was still
	// there two minutes past the TTL.
	PVCsLeft, Left  []string
	PVCsTerminating int
	Delivery        DeliveryCounts
	API             APIFaultCounts
	// Kills is how often the handler was SIGKILLed and restarted.
	Kills int
	// Sweeps posted, and those the handler did not answer 200 (it was down
	// or the step failed).
	Sweeps, SweepsFailed int64
	// Retries of the harness's own TES API calls (submit, cancel).
	Retries int64
	// SweepSteps counts, from the handler's log, what the sweep did for
	// tasks whose events were lost: "Created job", "Task ended", ...
	SweepSteps map[string]int
	// Redone counts the recorded jobs that were never created and were
	// created by a later look at the task.
	Redone int
	Audit  benchkit.AuditCounts
}

// Report compares the clean and the chaos run.
type Report struct {
	Clean, Chaos *Result
	// Faults are the kinds of fault the chaos run was to inject, with how
	// often each fired.
	Faults []Fault
	// Problems are the reasons the run failed, none if it passed.
	Problems []string
}

// Passed says whether every task ended as it must, the same in both runs,
// with no job created twice and nothing left.
func (r *Report) Passed() bool { return len(r.Problems) == 0 }

// Run starts the local cluster with an audit log of the handlers' requests
// and runs the task set twice on it, each in its own namespace with its own
// handler, TES API and adapter: first clean, then under faults. It returns
// the report; an error means the run itself could not be done.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	for _, b := range []string{o.Handler, o.TES} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("binary %s: %w (run `make build`)", b, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	names := []string{"clean", "chaos"}
	var users []string
	for _, n := range names {
		users = append(users, "system:serviceaccount:"+namespace(n)+":"+devstack.HandlerRole)
	}
	policy := filepath.Join(o.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(benchkit.AuditPolicy(users)), 0o600); err != nil {
		return nil, err
	}
	auditLog := filepath.Join(o.Dir, "audit.log")
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{NodeCPU: "100000", NodePods: "100000", APIServerFlags: benchkit.AuditFlags(policy, auditLog)})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Stop() }()
	fmt.Fprintf(o.Out, "local cluster started in %.1fs; %d tasks, seed %d; logs in %s\n", time.Since(begin).Seconds(), o.Tasks, o.Seed, o.Dir)

	tasks := GenerateTasks(o.Seed, o.Tasks)
	rep := &Report{}
	for _, n := range names {
		r := &run{o: o, c: c, name: n, ns: namespace(n), tasks: tasks, chaos: n == "chaos"}
		res, err := r.do(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s run: %w", n, err)
		}
		f, err := os.Open(auditLog)
		if err != nil {
			return nil, err
		}
		res.Audit, err = benchkit.CountAudit(f, "system:serviceaccount:"+r.ns+":"+devstack.HandlerRole, r.ns)
		f.Close()
		if err != nil {
			return nil, err
		}
		if n == "clean" {
			rep.Clean = res
		} else {
			rep.Chaos = res
		}
	}
	rep.Faults = Faults(o, rep.Chaos)
	rep.Problems = append(compare(tasks, rep.Clean, rep.Chaos), faultsMissing(o, rep.Chaos)...)
	return rep, nil
}

func namespace(run string) string { return "chaos-" + run }

// compare lists every way the runs fall short: a task that ended otherwise
// than it must or differently in the two runs, a job created twice, anything
// left behind.
func compare(tasks []Task, runs ...*Result) []string {
	var p []string
	for _, t := range tasks {
		var got []string
		for _, r := range runs {
			got = append(got, r.Name+" "+orNone(r.States[t.Name]))
		}
		for _, r := range runs {
			if r.States[t.Name] != t.Want {
				var why []string
				for _, r := range runs {
					if reason := r.Reasons[t.Name]; reason != "" && r.States[t.Name] != t.Want {
						why = append(why, fmt.Sprintf("%s: %q", r.Name, reason))
					}
				}
				p = append(p, fmt.Sprintf("task %s: want %s, got %s %s", t.Name, t.Want, strings.Join(got, ", "), strings.Join(why, " ")))
				break
			}
		}
	}
	for _, r := range runs {
		if twice := r.Audit.CreatedTwice(); len(twice) > 0 {
			p = append(p, fmt.Sprintf("%s run: %d jobs created more than once: %s", r.Name, len(twice), firstN(twice, 10)))
		}
		if len(r.Audit.JobCreates) == 0 {
			p = append(p, fmt.Sprintf("%s run: the audit log holds no job creation of the handler", r.Name))
		}
		if len(r.PVCsLeft) > 0 {
			p = append(p, fmt.Sprintf("%s run: PVCs of ended tasks not deleted: %s", r.Name, firstN(r.PVCsLeft, 10)))
		}
		if len(r.Left) > 0 {
			p = append(p, fmt.Sprintf("%s run: objects of tasks past their TTL left: %s", r.Name, firstN(r.Left, 10)))
		}
	}
	return p
}

// Fault is one kind of fault of the chaos run: whether the options ask for
// it, and how often it fired.
type Fault struct {
	Kind  string
	Asked bool
	Fired int
}

// Faults lists every kind of fault the chaos run injects, each with whether
// o asks for it and how often it fired in r: events dropped, delivered more
// than once, held back (so that they overtake each other); the handler
// SIGKILLed; its writes answered 429, 500 and 409 by the API fault proxy, or
// done and answered 500 (the answer lost); its reads delayed.
func Faults(o Options, r *Result) []Fault {
	return []Fault{
		{"event dropped", o.DropRate > 0, int(r.Delivery.Dropped)},
		{"event delivered more than once", o.MaxCopies > 1, int(r.Delivery.Duplicated)},
		{"event copy delayed (reordered)", o.MaxDelay > 0, int(r.Delivery.Delayed)},
		{"handler SIGKILLed and restarted", o.Kills > 0, r.Kills},
		{"write answered 429 by the proxy", o.WriteFaultRate > 0, r.API.ByCode(429)},
		{"write answered 500 by the proxy", o.WriteFaultRate > 0, r.API.ByCode(500)},
		{"write answered 409 by the proxy", o.WriteFaultRate > 0, r.API.ByCode(409)},
		{"write done, then answered 500 (answer lost)", o.LostAnswerRate > 0, r.API.Lost()},
		{"read delayed", o.ReadDelayRate > 0, r.API.ReadsDelay},
	}
}

// faultsMissing lists the kinds of fault the chaos run was to inject and
// that never fired (without them it proves nothing), and a kill count other
// than asked for.
func faultsMissing(o Options, r *Result) []string {
	var p []string
	for _, f := range Faults(o, r) {
		if f.Asked && f.Fired == 0 {
			p = append(p, "chaos run: no fault of the kind \""+f.Kind+"\" fired")
		}
	}
	if r.Kills != o.Kills && r.Kills != 0 {
		p = append(p, fmt.Sprintf("chaos run: the handler was killed %d times, not %d", r.Kills, o.Kills))
	}
	return p
}

func orNone(s string) string {
	if s == "" {
		return "no end"
	}
	return s
}

func firstN(s []string, n int) string {
	if len(s) > n {
		return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
	}
	return strings.Join(s, ", ")
}

// run is one run of the task set in its namespace.
type run struct {
	o     Options
	c     *cluster.Cluster
	name  string
	ns    string
	tasks []Task
	chaos bool

	handler *service
	retries atomic.Int64
	closers []func()
}

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.o.Out, "  [%s] %s\n", r.name, fmt.Sprintf(format, a...))
}

func (r *run) do(ctx context.Context) (*Result, error) {
	res := &Result{Name: r.name, Namespace: r.ns, States: map[string]string{}, Reasons: map[string]string{}}
	c := r.c
	defer func() {
		for _, f := range r.closers {
			f()
		}
	}()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := devstack.ApplyRBAC(ctx, c, filepath.Join(r.o.Root, "config", "knative", "rbac.yaml"), r.ns, nil); err != nil {
		return nil, err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, r.ns, devstack.HandlerRole)
	if err != nil {
		return nil, err
	}
	var faults *APIFaultProxy
	if r.chaos {
		faults, kubeconfig, err = r.faultProxy(kubeconfig)
		if err != nil {
			return nil, err
		}
	}
	logs, err := os.Create(filepath.Join(r.o.Dir, r.name+"-handler.log"))
	if err != nil {
		return nil, err
	}
	defer logs.Close()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r.handler = &service{
		bin:  r.o.Handler,
		args: []string{"--kubeconfig", kubeconfig, "--namespace", r.ns, "--port", fmt.Sprint(port)},
		env: []string{"FILER_NAME=" + devstack.FilerName, "FILER_VERSION=" + devstack.FilerVersion,
			fmt.Sprintf("TASK_TTL_SECONDS=%d", int(r.o.TTL.Seconds()))},
		url: fmt.Sprintf("http://127.0.0.1:%d", port),
		log: logs,
	}
	if err := r.handler.start(ctx); err != nil {
		return nil, err
	}
	defer r.handler.stop()

	// Every event, from the adapter and from the TES API, goes through the
	// delivery proxy; the clean run's only passes them on.
	var delivery *DeliveryProxy
	if r.chaos {
		delivery = NewDeliveryProxy(r.handler.url, r.o.Seed, r.o.DropRate, r.o.MaxCopies, r.o.MaxDelay)
	} else {
		delivery = NewDeliveryProxy(r.handler.url, r.o.Seed, 0, 1, 0)
	}
	front := httptest.NewServer(delivery)
	defer front.Close()

	tesURL, stopTES, err := r.startTES(ctx, front.URL)
	if err != nil {
		return nil, err
	}
	defer stopTES()

	a, err := c.StartAdapter(ctx, cluster.AdapterOptions{
		Name: "tesk-events", Namespace: r.ns, Sink: front.URL,
		Resources: devstack.AdapterResources(),
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = a.Stop() }()

	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	ended := make(chan benchkit.TaskEnd, len(r.tasks))
	if err := benchkit.WatchAnchors(wctx, c.Client, r.ns, ended); err != nil {
		return nil, err
	}

	// The sweep, as a PingSource sends it, straight to the handler.
	var sweeps, sweepsFailed atomic.Int64
	go func() {
		t := time.NewTicker(r.o.Sweep)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				sweeps.Add(1)
				if _, err := devstack.Post(r.handler.url, events.TypePing, []byte(`{}`)); err != nil {
					sweepsFailed.Add(1)
				}
			}
		}
	}()

	deadline := time.Now().Add(r.o.Timeout)
	start := time.Now()
	r.logf("submitting %d tasks through the TES API (events through the delivery proxy%s)", len(r.tasks), map[bool]string{true: ", with faults", false: ""}[r.chaos])
	ids := map[string]string{} // TES id -> task name
	var idsMu sync.Mutex
	var wg sync.WaitGroup
	var submitErr firstError
	jobs := make(chan Task)
	for range 8 {
		wg.Go(func() {
			for t := range jobs {
				id, err := r.submit(wctx, tesURL, t)
				if err != nil {
					submitErr.set(err)
					continue
				}
				idsMu.Lock()
				ids[id] = t.Name
				idsMu.Unlock()
				if t.Cancel {
					wg.Go(func() {
						if err := r.cancelWhenRunning(wctx, tesURL, id, deadline); err != nil {
							submitErr.set(err)
						}
					})
				}
			}
		})
	}
	for _, t := range r.tasks {
		jobs <- t
	}
	close(jobs)

	// Kill points: the handler is SIGKILLed when these many tasks have
	// ended, spread over the run.
	var killAt []int
	if r.chaos {
		for k := 1; k <= r.o.Kills; k++ {
			killAt = append(killAt, k*len(r.tasks)/(r.o.Kills+1))
		}
	}
	pending := map[string]benchkit.TaskEnd{} // ends seen before their id was known
	byID := func(id string) (string, bool) {
		idsMu.Lock()
		defer idsMu.Unlock()
		n, ok := ids[id]
		return n, ok
	}
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	var last time.Time
wait:
	for len(res.States) < len(r.tasks) {
		if err := submitErr.get(); err != nil {
			return nil, err
		}
		for id, e := range pending {
			if n, ok := byID(id); ok {
				res.States[n], res.Reasons[n] = e.State, e.Reason
				delete(pending, id)
			}
		}
		if len(res.States) == len(r.tasks) {
			break
		}
		for len(killAt) > 0 && len(res.States) >= killAt[0] {
			killAt = killAt[1:]
			r.logf("SIGKILL the handler with %d of %d tasks ended; restarting it", len(res.States), len(r.tasks))
			if err := r.handler.kill(ctx); err != nil {
				return nil, err
			}
			res.Kills++
		}
		select {
		case e := <-ended:
			last = time.Now()
			if n, ok := byID(e.Task); ok {
				res.States[n], res.Reasons[n] = e.State, e.Reason
			} else {
				pending[e.Task] = e
			}
		case <-progress.C:
			r.logf("%d of %d tasks ended after %.0fs", len(res.States), len(r.tasks), time.Since(start).Seconds())
		case <-time.After(time.Until(deadline)):
			r.logf("stopped at the timeout: %d of %d tasks ended", len(res.States), len(r.tasks))
			break wait
		}
	}
	wg.Wait()
	if !last.IsZero() {
		res.Converged = last.Sub(start)
	}
	r.logf("%d of %d tasks ended in %.1fs", len(res.States), len(r.tasks), res.Converged.Seconds())

	// Every ended task's PVC is deleted with its end. Kubernetes keeps it
	// Terminating while the task's (ended) pods use it: until the TTL.
	res.PVCsLeft, res.PVCsTerminating = r.pvcsNotDeleted(ctx, time.Now().Add(30*time.Second))
	// Past the TTL the sweep deletes each task with all it owns.
	res.Left = r.waitGone(ctx, time.Now().Add(r.o.TTL+2*time.Minute), "configmaps", "jobs", "pods", "persistentvolumeclaims")
	if len(res.Left) == 0 && !last.IsZero() {
		res.Cleared = time.Since(last)
		r.logf("nothing of the tasks left %.1fs after the last end (TTL %s)", res.Cleared.Seconds(), r.o.TTL)
	} else {
		r.logf("%d objects of the tasks left past the TTL (%s)", len(res.Left), r.o.TTL)
	}

	// Stop the sources first, then the handler, so that every request is
	// in the audit log.
	stopWatch()
	_ = a.Stop()
	stopTES()
	waitFor(delivery.Wait, 10*time.Second)
	r.handler.stop()
	res.Delivery = delivery.Counts()
	if faults != nil {
		res.API = faults.Counts()
	}
	res.Sweeps, res.SweepsFailed = sweeps.Load(), sweepsFailed.Load()
	res.Retries = r.retries.Load()
	res.SweepSteps, res.Redone, err = handlerLogCounts(logs.Name())
	if err != nil {
		return nil, err
	}
	return res, nil
}

// faultProxy serves an APIFaultProxy in front of the API server and returns
// it with a copy of kubeconfig that points to it.
func (r *run) faultProxy(kubeconfig string) (*APIFaultProxy, string, error) {
	target, err := url.Parse(r.c.Server)
	if err != nil {
		return nil, "", err
	}
	// Only the API server's CA: the requests carry their own credentials.
	tr, err := rest.TransportFor(&rest.Config{Host: r.c.Server, TLSClientConfig: rest.TLSClientConfig{
		CAFile: r.c.Config.CAFile, CAData: r.c.Config.CAData,
	}})
	if err != nil {
		return nil, "", err
	}
	p := NewAPIFaultProxy(target, tr, r.o.Seed)
	p.WriteFaultRate, p.LostAnswerRate, p.ReadDelayRate = r.o.WriteFaultRate, r.o.LostAnswerRate, r.o.ReadDelayRate
	srv, ca := ServeTLS(p)
	r.closers = append(r.closers, srv.Close)
	out := filepath.Join(r.o.Dir, r.name+"-handler.kubeconfig")
	if err := RedirectKubeconfig(kubeconfig, out, srv.URL, ca); err != nil {
		srv.Close()
		return nil, "", err
	}
	return p, out, nil
}

// startTES starts the TES API posting its events to sink.
func (r *run) startTES(ctx context.Context, sink string) (string, func(), error) {
	if err := devstack.ApplyTESRBAC(ctx, r.c, filepath.Join(r.o.Root, "config", "knative", "tes-rbac.yaml"), r.ns); err != nil {
		return "", nil, err
	}
	kubeconfig, err := r.c.ServiceAccountKubeconfig(ctx, r.ns, devstack.TESRole)
	if err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	logs, err := os.Create(filepath.Join(r.o.Dir, r.name+"-tes.log"))
	if err != nil {
		return "", nil, err
	}
	p := &service{
		bin:   r.o.TES,
		args:  []string{"--kubeconfig", kubeconfig, "--namespace", r.ns, "--port", fmt.Sprint(port), "--no-auth", "--sink", sink},
		env:   tesEnv(len(r.tasks)),
		url:   fmt.Sprintf("http://127.0.0.1:%d", port),
		ready: "/healthz",
		log:   logs,
	}
	if err := p.start(ctx); err != nil {
		logs.Close()
		return "", nil, err
	}
	var once sync.Once
	return p.url, func() { once.Do(func() { p.stop(); logs.Close() }) }, nil
}

// tesEnv is the TES API's environment for a run of n tasks, submitted at
// once by one user (there is no access control): its bounds of a user's
// unfinished tasks admit all of them (TES_MAX_UNFINISHED_TASKS_PER_USER
// n, the bytes not bounded), where the defaults, 200 tasks and 8 MiB of
// estimates, would refuse part of make chaos's 200 (about 55 KB each) and
// the refused creates would count as the harness's retries.
func tesEnv(n int) []string {
	return []string{fmt.Sprintf("TES_MAX_UNFINISHED_TASKS_PER_USER=%d", n), "TES_MAX_UNFINISHED_BYTES_PER_USER=0"}
}

// waitGone waits until no object of the given resources carries the task
// label in the run's namespace, and returns what is still there at the
// deadline ("pods/name").
func (r *run) waitGone(ctx context.Context, deadline time.Time, resources ...string) []string {
	for {
		left := r.left(ctx, resources...)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(time.Second)
	}
}

// taskResources are where a task's objects live.
var taskResources = map[string]schema.GroupVersionResource{
	"configmaps":             {Version: "v1", Resource: "configmaps"},
	"jobs":                   {Group: "batch", Version: "v1", Resource: "jobs"},
	"pods":                   {Version: "v1", Resource: "pods"},
	"persistentvolumeclaims": {Version: "v1", Resource: "persistentvolumeclaims"},
}

// pvcsNotDeleted waits until every PVC of the run's tasks is deleted (it may
// stay Terminating) and returns those not deleted at the deadline, and how
// many are Terminating.
func (r *run) pvcsNotDeleted(ctx context.Context, deadline time.Time) ([]string, int) {
	for {
		l, err := r.c.Client.CoreV1().PersistentVolumeClaims(r.ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
		var left []string
		terminating := 0
		if err != nil {
			left = append(left, "persistentvolumeclaims: "+err.Error())
		} else {
			for _, p := range l.Items {
				if p.DeletionTimestamp == nil {
					left = append(left, "persistentvolumeclaims/"+p.Name)
				} else {
					terminating++
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left, terminating
		}
		time.Sleep(time.Second)
	}
}

func (r *run) left(ctx context.Context, resources ...string) []string {
	var left []string
	for _, res := range resources {
		l, err := r.c.Dynamic.Resource(taskResources[res]).Namespace(r.ns).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
		if err != nil {
			left = append(left, res+": "+err.Error())
			continue
		}
		for _, o := range l.Items {
			left = append(left, res+"/"+o.GetName())
		}
	}
	sort.Strings(left)
	return left
}

// firstError keeps the first error set.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// handlerLogCounts reads the handler's JSON log: what the sweep's steps did
// (by message), and how many steps created a recorded job that was never
// created.
func handlerLogCounts(path string) (map[string]int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	sweep, redone := map[string]int{}, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct{ Msg, Type string }
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // client-go's own lines
		}
		if l.Type == events.TypePing {
			switch l.Msg {
			case "Created job", "Task ended", "Deleted job":
				sweep[l.Msg]++
			}
		}
		if strings.Contains(l.Msg, "was never created") {
			redone++
		}
	}
	return sweep, redone, sc.Err()
}

func waitFor(f func(), d time.Duration) {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
