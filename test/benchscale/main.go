// Command benchscale drives many tasks through the ApiServerSource adapter
// into bin/handler on the local cluster (kwok nodes, short pods) and prints
// tasks per second, the step gap under that load, the handler's CPU seconds
// per task and peak RSS, and the handler's API requests per task by verb
// (from the API server's audit log, filtered to the handler's
// ServiceAccount). It then does the same with two handler processes behind
// one address (a round-robin reverse proxy): how many events each took, and
// whether any job was created twice.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
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
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/test/procstat"
)

var (
	flagTasks      = flag.Int("tasks", 10000, "tasks per run")
	flagExecutors  = flag.Int("executors", 3, "executors per task")
	flagInFlight   = flag.Int("inflight", 200, "tasks submitted and not yet ended at any time")
	flagReplicas   = flag.String("replicas", "1,2", "handler processes behind one address, one run each")
	flagPodDelay   = flag.String("pod-delay", "100ms", "how long each executor's pod runs (kwok fate.tesk.test/delay)")
	flagTimeout    = flag.Duration("timeout", 2*time.Hour, "longest a run may take")
	flagHandlerEnv = flag.String("handler-env", "", "space-separated NAME=value pairs added to bin/handler's environment")
	flagDelivery   = flag.String("delivery", "broker", "how the adapter's events reach the handlers: broker (a stand-in for the Broker and Triggers of config/knative: 202 at once, up to -broker-parallel deliveries at once, the Triggers' retries) or direct (the adapter posts to the handlers and waits for each answer)")
	flagParallel   = flag.Int("broker-parallel", 64, "deliveries the broker stand-in makes at once")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	var replicas []int
	for _, s := range strings.Split(*flagReplicas, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n < 1 {
			return fmt.Errorf("-replicas %q: want a comma-separated list of counts of 1 or more", *flagReplicas)
		}
		replicas = append(replicas, n)
	}
	if *flagTasks < 1 || *flagExecutors < 1 || *flagInFlight < 1 {
		return fmt.Errorf("-tasks, -executors and -inflight must be 1 or more")
	}
	if *flagDelivery != "broker" && *flagDelivery != "direct" {
		return fmt.Errorf("-delivery %q: want broker or direct", *flagDelivery)
	}
	if *flagParallel < 1 {
		return fmt.Errorf("-broker-parallel must be 1 or more")
	}
	if _, err := time.ParseDuration(*flagPodDelay); err != nil {
		return fmt.Errorf("-pod-delay: %w", err)
	}
	if _, err := os.Stat(filepath.Join("bin", "handler")); err != nil {
		return fmt.Errorf("bin/handler: run `make build` first")
	}
	dir, err := os.MkdirTemp("", "tesk-benchscale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var users []string
	for _, r := range replicas {
		users = append(users, "system:serviceaccount:"+namespace(r)+":"+devstack.HandlerRole)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(benchkit.AuditPolicy(users)), 0o600); err != nil {
		return err
	}
	auditLog := filepath.Join(dir, "audit.log")

	load1, _ := procstat.LoadAvg()
	fmt.Printf("machine: %d cores, %s, load average %s\n", runtime.NumCPU(), runtime.Version(), load1)
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{NodeCPU: "100000", NodePods: "100000", APIServerFlags: benchkit.AuditFlags(policy, auditLog)})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop() }()
	fmt.Printf("local cluster started in %.1fs (API server audit log: the handler's ServiceAccount only)\n\n", time.Since(begin).Seconds())
	for _, r := range replicas {
		if err := runOnce(ctx, c, r, auditLog); err != nil {
			return err
		}
	}
	return nil
}

func namespace(replicas int) string { return fmt.Sprintf("scale-%d", replicas) }

type handlerProc struct {
	cmd *exec.Cmd
	url string
}

