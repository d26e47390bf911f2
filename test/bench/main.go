// Command bench measures the service on the local cluster and prints
// figures: step latency (a job's terminal condition to the next job's
// creation, as seen by a watch), handler time, API requests per step and for
// a waiting task, the cost of a sweep over 1,000 and 10,000 tasks, events per
// second of one handler, the TES API's create, get and list latency and the
// cost of a page in a namespace of 10,000 tasks, and cold start to ready.
// A polling baseline (baseline.go) runs the same tasks with a poller per
// task, as TESK's taskmaster does, and the ratios are printed. Medians and percentiles are
// of one run; the machine is shared, so compare figures of the same run.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

var (
	flagTasks      = flag.Int("tasks", 40, "tasks for the step latency")
	flagExecutors  = flag.Int("executors", 4, "executors per task")
	flagParallel   = flag.Int("parallel", 4, "tasks running at once")
	flagSweep      = flag.String("sweep", "1000,10000", "task counts of the sweep benchmark")
	flagDuration   = flag.Duration("load", 10*time.Second, "duration of each events-per-second run")
	flagStarts     = flag.Int("starts", 7, "cold starts to time")
	flagHandlerEnv = flag.String("handler-env", "", "space-separated NAME=value pairs added to the environment of bin/handler run as a process (e.g. GOMEMLIMIT=40MiB GODEBUG=gctrace=1)")
	flagSkipSteps  = flag.Bool("skip-steps", false, "skip the step benchmark")
	flagOnly       = flag.String("only", "", "run one part only: tes, steps, shares, or etcd (what one task keeps in etcd, by kind of object; it prints its own section of BENCHMARKS.md)")
	flagSummary    = flag.String("summary", "", "also write the run's summary, as BENCHMARKS.md shows it, into this file: its block between the summary's markers (BENCHMARKS.md), or the block alone if the file does not exist")
	flagReadme     = flag.String("readme", "", "also write the figures README.md quotes from the run into this file's block between the headline's markers (README.md)")
)

// sum collects the run's figures for its summary.
var sum Summary

// etcdMeasured is what -only etcd measured.
var etcdMeasured *etcdRun

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if err := checkOnly(*flagOnly, *flagSummary != "" || *flagReadme != ""); err != nil {
		return err
	}
	fmt.Printf("machine: %d cores, %s\n", runtime.NumCPU(), runtime.Version())
	begin := time.Now()
	sum = Summary{Start: begin, Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Command: commandLine(), Commit: checkoutCommit()}
	stopLoad, err := sampleLoad(&sum, 10*time.Second)
	if err != nil {
		return err
	}
	if err := benchAll(ctx); err != nil {
		return err
	}
	stopLoad()
	sum.End = time.Now()
	if etcdMeasured != nil {
		fmt.Printf("\n== What one task keeps in etcd, as BENCHMARKS.md records it\n\n%s", etcdMarkdown(sum.runLine(), etcdMeasured))
		return nil
	}
	fmt.Printf("== Summary, as BENCHMARKS.md shows it\n\n%s", sum.Markdown())
	for _, w := range []struct {
		path  string
		block Block
		text  string
	}{{*flagSummary, SummaryBlock, sum.Markdown()}, {*flagReadme, HeadlineBlock, sum.Headline()}} {
		if w.path == "" {
			continue
		}
		if err := w.block.Write(w.path, w.text); err != nil {
			return err
		}
		fmt.Printf("\nwritten into %s\n", w.path)
	}
	return nil
}

// checkOnly checks -only: a part of the benchmark, and not etcd where the
// run is to write make bench's summary (-summary, -readme).
func checkOnly(only string, writesSummary bool) error {
	switch only {
	case "", "tes", "steps", "shares":
	case "etcd":
		if writesSummary {
			return fmt.Errorf("-only etcd prints its own section of BENCHMARKS.md; -summary and -readme write make bench's, which it does not measure")
		}
	default:
		return fmt.Errorf("-only %q: not a part; the parts are tes, steps, shares and etcd", only)
	}
	return nil
}

