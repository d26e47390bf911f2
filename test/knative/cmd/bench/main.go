// Command bench is make bench-knative: figures of config/knative on the
// local cluster's real Knative, all in one run:
//   - cold start: a TES task created while the handler is at zero pods, to
//     its first Job (the TES API's create, the Broker, the Trigger, the
//     activator starting a handler pod, the handler's step), with the
//     sweep's PingSource held to a yearly schedule; a sample is kept only
//     if no handler pod existed (in any phase) at the create, and split by
//     when this process's watches saw the handler pod pass each milestone
//     (created, scheduled, its IP reported, each container running, in the
//     revision's EndpointSlice, Ready) and the Job, to the millisecond;
//   - warm: the same with a handler pod up;
//   - step gap: an executor's Job seen complete to the next one's Job seen
//     created, through the ApiServerSource's adapter, the Broker and a
//     Trigger, and then through a second ApiServerSource whose sink is the
//     handler itself (direct delivery; the Broker's Triggers of Job and Pod
//     events filter a type no event has meanwhile);
//   - with -scale n, n tasks of three executors created at once through
//     the TES API (its bounds of a user's unfinished tasks raised to n, the
//     bytes unbounded), into the handler as Knative scales it: tasks a second,
//     the step gap, the handler's pods over time and its CPU per task (the
//     kubelet's figures), failed deliveries, the dead letter sink's pods,
//     and the handler's API requests per task from the API server's audit
//     log (make bench-knative starts the cluster with one);
//   - tasks that did not end COMPLETE, and the deliveries the Broker's
//     filter logged as failed (events retried, or lost to the dead letter
//     sink);
//   - the memory (working set, from the kubelet) of Knative's control
//     plane, its data plane and the project's pods.
//
// Usage:
//
//	go run ./test/knative/cmd/bench -dir .cluster [-cold 5] [-tasks 6] [-scale 1000 -share 30 -audit-log .cluster/audit.log]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
)

func main() {
	dir := flag.String("dir", ".cluster", "the directory of a cluster started with cluster up -knative")
	cold := flag.Int("cold", 5, "cold starts (and as many warm ones) to time")
	tasks := flag.Int("tasks", 6, "tasks of 4 executors per delivery path for the step gap (after one that does not count; 0: no step gap rounds)")
	scale := flag.Int("scale", 0, "then this many tasks of 3 executors at once through the TES API (0: none)")
	share := flag.Int("share", 0, "the scale run's user's share (QUOTA_TASKS_PER_USER): the most of its tasks that run at once, so that their pods fit the node (0: no share)")
	auditLog := flag.String("audit-log", "", "the API server's audit log of the handler's requests (cluster up -audit-users), for the scale run's requests per task")
	played := flag.Bool("played", false, "the tasks' pods played by the cluster's fake nodes (cluster up -nodes N): the control path measured without the real node's pod starts")
	paths := flag.String("paths", "imc", "the event paths the scale run goes through, one after the other, comma-separated: imc, imc-async, jetstream (cluster up -nats)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ps, err := parsePaths(*paths)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-knative:", err)
		os.Exit(2)
	}
	if err := run(ctx, *dir, *cold, *tasks, *scale, *share, *auditLog, *played, ps); err != nil {
		fmt.Fprintln(os.Stderr, "bench-knative:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-knative: "+format+"\n", a...) }

