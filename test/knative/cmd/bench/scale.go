package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// scaleExecutors is how many executors each task of the scale run has, as
// make bench-scale's.
const scaleExecutors = 3

// scaleTask is the scale run's task i: three executors that run `true`,
// with no CPU asked for (the node has 2 cores; Knative's pods need some)
// and 64 MiB of memory each.
func scaleTask(i int) *tesv1.Task {
	t := knative.RepeatTask(fmt.Sprintf("bench-scale-%04d", i), scaleExecutors, "true")
	t.Resources = &tesv1.Resources{RAMGB: 0.0625}
	return t
}

// podSample is what the sampler saw of the handler at one time.
type podSample struct {
	at          time.Time
	live, ready int
	done        int // the scale run's tasks seen final so far
}

// sampler follows the handler's pods while the scale run goes: their
// number and readiness every period, and the CPU the kubelet reports for
// each one's handler container and for each pod of Knative's data plane
// (the last figure seen, and the first for the pods that were up at the
// first sample).
type sampler struct {
	mu        sync.Mutex
	samples   []podSample
	cpuFirst  map[cpuKey]uint64
	cpuLast   map[cpuKey]uint64
	sampled   bool            // the first sample's figures are in cpuFirst
	names     map[string]bool // every handler pod seen
	deadPods  map[string]bool // every pod of the dead letter sink seen
	done      int
	cpuErrors int
}

func newSampler() *sampler {
	return &sampler{cpuFirst: map[cpuKey]uint64{}, cpuLast: map[cpuKey]uint64{}, names: map[string]bool{}, deadPods: map[string]bool{}}
}

func (s *sampler) setDone(n int) {
	s.mu.Lock()
	s.done = n
	s.mu.Unlock()
}

func (s *sampler) run(ctx context.Context, env *knative.Env, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s.sample(ctx, env)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample(ctx context.Context, env *knative.Env) {
	pods, err := handlerPods(ctx, env)
	if err != nil {
		return
	}
	ps := podSample{at: time.Now()}
	for _, p := range pods {
		s.mu.Lock()
		s.names[p.Name] = true
		s.mu.Unlock()
		if p.DeletionTimestamp != nil || p.Status.Phase != "Running" {
			continue
		}
		ps.live++
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ps.ready++
			}
		}
	}
	dead, err := env.C.Client.CoreV1().Pods(knative.Platform).List(ctx, metav1.ListOptions{LabelSelector: "serving.knative.dev/service=tesk-dead-letters"})
	if err == nil {
		s.mu.Lock()
		for _, p := range dead.Items {
			s.deadPods[p.Name] = true
		}
		s.mu.Unlock()
	}
	cpu, err := podCPU(ctx, env)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.cpuErrors++
	}
	for k, ns := range cpu {
		if _, ok := s.cpuFirst[k]; !ok {
			// A pod up at the first sample counts from there; one
			// started later, from its start.
			s.cpuFirst[k] = 0
			if !s.sampled {
				s.cpuFirst[k] = ns
			}
		}
		s.cpuLast[k] = ns
	}
	if err == nil {
		s.sampled = true
	}
	ps.done = s.done
	s.samples = append(s.samples, ps)
}

// cpuKey names a pod whose CPU the sampler follows, and its group.
type cpuKey struct{ group, pod string }

// CPU groups the scale run reports per task.
const (
	groupHandler   = "handler"
	groupDataPlane = "Knative data plane"
)

// podCPU reads the kubelet's summary: the CPU time, in nanoseconds, that
// each handler pod's handler container (not its queue-proxy) and each pod
// of Knative's data plane (all its containers) have used.
func podCPU(ctx context.Context, env *knative.Env) (map[cpuKey]uint64, error) {
	summary, err := kubeletSummary(ctx, env)
	if err != nil {
		return nil, err
	}
	out := map[cpuKey]uint64{}
	for _, p := range summary.Pods {
		handler := p.PodRef.Namespace == knative.Platform && strings.HasPrefix(p.PodRef.Name, "tesk-handler-")
		group := podGroup(p.PodRef.Namespace, p.PodRef.Name)
		if !handler && group != groupDataPlane {
			continue
		}
		k := cpuKey{group, p.PodRef.Namespace + "/" + p.PodRef.Name}
		if handler {
			k.group = groupHandler
		}
		for _, c := range p.Containers {
			if !handler || c.Name != "queue-proxy" { // the chart's container, handler
				out[k] += c.CPU.UsageCoreNanoSeconds
			}
		}
	}
	return out, nil
}