// commandLine is how the run was started, as the summary names it.
func commandLine() string {
	var args []string
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "summary" && f.Name != "readme" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	if len(args) == 0 && os.Getenv("MAKELEVEL") != "" {
		return "`make bench`"
	}
	if len(args) == 1 && args[0] == "-only=etcd" && os.Getenv("MAKELEVEL") != "" {
		return "`make bench-etcd`"
	}
	return "`" + strings.Join(append([]string{"go run ./test/bench"}, args...), " ") + "`"
}

// checkoutCommit is the commit the benchmark runs, "-dirty" if the
// checkout has changes not committed; "" outside a git checkout.
func checkoutCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		commit += "-dirty"
	}
	return commit
}

// sampleLoad records the 1-minute load average now and every interval
// into s's extremes, until the returned function is called.
func sampleLoad(s *Summary, interval time.Duration) (func(), error) {
	var mu sync.Mutex
	record := func() error {
		l, err := loadAverage()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if s.LoadMax == 0 && s.LoadMin == 0 {
			s.LoadMin, s.LoadMax = l, l
		}
		s.LoadMin, s.LoadMax = min(s.LoadMin, l), max(s.LoadMax, l)
		return nil
	}
	if err := record(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = record()
			}
		}
	}()
	return func() { close(done); <-stopped; _ = record() }, nil
}

func benchAll(ctx context.Context) error {
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{NodeCPU: "100000", NodePods: "100000"})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	fmt.Printf("local cluster started in %.1fs\n\n", time.Since(begin).Seconds())
	if *flagOnly == "tes" {
		return benchTES(ctx, c)
	}
	if *flagOnly == "shares" {
		return benchShares(ctx, c)
	}
	if *flagOnly == "etcd" {
		etcdMeasured, err = benchEtcd(ctx, c)
		return err
	}

	if !*flagSkipSteps {
		// As deployed: events are hints, the task written on the cluster
		// first (as the TES API writes it); then, for the ratio, events
		// taken at their word (TRUST_EVENTS, local use).
		if err := benchSteps(ctx, c, false); err != nil {
			return err
		}
		if err := benchSteps(ctx, c, true); err != nil {
			return err
		}
	}
	if *flagOnly == "steps" {
		return nil
	}
	if !*flagSkipSteps && *flagBaseline {
		if err := benchPollingSteps(ctx, c); err != nil {
			return err
		}
	}
	waiting, err := benchSweepAndLoad(ctx, c)
	if err != nil {
		return err
	}
	if *flagBaseline {
		if err := benchPollingWaiting(ctx, c, waiting); err != nil {
			return err
		}
	}
	if err := benchShares(ctx, c); err != nil {
		return err
	}
	if err := benchTES(ctx, c); err != nil {
		return err
	}
	return benchColdStart(ctx, c)
}

// instrumented is a handler whose API requests are counted per event.
type instrumented struct {
	srv      *eventserver.Server
	echo     *echo.Echo
	mu       sync.Mutex
	byKind   map[string][]sample
	requests atomic.Int64
}

type sample struct {
	dur      time.Duration
	requests int64
}

type counterKey struct{}

type countingTransport struct {
	next  http.RoundTripper
	total *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.total.Add(1)
	if n, ok := r.Context().Value(counterKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return t.next.RoundTrip(r)
}

func newInstrumented(ctx context.Context, c *cluster.Cluster, ns string, cfg steps.Config) (*instrumented, error) {
	if err := setupNamespace(ctx, c, ns); err != nil {
		return nil, err
	}
	rc, err := serviceAccountConfig(ctx, c, ns, devstack.HandlerRole)
	if err != nil {
		return nil, err
	}
	in := &instrumented{byKind: map[string][]sample{}}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, total: &in.requests} })
	cfg.Namespace = ns
	cfg.ExecutorPodAnnotations = []string{cluster.FateAnnotationPrefix}
	srv, err := eventserver.New(rc, cfg, zap.NewNop().Sugar())
	if err != nil {
		return nil, err
	}
	in.srv = srv
	in.echo = srv.Echo()
	return in, nil
}

// serviceAccountConfig is a client configuration of a ServiceAccount of
// ns, with room for the benchmarks' bursts of requests.
func serviceAccountConfig(ctx context.Context, c *cluster.Cluster, ns, sa string) (*rest.Config, error) {
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, sa)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 500, 1000
	return rc, nil
}