func run(ctx context.Context, dir string, cold, tasks, scale, share int, auditLog string, played bool, paths []eventPath) error {
	c, err := knative.AttachTo(dir)
	if err != nil {
		return err
	}
	env, err := knative.Setup(ctx, c, logf)
	if err != nil {
		return err
	}
	defer env.Close()
	if played {
		if err := c.PlayPods(ctx, knative.Tasks); err != nil {
			return err
		}
		logf("the pods of %s played by the cluster's fake nodes", knative.Tasks)
	}
	api, err := env.TES(ctx, "bench")
	if err != nil {
		return err
	}
	start := time.Now()
	jobs, err := watchJobs(ctx, env.C.Client, knative.Tasks)
	if err != nil {
		return err
	}
	defer jobs.stop()
	notComplete := 0

	var coldT, warmT []time.Duration
	var kept []coldSample
	dropped := 0
	pods, err := watchHandler(ctx, env.C.Client, knative.Platform)
	if err != nil {
		return err
	}
	defer pods.stop()
	was, unhold, err := env.HoldSweep(ctx)
	if err != nil {
		return err
	}
	err = func() error {
		for i := range cold {
			if err := env.WaitZero(ctx, "tesk-handler", 5*time.Minute); err != nil {
				return err
			}
			if err := waitNoHandler(ctx, env, 5*time.Minute); err != nil {
				return err
			}
			var s coldSample
			before := func(ctx context.Context) error {
				what, err := handlerPresent(ctx, env)
				s.warm = what
				return err
			}
			r, err := firstJob(ctx, api, jobs, before)
			if err != nil {
				return err
			}
			notComplete += b2i(!r.complete)
			s.create, s.seen = r.create, r.seen
			if err := coldSplit(ctx, env, pods, r.id, &s); err != nil {
				return err
			}
			w, err := firstJob(ctx, api, jobs, nil)
			if err != nil {
				return err
			}
			notComplete += b2i(!w.complete)
			warmT = append(warmT, w.seen.Sub(w.create))
			d := s.seen.Sub(s.create).Round(time.Millisecond)
			if s.warm != "" {
				dropped++
				logf("round %d/%d: cold %s DROPPED (%s), warm %s", i+1, cold, d, s.warm, w.seen.Sub(w.create).Round(time.Millisecond))
				continue
			}
			kept = append(kept, s)
			coldT = append(coldT, s.seen.Sub(s.create))
			logf("round %d/%d: cold %s (%s), warm %s", i+1, cold, d, s.describe(), w.seen.Sub(w.create).Round(time.Millisecond))
		}
		return nil
	}()
	if rerr := unhold(); err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}

	var brokerGaps, directGaps []time.Duration
	if tasks > 0 {
		if brokerGaps, directGaps, err = bothGaps(ctx, env, api, jobs, tasks, &notComplete); err != nil {
			return err
		}
	}

	var srs []*scaleResult
	if scale > 0 {
		if _, err := os.Stat(auditLog); auditLog != "" && err != nil {
			logf("no audit log (%v): the scale run counts no API requests", err)
			auditLog = ""
		}
		for _, p := range paths {
			if err := usePath(ctx, env, p); err != nil {
				return err
			}
			sr, err := scaleRun(ctx, env, api, jobs, scale, share, auditLog)
			if err != nil {
				return err
			}
			sr.path, sr.played = p, played
			srs = append(srs, sr)
		}
	}

	failed, err := env.FailedDeliveries(ctx, start)
	if err != nil {
		return err
	}
	mem, err := memory(ctx, env)
	if err != nil {
		return err
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nconfig/knative on Knative Eventing and Serving %s, local cluster, real node; run of %s–%s, load average %s\n\n",
		cluster.KnativeVersion, start.UTC().Format("2006-01-02 15:04"), time.Now().UTC().Format("15:04 UTC"), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Printf("%-52s %9s %9s %9s %4s\n", "", "min", "median", "max", "n")
	row := func(name string, s []time.Duration) {
		lo, med, hi := minMedMax(s)
		fmt.Printf("%-52s %9s %9s %9s %4d\n", name, ms(lo), ms(med), ms(hi), len(s))
	}
	row("TES create to first Job, handler at zero (cold, kept)", coldT)
	row("TES create to first Job, handler up (warm)", warmT)
	row("step gap through the Broker and a Trigger", brokerGaps)
	row("step gap, ApiServerSource straight to the handler", directGaps)
	if len(brokerGaps) > 0 && len(directGaps) > 0 {
		_, b, _ := minMedMax(brokerGaps)
		_, d, _ := minMedMax(directGaps)
		fmt.Printf("%-52s %8.2fx\n", "step gap median, Broker / direct", float64(b)/float64(d))
	}
	fmt.Printf("\ncold rounds: %d; kept: %d; dropped: %d, a handler pod existed at the create\n", cold, len(kept), dropped)
	fmt.Printf("the sweep's PingSource tesk-sweep: schedule %q during the cold rounds, %q restored after (its v1 spec has no suspend)\n", knative.RareSchedule, was)
	printSplit(kept)
	fmt.Printf("\ntasks not COMPLETE: %d of %d; deliveries the Broker's filter logged as failed: %d\n", notComplete, 2*cold+2*(tasks+1)*b2i(tasks > 0), failed)
	for _, sr := range srs {
		printScale(sr)
	}
	if len(srs) > 1 {
		printPaths(srs)
	}
	fmt.Printf("\nworking set (kubelet), MiB:\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range mem {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Printf("  %-40s %7.1f\n", k, float64(mem[k])/(1<<20))
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// jobTimes records, as this watch sees them, when each Job appeared and
// when it completed: its terminal condition, what the handler acts on
// (taskmeta.StatusOf), as make bench and make bench-scale time a step gap.
type jobTimes struct {
	mu       sync.Mutex
	added    map[string]time.Time
	complete map[string]time.Time
	stop     func()
}

// watchJobs records the Jobs of the namespace ns from now on: a list,
// then a watch from its version that client-go's RetryWatcher takes again
// where it left off whenever the API server ends it (a plain watch ends
// after 30 to 60 minutes, and a long run would lose every Job after that).
func watchJobs(ctx context.Context, client kubernetes.Interface, ns string) (*jobTimes, error) {
	api := client.BatchV1().Jobs(ns)
	opts := metav1.ListOptions{LabelSelector: taskmeta.LabelTask}
	list, err := api.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	j := &jobTimes{added: map[string]time.Time{}, complete: map[string]time.Time{}}
	j.stop, err = follow(ctx, list.Items, list.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = opts.LabelSelector
		return api.Watch(ctx, o)
	}, j.see)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// follow hands each listed item to see, then each object a watch from
// the list's version adds or changes, as it comes: client-go's
// RetryWatcher takes the watch again where it left off whenever the API
// server ends it. It returns the func that stops the watch.
func follow[T any](ctx context.Context, items []T, version string, watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error), see func(*T, time.Time)) (func(), error) {
	now := time.Now()
	for i := range items {
		see(&items[i], now)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, version, &cache.ListWatch{WatchFuncWithContext: watchFunc})
	if err != nil {
		return nil, err
	}
	go func() {
		for ev := range w.ResultChan() {
			if obj, ok := any(ev.Object).(*T); ok && ev.Type != watch.Deleted {
				see(obj, time.Now())
			}
		}
	}()
	return w.Stop, nil
}

// see records a Job's first sighting and its terminal condition's.
func (j *jobTimes) see(job *batchv1.Job, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.added[job.Name]; !ok {
		j.added[job.Name] = now
	}
	if _, ok := j.complete[job.Name]; !ok && taskmeta.StatusOf(job) == taskmeta.JobComplete {
		j.complete[job.Name] = now
	}
}

func (j *jobTimes) get(name string) (added, complete time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.added[name], j.complete[name]
}

// started is a one-executor task's create, as the client made it, and its
// first Job as the watch saw it appear.
type started struct {
	id           string
	create, seen time.Time
	complete     bool
}

// firstJob creates a one-executor task, waits for its first Job and for
// the task to end. before, if not nil, runs right before the create.
func firstJob(ctx context.Context, api *knative.TES, jobs *jobTimes, before func(context.Context) error) (started, error) {
	if _, err := api.ServiceInfo(ctx); err != nil { // the TES API up: its own cold start is not the handler's
		return started{}, err
	}
	if before != nil {
		if err := before(ctx); err != nil {
			return started{}, err
		}
	}
	t0 := time.Now()
	id, err := api.Create(ctx, knative.RepeatTask("bench-start", 1, "true"))
	if err != nil {
		return started{}, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if added, _ := jobs.get(id + "-ex-00"); !added.IsZero() {
			v, err := api.Wait(ctx, id, 3*time.Minute, nil)
			if err != nil {
				return started{}, err
			}
			return started{id: id, create: t0, seen: added, complete: v.State == "COMPLETE"}, nil
		}
		if time.Now().After(deadline) {
			return started{}, fmt.Errorf("task %s: no Job after 3m", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stepGaps runs n tasks of 4 executors one after another and returns the
// gaps between each executor's Job seen complete and the next one's seen
// created, and how many tasks did not end COMPLETE.
func stepGaps(ctx context.Context, api *knative.TES, jobs *jobTimes, n int) ([]time.Duration, int, error) {
	var gaps []time.Duration
	bad := 0
	// One task first whose gaps do not count: a delivery path just set up
	// (an adapter that has only started its watch) is not its steady state.
	for i := range n + 1 {
		id, err := api.Create(ctx, knative.RepeatTask("bench-steps", 4, "true"))
		if err != nil {
			return nil, 0, err
		}
		v, err := api.Wait(ctx, id, 5*time.Minute, nil)
		if err != nil {
			return nil, 0, err
		}
		if v.State != "COMPLETE" {
			bad++
			continue
		}
		for e := range 3 {
			_, done := jobs.get(fmt.Sprintf("%s-ex-%02d", id, e))
			next, _ := jobs.get(fmt.Sprintf("%s-ex-%02d", id, e+1))
			if done.IsZero() || next.IsZero() {
				return nil, 0, fmt.Errorf("task %s: executor %d's Job not seen complete, or the next not seen", id, e)
			}
			if i > 0 {
				gaps = append(gaps, next.Sub(done))
			}
		}
	}
	return gaps, bad, nil
}

// direct points a second ApiServerSource at the handler itself and makes
// the Broker's Triggers of Job and Pod events filter a type no event has;
// the returned func undoes both.
// bothGaps times the step gaps of tasks tasks through the Broker, then
// with the ApiServerSource posting straight to the handler (direct),
// adding the tasks not COMPLETE to notComplete.
func bothGaps(ctx context.Context, env *knative.Env, api *knative.TES, jobs *jobTimes, tasks int, notComplete *int) (brokerGaps, directGaps []time.Duration, err error) {
	brokerGaps, n, err := stepGaps(ctx, api, jobs, tasks)
	if err != nil {
		return nil, nil, err
	}
	*notComplete += n
	logf("step gaps through the Broker: %d", len(brokerGaps))
	restore, err := direct(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	directGaps, n, err = stepGaps(ctx, api, jobs, tasks)
	if rerr := restore(); err == nil {
		err = rerr
	}
	if err != nil {
		return nil, nil, err
	}
	*notComplete += n
	logf("step gaps with direct delivery: %d", len(directGaps))
	return brokerGaps, directGaps, nil
}

// handlerAudience is the handler's EVENTS_AUDIENCE in config/knative's
// ConfigMap.
func handlerAudience(ctx context.Context, env *knative.Env) (string, error) {
	cm, err := env.C.Client.CoreV1().ConfigMaps(knative.Platform).Get(ctx, "tesk-handler-config", metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if a := cm.Data["EVENTS_AUDIENCE"]; a != "" {
		return a, nil
	}
	return "", fmt.Errorf("tesk-handler-config has no EVENTS_AUDIENCE: the handler takes events from anyone")
}

func direct(ctx context.Context, env *knative.Env) (func() error, error) {
	sources := env.C.Dynamic.Resource(knative.APIServerSrcGVR).Namespace(knative.Platform)
	triggers := env.C.Dynamic.Resource(knative.TriggerGVR).Namespace(knative.Platform)
	src, err := sources.Get(ctx, "tesk-events", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	spec, _, _ := unstructured.NestedMap(src.Object, "spec")
	// The audience the handler takes tokens for (EVENTS_AUDIENCE, as the
	// Triggers' subscribers name it): the source's identity is a
	// ServiceAccount of the handler's namespace, which the handler admits.
	aud, err := handlerAudience(ctx, env)
	if err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedMap(spec, map[string]any{"ref": map[string]any{
		"apiVersion": "serving.knative.dev/v1", "kind": "Service", "name": "tesk-handler",
	}, "audience": aud}, "sink"); err != nil {
		return nil, err
	}
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": src.GetAPIVersion(), "kind": src.GetKind(),
		"metadata": map[string]any{"name": "tesk-events-direct", "namespace": knative.Platform},
		"spec":     spec,
	}}
	if _, err := sources.Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	saved := map[string]string{}
	setType := func(name, typ string) error {
		_, err := triggers.Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"filter":{"attributes":{"type":%q}}}}`, typ)), metav1.PatchOptions{})
		return err
	}
	restore := func() error {
		var errs []string
		for name, typ := range saved {
			if err := setType(name, typ); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if err := sources.Delete(context.Background(), "tesk-events-direct", metav1.DeleteOptions{}); err != nil {
			errs = append(errs, err.Error())
		}
		if len(errs) > 0 {
			return fmt.Errorf("undoing direct delivery: %s", strings.Join(errs, "; "))
		}
		return nil
	}
	for _, name := range []string{"tesk-job-finished", "tesk-pod-stuck", "tesk-apiserver-add", "tesk-apiserver-update", "tesk-apiserver-delete"} {
		o, err := triggers.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, errorsJoin(err, restore())
		}
		saved[name], _, _ = unstructured.NestedString(o.Object, "spec", "filter", "attributes", "type")
		if err := setType(name, "tesk.test.never"); err != nil {
			return nil, errorsJoin(err, restore())
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		o, err := sources.Get(ctx, "tesk-events-direct", metav1.GetOptions{})
		if err == nil && isReady(o) {
			break
		}
		if time.Now().After(deadline) {
			return nil, errorsJoin(fmt.Errorf("ApiServerSource tesk-events-direct not Ready after 3m"), restore())
		}
		time.Sleep(time.Second)
	}
	return restore, nil
}

func isReady(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func errorsJoin(err, more error) error {
	if more == nil {
		return err
	}
	return fmt.Errorf("%w (and %v)", err, more)
}

// statsSummary is what the benches read of the kubelet's summary
// (/stats/summary): each pod's working set and its containers' CPU.
type statsSummary struct {
	Pods []struct {
		PodRef struct{ Name, Namespace string } `json:"podRef"`
		Memory struct {
			WorkingSetBytes uint64 `json:"workingSetBytes"`
		} `json:"memory"`
		Containers []struct {
			Name string `json:"name"`
			CPU  struct {
				UsageCoreNanoSeconds uint64 `json:"usageCoreNanoSeconds"`
			} `json:"cpu"`
		} `json:"containers"`
	} `json:"pods"`
}

// kubeletSummary reads the real node's kubelet summary through the API
// server.
func kubeletSummary(ctx context.Context, env *knative.Env) (*statsSummary, error) {
	raw, err := env.C.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", env.Node.Name, "proxy/stats/summary").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var summary statsSummary
	if err := json.Unmarshal(raw, &summary); err != nil {
		return nil, err
	}
	return &summary, nil
}

// memory sums the kubelet's working set of the pods by group: Knative's
// control plane (controllers, webhooks, autoscaler), its data plane
// (Broker ingress and filter, channel dispatcher, activator, the
// ApiServerSource's adapter, the ingress stand-in) and the project's pods.
func memory(ctx context.Context, env *knative.Env) (map[string]uint64, error) {
	summary, err := kubeletSummary(ctx, env)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, p := range summary.Pods {
		group := podGroup(p.PodRef.Namespace, p.PodRef.Name)
		if group == "" {
			continue
		}
		out[group] += p.Memory.WorkingSetBytes
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the kubelet's summary names no pod of Knative or tesk")
	}
	return out, nil
}

// dataPlane names the pods of Knative's data plane, the ones every event
// goes through, by a part of their names (and the NATS server's, whole
// namespace, for the JetStream channel).
var dataPlane = []string{"broker-ingress", "broker-filter", "imc-dispatcher", "jetstream-ch-dispatcher", "activator", "apiserversource", "kingress-standin", "pingsource-mt-adapter"}

// podGroup is the group of the pod name in namespace ns: Knative's control
// plane (controllers, webhooks, autoscaler), its data plane, or the
// project's pods by their Service; empty for the rest.
func podGroup(ns, name string) string {
	switch {
	case ns == knative.Platform && strings.HasPrefix(name, "apiserversource-"), ns == cluster.NatsNamespace:
		return groupDataPlane
	case ns == knative.Platform:
		return "tesk (" + strings.SplitN(name, "-0", 2)[0] + ")"
	case ns == "knative-eventing" || ns == "knative-serving" || ns == "kingress-standin":
		for _, d := range dataPlane {
			if strings.Contains(name, d) {
				return groupDataPlane
			}
		}
		return "Knative control plane"
	}
	return ""
}