// runOnce runs the tasks through replicas handler processes behind one
// round-robin address.
func runOnce(ctx context.Context, c *cluster.Cluster, replicas int, auditLog string) error {
	ns := namespace(replicas)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := devstack.ApplyRBAC(ctx, c, filepath.Join("config", "knative", "rbac.yaml"), ns, nil); err != nil {
		return err
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, ns, devstack.HandlerRole)
	if err != nil {
		return err
	}
	var procs []*handlerProc
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			_ = p.cmd.Wait()
		}
	}()
	var urls []string
	for i := 0; i < replicas; i++ {
		port := 18280 + 10*replicas + i
		cmd := exec.Command(filepath.Join("bin", "handler"), "--kubeconfig", kubeconfig, "--namespace", ns, "--port", fmt.Sprint(port))
		cmd.Env = append(append(os.Environ(), "FILER_NAME=tesk-filer", "FILER_VERSION=dev", "TRUST_EVENTS=true", "EXECUTOR_POD_ANNOTATIONS="+cluster.FateAnnotationPrefix), strings.Fields(*flagHandlerEnv)...)
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			return err
		}
		p := &handlerProc{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
		procs = append(procs, p)
		if err := waitReady(p.url + "/readyz"); err != nil {
			return err
		}
		urls = append(urls, p.url)
	}
	rr, err := newRoundRobin(urls...)
	if err != nil {
		return err
	}
	front := httptest.NewServer(rr)
	defer front.Close()
	// The adapter's sink, and where the tasks are submitted.
	sink := front.URL
	var broker *benchkit.Broker
	if *flagDelivery == "broker" {
		broker = benchkit.NewBroker(front.URL, *flagParallel, 1<<20)
		defer broker.Close()
		bs := httptest.NewServer(broker)
		defer bs.Close()
		sink = bs.URL
	}
	a, err := c.StartAdapter(ctx, cluster.AdapterOptions{
		Name: "tesk-events", Namespace: ns, Sink: sink,
		Resources: devstack.AdapterResources(),
	})
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop() }()

	wctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	times, err := watchJobs(wctx, c, ns)
	if err != nil {
		return err
	}
	ended := make(chan benchkit.TaskEnd, *flagTasks)
	if err := benchkit.WatchAnchors(wctx, c.Client, ns, ended); err != nil {
		return err
	}

	cpuBefore := make([]float64, len(procs))
	for i, p := range procs {
		if cpuBefore[i], err = procstat.CPUSeconds(p.cmd.Process.Pid); err != nil {
			return err
		}
	}
	eventsBefore := rr.counts()

	name := func(i int) string { return fmt.Sprintf("scale-%05d", i) }
	via := "the adapter posting to the handlers directly"
	if broker != nil {
		via = fmt.Sprintf("the adapter and a broker stand-in (%d deliveries at once)", *flagParallel)
	}
	fmt.Printf("== %d handler process(es) behind one address: %d tasks x %d executors (no PVC, pods of %s), %d in flight, through %s\n",
		replicas, *flagTasks, *flagExecutors, *flagPodDelay, *flagInFlight, via)
	start := time.Now()
	deadline := time.After(*flagTimeout)
	slots := make(chan struct{}, *flagInFlight)
	var submitErrs atomic.Int64
	go func() {
		for i := 0; i < *flagTasks; i++ {
			select {
			case slots <- struct{}{}:
			case <-wctx.Done():
				return
			}
			if err := submit(sink, name(i)); err != nil {
				fmt.Fprintln(os.Stderr, "benchscale:", err)
				submitErrs.Add(1)
				<-slots
			}
		}
	}()
	done, notComplete := 0, map[string]int{}
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
wait:
	for done+int(submitErrs.Load()) < *flagTasks {
		select {
		case e := <-ended:
			done++
			if e.State != "COMPLETE" {
				notComplete[e.State]++
			}
			<-slots
		case <-progress.C:
			fmt.Printf("  ... %d tasks ended after %.0fs\n", done, time.Since(start).Seconds())
		case <-deadline:
			fmt.Printf("  stopped at the timeout of %s\n", *flagTimeout)
			break wait
		}
	}
	elapsed := time.Since(start)
	eventsAfter := rr.counts()
	cpu := 0.0
	var peaks []string
	for i, p := range procs {
		after, err := procstat.CPUSeconds(p.cmd.Process.Pid)
		if err != nil {
			return err
		}
		hwm, err := benchkit.ProcStatusKiB(p.cmd.Process.Pid, "VmHWM")
		if err != nil {
			return err
		}
		cpu += after - cpuBefore[i]
		peaks = append(peaks, fmt.Sprintf("%.1f MB", float64(hwm)/1024))
		fmt.Printf("  handler %d: %d events, %.1f CPU s\n", i, eventsAfter[i]-eventsBefore[i], after-cpuBefore[i])
	}
	gaps := times.gaps(*flagTasks, *flagExecutors, name)
	fmt.Printf("  %d of %d tasks ended in %.1fs: %.1f tasks/s; not COMPLETE: %v; submissions failed: %d\n",
		done, *flagTasks, elapsed.Seconds(), float64(done)/elapsed.Seconds(), notComplete, submitErrs.Load())
	fmt.Printf("  step gap (job ended -> next job added, one watch), %d steps: %s\n", len(gaps), pct(gaps))
	fmt.Printf("  handler CPU: %.2f s in all, %.2f ms per task; peak RSS (VmHWM) %s\n", cpu, 1000*cpu/float64(max(done, 1)), strings.Join(peaks, ", "))
	if broker != nil {
		bc := broker.Counts()
		fmt.Printf("  broker stand-in: %d events accepted, %d refused, %d delivered, %d retried, %d given up; longest queue %d\n",
			bc.Accepted, bc.Refused, bc.Delivered, bc.Retried, bc.Dead, bc.MaxQueued)
	}

	// Stop the adapter and the handlers first, so that every request
	// is in the audit log.
	_ = a.Stop()
	if broker != nil {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := broker.Drain(dctx); err != nil {
			fmt.Printf("  broker stand-in: events still queued 30 s after the adapter stopped\n")
		}
		cancel()
	}
	stopWatches()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
	procs = nil
	f, err := os.Open(auditLog)
	if err != nil {
		return err
	}
	counts, err := benchkit.CountAudit(f, "system:serviceaccount:"+ns+":"+devstack.HandlerRole, ns)
	f.Close()
	if err != nil {
		return err
	}
	fmt.Printf("  handler API requests (audit log): %d in all, %.2f per task; by verb and resource, per task:\n", counts.Total, float64(counts.Total)/float64(max(done, 1)))
	for _, k := range counts.Keys() {
		fmt.Printf("    %-28s %8d  %6.2f\n", k, counts.ByVerb[k], float64(counts.ByVerb[k])/float64(max(done, 1)))
	}
	twice := counts.CreatedTwice()
	fmt.Printf("  jobs created: %d distinct, %d created more than once %v, %d creates answered 409 AlreadyExists\n\n",
		len(counts.JobCreates), len(twice), firstN(twice, 5), counts.JobCreateConflicts)
	if len(twice) > 0 {
		return fmt.Errorf("%d jobs were created more than once", len(twice))
	}
	return nil
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// submit posts task.submitted for a task of short executors, retrying
// transient failures with backoff.
func submit(url, task string) error {
	spec := taskspec.Task{}
	for i := 0; i < *flagExecutors; i++ {
		var j batchv1.Job
		j.Name = fmt.Sprintf("%s-ex-%02d", task, i)
		j.Spec.Template.Annotations = map[string]string{"fate.tesk.test/delay": *flagPodDelay}
		j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "main", Image: "ubuntu:24.04", Command: []string{"true"}}}
		spec.Executors = append(spec.Executors, j)
	}
	raw, _ := json.Marshal(spec)
	data, _ := json.Marshal(map[string]any{"task": task, "input": json.RawMessage(raw)})
	var last error
	for attempt, wait := 0, 100*time.Millisecond; attempt < 6; attempt, wait = attempt+1, wait*2 {
		req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(data))
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "submit-"+task)
		req.Header.Set("Ce-Source", "benchscale")
		req.Header.Set("Ce-Type", events.TypeTaskSubmitted)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		last = err
		time.Sleep(wait)
	}
	return fmt.Errorf("submit %s: %w", task, last)
}