// ServeHTTP times each event and counts its API requests, by what it did.
func (in *instrumented) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := new(atomic.Int64)
	r = r.WithContext(context.WithValue(r.Context(), counterKey{}, n))
	rec := httptest.NewRecorder()
	start := time.Now()
	in.echo.ServeHTTP(rec, r)
	d := time.Since(start)
	if r.Method == http.MethodPost { // not the bench's own reads of the TES view
		kind := classify(r.Header.Get("Ce-Type"), rec.Body.Bytes())
		in.mu.Lock()
		in.byKind[kind] = append(in.byKind[kind], sample{dur: d, requests: n.Load()})
		in.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// The kinds of event the summary gives the handler's time of.
const (
	kindIgnored    = "ignored (job running, pod starting)"
	kindSubmit     = "task.submitted (PVC-less: first executor)"
	kindCreateNext = "step: next job created"
)

// classify names what an event did: ignored, a step that created a job, a
// step that only looked, ...
func classify(typ string, body []byte) string {
	var res struct {
		Ignored string `json:"ignored"`
		Actions []struct {
			Kind string `json:"kind"`
		} `json:"actions"`
	}
	_ = json.Unmarshal(body, &res)
	switch {
	case res.Ignored != "":
		return kindIgnored
	case typ == events.TypeTaskSubmitted:
		return kindSubmit
	case typ == events.TypePing:
		return "sweep"
	}
	for _, a := range res.Actions {
		if a.Kind == string(steps.CreateJob) {
			return kindCreateNext
		}
	}
	if len(res.Actions) > 0 {
		return "step: task ended"
	}
	return "step: nothing due (" + strings.TrimPrefix(typ, "dev.knative.apiserver.") + ")"
}

func setupNamespace(ctx context.Context, c *cluster.Cluster, ns string) error {
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return devstack.ApplyRBAC(ctx, c, filepath.Join("config", "knative", "rbac.yaml"), ns, nil)
}

func executorJob(task string, i int) batchv1.Job {
	var j batchv1.Job
	j.Name = fmt.Sprintf("%s-ex-%02d", task, i)
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "ubuntu:24.04", Command: []string{"true"}}}
	return j
}

// benchSteps runs tasks end to end through the adapter and measures each
// step.
func benchSteps(ctx context.Context, c *cluster.Cluster, trust bool) error {
	ns, mode := "bench-steps", "events as hints (as deployed), the task written first"
	if trust {
		ns, mode = "bench-steps-trusted", "events taken at their word (TRUST_EVENTS), the task JSON in task.submitted"
	}
	cfg := steps.DefaultConfig()
	cfg.TrustEvents = trust
	in, err := newInstrumented(ctx, c, ns, cfg)
	if err != nil {
		return err
	}
	hs := httptest.NewServer(in)
	defer hs.Close()
	a, err := c.StartAdapter(ctx, cluster.AdapterOptions{
		Namespace: ns, Sink: hs.URL,
		Resources: devstack.AdapterResources(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop() }()

	// Watch the jobs: when each got a terminal condition, when each was added.
	times, stopWatch, err := watchJobs(ctx, c, ns)
	if err != nil {
		return err
	}
	defer stopWatch()

	tasks := make(chan int)
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for p := 0; p < *flagParallel; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range tasks {
				if err := runTask(ctx, c, hs.URL, ns, fmt.Sprintf("bench-%04d", i), trust); err != nil {
					fmt.Fprintln(os.Stderr, "bench:", err)
					failed.Add(1)
				}
			}
		}()
	}
	for i := 0; i < *flagTasks; i++ {
		tasks <- i
	}
	close(tasks)
	wg.Wait()
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		return fmt.Errorf("%d tasks did not complete", failed.Load())
	}

	lat := times.gaps(*flagTasks, *flagExecutors, func(i int) string { return fmt.Sprintf("bench-%04d", i) })
	stepSum := &StepsSummary{Tasks: *flagTasks, Executors: *flagExecutors, Parallel: *flagParallel, Gap: pcts(lat)}
	if !trust {
		// The summary's figures are the deployed mode's.
		figures.stepGaps = lat
		sum.Steps = stepSum
	}

	fmt.Printf("== Steps, %s: %d tasks of %d executors (no PVC), %d at once, fed by the ApiServerSource adapter; %.1fs\n",
		mode, *flagTasks, *flagExecutors, *flagParallel, elapsed.Seconds())
	fmt.Printf("step latency (job's terminal condition seen -> next job added, both by one watch), %d steps:\n  %s\n", len(lat), pct(lat))
	in.mu.Lock()
	kinds := make([]string, 0, len(in.byKind))
	for k := range in.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Printf("handler time and API requests per event:\n")
	for _, k := range kinds {
		ss := in.byKind[k]
		var ds []time.Duration
		var reqs []int64
		for _, s := range ss {
			ds = append(ds, s.dur)
			reqs = append(reqs, s.requests)
		}
		fmt.Printf("  %-42s n=%-5d time %s  requests %s\n", k, len(ss), pct(ds), ipct(reqs))
		f := figureOf(ds)
		f.Requests = medianInt(reqs)
		switch k {
		case kindCreateNext:
			stepSum.CreateNext = f
		case kindIgnored:
			stepSum.Ignored = f
		case kindSubmit:
			stepSum.Submit = f
		}
	}
	in.mu.Unlock()
	fmt.Println()
	return nil
}