// cpu is the CPU the group's pods used while the sampler ran.
func (s *sampler) cpu(group string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total uint64
	for k, last := range s.cpuLast {
		if k.group == group && last >= s.cpuFirst[k] {
			total += last - s.cpuFirst[k]
		}
	}
	return time.Duration(total)
}

// setShare sets the handler's QUOTA_TASKS_PER_USER (the chart's
// tasks.share.tasks) and has the handler roll out a new revision that
// reads it.
func setShare(ctx context.Context, env *knative.Env, share int) error {
	patch := fmt.Sprintf(`{"data":{"QUOTA_TASKS_PER_USER":"%d"}}`, share)
	if _, err := env.C.Client.CoreV1().ConfigMaps(knative.Platform).Patch(ctx, "tesk-handler-config", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("share: %w", err)
	}
	logf("scale: QUOTA_TASKS_PER_USER=%d; a new revision of the handler reads it", share)
	return env.NewRevision(ctx, "tesk-handler", 5*time.Minute)
}

// scaleBacklog is the merge patch of the TES API's configuration that
// lets the scale run's one user have its n tasks unfinished at once: the
// bound of tasks raised to n, the bytes not bounded, its creates not
// rated. The defaults (200 tasks and 8 MiB of estimates, a task of three
// executors about 68 KB; 600 creates a minute a pod) would refuse all but
// about 124 of them, and the rest of the creates after the first 600.
func scaleBacklog(n int) string {
	return fmt.Sprintf(`{"data":{"TES_MAX_UNFINISHED_TASKS_PER_USER":"%d","TES_MAX_UNFINISHED_BYTES_PER_USER":"0","TES_CREATE_RATE_PER_USER":"0"}}`, n)
}

// setBacklog applies scaleBacklog(n) to the TES API's ConfigMap and has
// the TES API roll out a new revision that reads it (unless the ConfigMap
// held it already: a scale run before this one set it).
func setBacklog(ctx context.Context, env *knative.Env, n int) error {
	cms := env.C.Client.CoreV1().ConfigMaps(knative.Platform)
	before, err := cms.Get(ctx, "tesk-tes-config", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("unfinished bounds: %w", err)
	}
	after, err := cms.Patch(ctx, "tesk-tes-config", types.MergePatchType, []byte(scaleBacklog(n)), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("unfinished bounds: %w", err)
	}
	if maps.Equal(before.Data, after.Data) {
		return nil
	}
	logf("scale: TES_MAX_UNFINISHED_TASKS_PER_USER=%d, TES_MAX_UNFINISHED_BYTES_PER_USER=0, TES_CREATE_RATE_PER_USER=0; a new revision of the TES API reads them", n)
	return env.NewRevision(ctx, "tesk-tes", 5*time.Minute)
}

// scaleResult is what the scale run measured.
type scaleResult struct {
	path                                    eventPath
	played                                  bool          // the tasks' pods on fake nodes
	toZero                                  time.Duration // the last task final to the handler at zero pods
	toZeroErr                               error
	tasks, share, submitFailed, notComplete int
	start, end                              time.Time
	gaps                                    []time.Duration
	gapsWanted                              int // the COMPLETE tasks' gaps, seen or not
	maxLive                                 int
	handlerPods                             int
	handlerCPU, dataPlaneCPU                time.Duration
	cpuErrors                               int
	deadLetterPods                          int
	failed                                  int
	audit                                   benchkit.AuditCounts
	auditErr                                error
	timeline                                []podSample
	doneAt                                  []time.Time
}