// jobTimes records when each job was first seen and first seen ended.
type jobTimes struct {
	mu           sync.Mutex
	ended, added map[string]time.Time
}

func watchJobs(ctx context.Context, c *cluster.Cluster, ns string) (*jobTimes, error) {
	jobs := c.Client.BatchV1().Jobs(ns)
	w, err := benchkit.WatchFromNow(ctx, jobs.List, jobs.Watch)
	if err != nil {
		return nil, err
	}
	t := &jobTimes{ended: map[string]time.Time{}, added: map[string]time.Time{}}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				j, ok := ev.Object.(*batchv1.Job)
				if !ok {
					continue
				}
				now := time.Now()
				t.mu.Lock()
				if _, seen := t.added[j.Name]; !seen {
					t.added[j.Name] = now
				}
				if _, seen := t.ended[j.Name]; !seen && taskmeta.StatusOf(j) != taskmeta.JobRunning {
					t.ended[j.Name] = now
				}
				t.mu.Unlock()
			}
		}
	}()
	return t, nil
}

func (t *jobTimes) gaps(tasks, executors int, task func(int) string) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lat []time.Duration
	for i := 0; i < tasks; i++ {
		for k := 0; k+1 < executors; k++ {
			e, ok1 := t.ended[fmt.Sprintf("%s-ex-%02d", task(i), k)]
			n, ok2 := t.added[fmt.Sprintf("%s-ex-%02d", task(i), k+1)]
			if ok1 && ok2 {
				lat = append(lat, n.Sub(e))
			}
		}
	}
	return lat
}

func waitReady(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: not ready within 30 s", url)
}

func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("p50 %s p90 %s p99 %s max %s", r(benchkit.Percentile(s, 0.5)), r(benchkit.Percentile(s, 0.9)), r(benchkit.Percentile(s, 0.99)), r(s[len(s)-1]))
}