// runTask submits a task and waits for it to complete: the task JSON in
// the event (trust), or its anchor written first and an event that names
// it, as the TES API submits.
func runTask(ctx context.Context, c *cluster.Cluster, url, ns, task string, trust bool) error {
	spec := taskspec.Task{}
	for i := 0; i < *flagExecutors; i++ {
		spec.Executors = append(spec.Executors, executorJob(task, i))
	}
	raw, _ := json.Marshal(spec)
	data, _ := json.Marshal(map[string]any{"task": task, "input": json.RawMessage(raw)})
	if !trust {
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, taskmeta.NewAnchor(ns, task, taskspec.Gzip(raw), taskmeta.AnchorInfo{}), metav1.CreateOptions{}); err != nil {
			return err
		}
		data, _ = json.Marshal(map[string]any{"task": task})
	}
	if _, err := postEvent(url, events.TypeTaskSubmitted, data); err != nil {
		return err
	}
	// The final state, as the handler records it on the anchor (the
	// deployed handler serves no view of a task).
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, task, metav1.GetOptions{})
		if err == nil {
			switch st := cm.Annotations[taskmeta.AnnotationState]; st {
			case tesv1.StateComplete:
				return nil
			case "":
			default:
				return fmt.Errorf("task %s ended %s", task, st)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("task %s did not complete in 2 minutes", task)
}

var eventSeq atomic.Int64

func postEvent(url, typ string, data []byte) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(data))
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", fmt.Sprintf("bench-%d", eventSeq.Add(1)))
	req.Header.Set("Ce-Source", "bench")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: %s", typ, resp.Status)
	}
	return resp.StatusCode, nil
}