// scaleRun creates n tasks of three executors (`true`) through the TES API
// at once, its bounds of a user's unfinished tasks raised to them
// (setBacklog), and waits until every one is final, while the sampler
// follows the handler's pods; auditLog, if not empty, is the API server's
// audit log of the handler's requests (cluster up -audit-users).
func scaleRun(ctx context.Context, env *knative.Env, api *knative.TES, jobs *jobTimes, n, share int, auditLog string) (*scaleResult, error) {
	r := &scaleResult{tasks: n, share: share}
	if share > 0 {
		if err := setShare(ctx, env, share); err != nil {
			return nil, err
		}
	}
	if err := setBacklog(ctx, env, n); err != nil {
		return nil, err
	}
	var auditFrom int64
	if auditLog != "" {
		if fi, err := os.Stat(auditLog); err == nil {
			auditFrom = fi.Size()
		}
	}
	s := newSampler()
	s.sample(ctx, env) // the first CPU figures, before the first create
	sctx, stopSampler := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.run(sctx, env, 2*time.Second) }()
	defer func() { stopSampler(); wg.Wait() }()

	r.start = time.Now()
	ids := make([]string, n)
	var mu sync.Mutex
	work := make(chan int)
	var cw sync.WaitGroup
	for range 16 {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for i := range work {
				var id string
				var err error
				for attempt := range 3 {
					if attempt > 0 {
						time.Sleep(time.Duration(attempt) * time.Second)
					}
					if id, err = api.Create(ctx, scaleTask(i)); err == nil {
						break
					}
				}
				mu.Lock()
				if err != nil {
					r.submitFailed++
					logf("scale: create %d: %v", i, err)
				}
				ids[i] = id
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	cw.Wait()
	logf("scale: %d tasks created in %s (%d failed)", n-r.submitFailed, time.Since(r.start).Round(time.Millisecond), r.submitFailed)

	want := map[string]bool{}
	for _, id := range ids {
		if id != "" {
			want[id] = true
		}
	}
	final, err := waitFinal(ctx, env, want, r, s)
	if err != nil {
		return nil, err
	}
	r.end = time.Now()
	for id, st := range final {
		if st != tesv1.StateComplete {
			r.notComplete++
			continue
		}
		for e := range scaleExecutors - 1 {
			r.gapsWanted++
			_, done := jobs.get(fmt.Sprintf("%s-ex-%02d", id, e))
			next, _ := jobs.get(fmt.Sprintf("%s-ex-%02d", id, e+1))
			if !done.IsZero() && !next.IsZero() {
				r.gaps = append(r.gaps, next.Sub(done))
			}
		}
	}
	// The last CPU figures of the pods that served the run: once more
	// after the last task, before Knative scales them down.
	s.sample(ctx, env)
	stopSampler()
	wg.Wait()
	r.handlerCPU = s.cpu(groupHandler)
	r.dataPlaneCPU = s.cpu(groupDataPlane)
	r.cpuErrors = s.cpuErrors
	r.timeline = s.samples
	r.handlerPods = len(s.names)
	r.deadLetterPods = len(s.deadPods)
	for _, p := range s.samples {
		r.maxLive = max(r.maxLive, p.live)
	}
	if r.failed, err = env.FailedDeliveries(ctx, r.start); err != nil {
		return nil, err
	}
	if auditLog != "" {
		r.audit, r.auditErr = countAuditFrom(auditLog, auditFrom)
	}
	// Knative's autoscaler, left to itself (no minScale raised for the
	// run), takes the handler back to zero.
	r.toZeroErr = env.WaitZero(ctx, "tesk-handler", 15*time.Minute)
	r.toZero = time.Since(r.end)
	return r, nil
}

// waitFinal follows the anchors' final state label (a watch, taken again
// when the API server ends it) until every task of want has one, and
// returns each one's state; the times they were seen go to r.doneAt.
func waitFinal(ctx context.Context, env *knative.Env, want map[string]bool, r *scaleResult, s *sampler) (map[string]string, error) {
	final := map[string]string{}
	anchors := env.C.Client.CoreV1().ConfigMaps(knative.Tasks)
	opts := metav1.ListOptions{LabelSelector: taskmeta.LabelState}
	deadline := time.Now().Add(2 * time.Hour)
	seen := func(name, state string) {
		if _, ok := final[name]; want[name] && !ok && state != "" {
			final[name] = state
			r.doneAt = append(r.doneAt, time.Now())
		}
	}
	for len(final) < len(want) {
		list, err := anchors.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, a := range list.Items {
			seen(a.Name, a.Labels[taskmeta.LabelState])
		}
		wopts := opts
		wopts.ResourceVersion = list.ResourceVersion
		w, err := anchors.Watch(ctx, wopts)
		if err != nil {
			return nil, err
		}
		tick := time.NewTicker(time.Minute)
		func() {
			defer w.Stop()
			defer tick.Stop()
			for len(final) < len(want) {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return // ended by the API server: list and watch again
					}
					if a, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type != watch.Deleted {
						seen(a.Name, a.Labels[taskmeta.LabelState])
						s.setDone(len(final))
					}
				case <-tick.C:
					logf("scale: %d of %d final after %s", len(final), len(want), time.Since(r.start).Round(time.Second))
					if time.Now().After(deadline) {
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(final) < len(want) && time.Now().After(deadline) {
			return nil, fmt.Errorf("scale: %d of %d tasks final after 2h", len(final), len(want))
		}
	}
	s.setDone(len(final))
	return final, nil
}

func countAuditFrom(path string, offset int64) (benchkit.AuditCounts, error) {
	f, err := os.Open(path)
	if err != nil {
		return benchkit.AuditCounts{}, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		return benchkit.AuditCounts{}, err
	}
	return benchkit.CountAudit(f, handlerUser, knative.Tasks)
}

// handlerUser is the handler's ServiceAccount in config/knative: the user
// make bench-knative has the API server audit.
const handlerUser = "system:serviceaccount:" + knative.Platform + ":tesk-handler"

// printScale writes the scale run's figures.
func printScale(r *scaleResult) {
	done := r.tasks - r.submitFailed
	secs := r.end.Sub(r.start).Seconds()
	pods := "on the real node"
	if r.played {
		pods = "played by kwok's fake nodes"
	}
	fmt.Printf("\nscale: %d tasks x %d executors (`true`) created through the TES API at once (16 clients), run %s–%s UTC\n",
		r.tasks, scaleExecutors, r.start.UTC().Format("15:04:05"), r.end.UTC().Format("15:04:05"))
	fmt.Printf("  event path %s: %s; the tasks' pods %s\n", r.path.name, r.path.what, pods)
	if r.share > 0 {
		fmt.Printf("  the user's share (QUOTA_TASKS_PER_USER): %d tasks at once, the rest QUEUED until one ends\n", r.share)
	}
	fmt.Printf("  final: %d in %.1f s, %.2f tasks/s; not COMPLETE: %d; creates failed: %d\n", done, secs, float64(done)/secs, r.notComplete, r.submitFailed)
	if len(r.gaps) > 0 {
		g := slices.Clone(r.gaps)
		slices.Sort(g)
		q := func(p float64) time.Duration { return benchkit.Percentile(g, p) }
		fmt.Printf("  step gap (a Job's terminal condition seen -> the next Job seen), %d of %d gaps seen: p50 %s, p90 %s, p99 %s, max %s\n",
			len(g), r.gapsWanted, ms(q(0.50)), ms(q(0.90)), ms(q(0.99)), ms(g[len(g)-1]))
	}
	fmt.Printf("  handler pods: %d seen in all, at most %d running at once; ", r.handlerPods, r.maxLive)
	if r.toZeroErr != nil {
		fmt.Printf("not at zero: %v\n", r.toZeroErr)
	} else {
		fmt.Printf("at zero %.0f s after the last task\n", r.toZero.Seconds())
	}
	fmt.Printf("  CPU (kubelet): the handler container %.2f s, %.2f ms per task; Knative's data plane %.2f s, %.2f ms per task (%d samples failed)\n",
		r.handlerCPU.Seconds(), float64(r.handlerCPU.Milliseconds())/float64(max(done, 1)),
		r.dataPlaneCPU.Seconds(), float64(r.dataPlaneCPU.Milliseconds())/float64(max(done, 1)), r.cpuErrors)
	fmt.Printf("  deliveries the Broker's filter logged as failed: %d; pods of the dead letter sink seen: %d\n", r.failed, r.deadLetterPods)
	switch {
	case r.auditErr != nil:
		fmt.Printf("  handler API requests: audit log: %v\n", r.auditErr)
	case r.audit.Total > 0:
		fmt.Printf("  handler API requests (audit log): %d, %.2f per task; by verb and resource, per task:\n", r.audit.Total, float64(r.audit.Total)/float64(max(done, 1)))
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range r.audit.ByVerb {
				if !yield(k) {
					return
				}
			}
		}) {
			fmt.Printf("    %-28s %8.2f\n", k, float64(r.audit.ByVerb[k])/float64(max(done, 1)))
		}
		twice := 0
		for _, c := range r.audit.JobCreates {
			if c > 1 {
				twice++
			}
		}
		fmt.Printf("    jobs created: %d, created twice: %d, creates answered 409: %d\n", len(r.audit.JobCreates), twice, r.audit.JobCreateConflicts)
	}
	fmt.Printf("  handler pods running (ready) and tasks final, every 30 s:\n")
	var next time.Time
	for _, p := range r.timeline {
		if p.at.Before(next) {
			continue
		}
		next = p.at.Add(30 * time.Second)
		fmt.Printf("    +%5.0f s  %2d (%2d)  %5d\n", p.at.Sub(r.start).Seconds(), p.live, p.ready, p.done)
	}
	if len(r.doneAt) > 0 {
		fmt.Printf("  tasks final per minute:")
		per := map[int]int{}
		last := 0
		for _, t := range r.doneAt {
			m := int(t.Sub(r.start).Minutes())
			per[m]++
			last = max(last, m)
		}
		for m := 0; m <= last; m++ {
			fmt.Printf(" %d", per[m])
		}
		fmt.Println()
	}
}

// printPaths writes the scale runs of several event paths side by side.
func printPaths(rs []*scaleResult) {
	fmt.Printf("\nevent paths side by side (%d tasks each):\n", rs[0].tasks)
	fmt.Printf("  %-10s %8s %9s %9s %9s %6s %10s %10s %7s %7s %6s\n", "path", "tasks/s", "gap p50", "gap p99", "gap max", "pods", "handler", "data pl.", "req", "failed", "twice")
	for _, r := range rs {
		done := max(r.tasks-r.submitFailed, 1)
		p50, p99, top := "-", "-", "-"
		if len(r.gaps) > 0 {
			g := slices.Clone(r.gaps)
			slices.Sort(g)
			p50, p99, top = ms(benchkit.Percentile(g, 0.50)), ms(benchkit.Percentile(g, 0.99)), ms(g[len(g)-1])
		}
		twice := 0
		for _, c := range r.audit.JobCreates {
			if c > 1 {
				twice++
			}
		}
		fmt.Printf("  %-10s %8.2f %9s %9s %9s %6d %7.2f ms %7.2f ms %7.2f %7d %6d\n", r.path.name,
			float64(r.tasks-r.submitFailed)/r.end.Sub(r.start).Seconds(), p50, p99, top, r.maxLive,
			float64(r.handlerCPU.Microseconds())/1000/float64(done), float64(r.dataPlaneCPU.Microseconds())/1000/float64(done),
			float64(r.audit.Total)/float64(done), r.failed, twice)
	}
	fmt.Println("  (tasks/s: final per second of the run; gap: a Job's end seen to the next Job seen; pods: handler pods running at once at most;")
	fmt.Println("   handler, data pl.: CPU per task; req: the handler's API requests per task; failed: deliveries the filter logged failed; twice: jobs created twice)")
}