// benchSweepAndLoad creates many waiting tasks (an anchor and a suspended
// executor job each, as a task whose executor runs), then times sweeps over
// them and the events one handler takes per second.
func benchSweepAndLoad(ctx context.Context, c *cluster.Cluster) (int, error) {
	ns := "bench-sweep"
	cfg := steps.DefaultConfig()
	cfg.TrustEvents = true // as the figures recorded before: the load's job events are taken at their word
	in, err := newInstrumented(ctx, c, ns, cfg)
	if err != nil {
		return 0, err
	}
	counts := []int{}
	for _, s := range strings.Split(*flagSweep, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err == nil && n > 0 {
			counts = append(counts, n)
		}
	}
	have := 0
	fmt.Printf("== Sweep: waiting tasks (anchor + one running executor job each), sweeps of the namespace\n")
	for _, n := range counts {
		begin := time.Now()
		if err := createWaitingTasks(ctx, c, ns, have, n); err != nil {
			return 0, err
		}
		fmt.Printf("  created %d tasks in %.1fs\n", n-have, time.Since(begin).Seconds())
		have = n
		var ds []time.Duration
		var reqs []int64
		var lists []int64
		var heap []int64
		for i := 0; i < 5; i++ {
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			counter := new(atomic.Int64)
			listCtx := context.WithValue(ctx, counterKey{}, counter)
			start := time.Now()
			res, err := in.srv.Runner.Sweep(listCtx, ns, fmt.Sprintf("bench-sweep-%d", i), in.srv.Metadata)
			if err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(start))
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			reqs = append(reqs, counter.Load())
			lists = append(lists, int64(len(res.Stepped)))
			heap = append(heap, int64(after.TotalAlloc-before.TotalAlloc)>>20)
			if res.Tasks != n || res.Active != n {
				return 0, fmt.Errorf("sweep saw %d tasks (%d active), want %d", res.Tasks, res.Active, n)
			}
		}
		if figures.sweepRequests == nil {
			figures.sweepRequests = map[int]int64{}
		}
		figures.sweepRequests[n] = medianInt(reqs)
		sum.Sweeps = append(sum.Sweeps, SweepSummary{Tasks: n, InProcess: figureOf(ds), Requests: medianInt(reqs)})
		fmt.Printf("  %6d tasks: sweep %s  API requests %s  tasks stepped %s  allocated MiB %s\n", n, pct(ds), ipct(reqs), ipct(lists), ipct(heap))
		if err := sweepHandlerProcess(c, ns, n); err != nil {
			return 0, err
		}
	}

	// Events per second against one handler: steps that read the task and
	// find nothing due (job.finished of a running job), and ApiServerSource
	// updates of running jobs (ignored without a request).
	hs := httptest.NewServer(in)
	defer hs.Close()
	fmt.Printf("\n== Load: one handler, %s per run, 64 concurrent senders over loopback\n", *flagDuration)
	before := in.requests.Load()
	n, errs := load(hs.URL, events.TypeJobFinished, func(i int) []byte {
		task := fmt.Sprintf("wait-%05d", i%have)
		return []byte(fmt.Sprintf(`{"task":%q,"job":"%s-ex-00"}`, task, task))
	})
	ls := &LoadSummary{Senders: 64, NothingDue: float64(n) / flagDuration.Seconds(), NothingDueReqs: round2(float64(in.requests.Load()-before) / float64(max(n, 1)))}
	fmt.Printf("  job.finished, nothing due (GET anchor + GET job): %.0f events/s, %.2f API requests per event, %d errors\n",
		ls.NothingDue, ls.NothingDueReqs, errs)
	running, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "wait-00000-ex-00", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	running.APIVersion, running.Kind = "batch/v1", "Job"
	obj, _ := json.Marshal(running)
	before = in.requests.Load()
	n, errs = load(hs.URL, events.TypeResourceUpdate, func(int) []byte { return obj })
	ls.Ignored, ls.IgnoredReqs = float64(n)/flagDuration.Seconds(), round2(float64(in.requests.Load()-before)/float64(max(n, 1)))
	sum.Load = ls
	fmt.Printf("  ApiServerSource update of a running job (ignored):   %.0f events/s, %.2f API requests per event, %d errors\n\n",
		ls.Ignored, ls.IgnoredReqs, errs)
	return have, nil
}

// load posts events of one type from 64 senders for -duration and returns
// how many were answered 200 (what events/s counts) and how many were not.
func load(url, typ string, data func(i int) []byte) (int, int) {
	var n, errs atomic.Int64
	var seq atomic.Int64
	deadline := time.Now().Add(*flagDuration)
	var wg sync.WaitGroup
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := int(seq.Add(1))
				req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(data(i)))
				req.Header.Set("Ce-Specversion", "1.0")
				req.Header.Set("Ce-Id", fmt.Sprintf("load-%d", i))
				req.Header.Set("Ce-Source", "bench")
				req.Header.Set("Ce-Subject", "/apis/batch/v1/namespaces/x/jobs/y")
				req.Header.Set("Ce-Type", typ)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusOK {
					errs.Add(1)
				} else {
					n.Add(1)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	return int(n.Load()), int(errs.Load())
}

// createWaitingTasks creates tasks from..to-1: an anchor whose progress says
// ex-00 started, and ex-00 as a suspended job (it runs, and has no pods).
func createWaitingTasks(ctx context.Context, c *cluster.Cluster, ns string, from, to int) error {
	spec, _ := json.Marshal(taskspec.Task{Executors: []batchv1.Job{executorJob("x", 0)}})
	gz := taskspec.Gzip(spec)
	return inParallel(from, to, func(i int) error {
		task := fmt.Sprintf("wait-%05d", i)
		prog := taskmeta.Progress{Parts: []string{"ex-00"}, Started: []string{"ex-00"}}
		cm, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: task, Labels: map[string]string{taskmeta.LabelTask: task},
				Annotations: map[string]string{taskmeta.AnnotationProgress: prog.String()}},
			BinaryData: map[string][]byte{taskspec.ConfigMapKey: gz},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		job := jobspec.ExecutorJob(taskmeta.Anchor{Name: task, Namespace: ns, UID: cm.UID},
			&taskspec.Task{Executors: []batchv1.Job{executorJob(task, 0)}}, 0, jobspec.DefaultConfig())
		yes := true
		job.Spec.Suspend = &yes
		_, err = c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
}

// inParallel runs fn for from..to-1, 32 at a time, and returns the first
// error.
func inParallel(from, to int, fn func(i int) error) error {
	idx := make(chan int)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Go(func() {
			for i := range idx {
				if err := fn(i); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < to; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// benchColdStart times the handler binary from exec to a ready /readyz.
func benchColdStart(ctx context.Context, c *cluster.Cluster) error {
	bin := filepath.Join("bin", "handler")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s: run `make build` first", bin)
	}
	var ds []time.Duration
	for i := 0; i < *flagStarts; i++ {
		port := 18080 + i
		cmd := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "--namespace", "bench-steps", "--port", fmt.Sprint(port))
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return err
		}
		ready := false
		for time.Since(start) < 10*time.Second {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready = true
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
		d := time.Since(start)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !ready {
			return fmt.Errorf("the handler was not ready within 10 s")
		}
		ds = append(ds, d)
	}
	p := pcts(ds)
	sum.Cold = &ColdStartSummary{Starts: len(ds), P50: p.P50, P90: p.P90, Min: p.Min, Max: p.Max}
	fmt.Printf("== Cold start: exec of bin/handler to /readyz answering 200, %d starts\n  %s\n", len(ds), pct(ds))
	return nil
}

// sweepHandlerProcess runs bin/handler as its own process and has it sweep
// the namespace (a PingSource event) 5 times: the sweep's time as the
// handler answers it, and the process's peak RSS (VmHWM), which includes its
// start.
func sweepHandlerProcess(c *cluster.Cluster, ns string, n int) error {
	bin := filepath.Join("bin", "handler")
	port := 18180
	cmd := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--port", fmt.Sprint(port))
	cmd.Env = append(append(os.Environ(), "TRUST_EVENTS=true", "EXECUTOR_POD_ANNOTATIONS="+cluster.FateAnnotationPrefix), strings.Fields(*flagHandlerEnv)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w (run `make build` first)", bin, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the handler was not ready within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	startRSS, _ := benchkit.ProcStatusKiB(cmd.Process.Pid, "VmRSS")
	var ds []time.Duration
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Source", "bench")
		req.Header.Set("Ce-Id", fmt.Sprintf("bench-ping-%d-%d", n, i))
		req.Header.Set("Ce-Type", events.TypePing)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("sweep: %d %s", resp.StatusCode, body)
		}
		ds = append(ds, time.Since(start))
	}
	peak, err := benchkit.ProcStatusKiB(cmd.Process.Pid, "VmHWM")
	if err != nil {
		return err
	}
	if figures.peakKiB == nil {
		figures.peakKiB, figures.readyKiB = map[int]int64{}, map[int]int64{}
	}
	figures.peakKiB[n], figures.readyKiB[n] = peak, startRSS
	for i := range sum.Sweeps {
		if sum.Sweeps[i].Tasks == n {
			sw := &sum.Sweeps[i]
			sw.Process, sw.ReadyKiB, sw.PeakKiB, sw.ProcessMeasured = figureOf(ds), startRSS, peak, true
		}
	}
	fmt.Printf("  %6d tasks, bin/handler as a process: sweep %s  RSS at ready %.1f MB, peak %.1f MB\n", n, pct(ds), float64(startRSS)/1024, float64(peak)/1024)
	return nil
}
