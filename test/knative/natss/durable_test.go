//go:build knative

package natss

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/knative"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The durability test's load: tasks of executors, created at once.
const (
	durableTasks     = 50
	durableExecutors = 3
	// durableRounds is how many times each pod of the event path is
	// deleted; durableSettle is the pause after a round's replacements
	// are Ready.
	durableRounds = 2
	durableSettle = 5 * time.Second
	// durableIdle is how long the test waits for a task to move (a new
	// Job, a final state) before it calls the rest stuck.
	durableIdle = 3 * time.Minute
	// adapterTasks are the second phase's tasks, while the
	// ApiServerSource's adapter is deleted, and adapterBudget the part of
	// the test's bound kept for that phase.
	adapterTasks  = 20
	adapterBudget = 4 * time.Minute
)

// TestDurableOnJetStream: config/knative's Broker on the NATS JetStream
// channel (authentication-oidc on, see oidcOn), the tasks' pods played by
// the fake nodes, in two phases.
//
// The events alone: durableTasks tasks of durableExecutors executors
// through the TES API; while they run, the pods of the event path are
// deleted twice (the channel's dispatcher, the Broker's ingress and
// filter, a handler pod; not the ApiServerSource's adapter, see pathPods),
// and still every task ends COMPLETE and no Job is created twice, with the
// sweep's PingSource held to a yearly schedule, so that no sweep makes
// good an event lost.
//
// The adapter: the sweep back on config/knative's schedule, adapterTasks
// more tasks while the ApiServerSource's adapter pod is deleted twice: the
// changes of Jobs while it restarts are never sent (see pathPods), and the
// sweep makes them good: every task COMPLETE, no Job created twice, the
// slowest step up to about the sweep's period.
func TestDurableOnJetStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	fake, err := env.C.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	if len(fake.Items) == 0 {
		t.Fatal("the cluster has no fake nodes to play the tasks' pods (make cluster-up KNATIVE=1 NATS=1 NODES=2)")
	}
	kind, err := env.UseChannel(ctx, knative.JetStreamConfig, false)
	if err != nil {
		t.Fatalf("config/knative's Broker on JetStream: %v", err)
	}
	if err := env.C.PlayPods(ctx, env.Namespaces.Tasks); err != nil {
		t.Fatal(err)
	}
	was, unhold, err := env.HoldSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := true
	t.Cleanup(func() {
		if !held {
			return
		}
		if err := unhold(); err != nil {
			t.Errorf("the sweep's schedule %q not restored: %v", was, err)
		}
	})
	t.Logf("config/knative's Broker on a %s; the pods of %s played by %d fake nodes; the sweep's schedule %q held at %q (%s)",
		kind, env.Namespaces.Tasks, len(fake.Items), was, knative.RareSchedule, time.Since(start).Round(time.Millisecond))

	jobs, err := watchTaskJobs(ctx, env.Namespaces.Tasks)
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.stop()
	api, err := env.TES(ctx, "durable")
	if err != nil {
		t.Fatal(err)
	}

	// The events alone.
	ids, err := createTasks(ctx, api, "durable", durableTasks)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	t.Logf("%d tasks of %d executors created (%s)", len(ids), durableExecutors, time.Since(start).Round(time.Millisecond))
	if err := waitFor(ctx, 3*time.Minute, func() bool { return jobs.count() >= 10 }); err != nil {
		t.Fatalf("10 Jobs of the tasks: %v (%d seen)", err, jobs.count())
	}
	failed := deleteRounds(ctx, t, pathPods(kind), jobs, ids, start, t0)
	deadline, _ := ctx.Deadline()
	settle(ctx, t, api, jobs, ids, start, t0, deadline.Add(-adapterBudget), failed, "the sweep held (every step waits for an event)")
	if t.Failed() {
		for _, ns := range []string{"knative-eventing", env.Namespaces.Platform} {
			t.Logf("restarts in %s: %s", ns, env.Restarts(context.Background(), ns))
		}
		return
	}

	// The adapter, the sweep restored.
	if err := unhold(); err != nil {
		t.Fatalf("the sweep's schedule %q not restored: %v", was, err)
	}
	held = false
	start2 := time.Now()
	before := jobs.count()
	ids2, err := createTasks(ctx, api, "adapter", adapterTasks)
	if err != nil {
		t.Fatal(err)
	}
	t2 := time.Now()
	t.Logf("the sweep's schedule %q restored; %d tasks more of %d executors created (%s)",
		was, len(ids2), durableExecutors, time.Since(start).Round(time.Millisecond))
	if err := waitFor(ctx, 2*time.Minute, func() bool { return jobs.count() >= before+5 }); err != nil {
		t.Fatalf("5 Jobs of the tasks: %v (%d seen)", err, jobs.count()-before)
	}
	failed = deleteRounds(ctx, t, adapterPods(), jobs, ids2, start2, t2)
	settle(ctx, t, api, jobs, ids2, start2, t2, deadline.Add(-30*time.Second), failed, fmt.Sprintf("the sweep on %q", was))
	if t.Failed() {
		t.Logf("restarts in %s: %s", env.Namespaces.Platform, env.Restarts(context.Background(), env.Namespaces.Platform))
	}
	t.Logf("both phases %s", time.Since(start).Round(time.Millisecond))
}

// deleteRounds deletes the targets' pods durableRounds times, each round
// after the replacements of the one before are Ready and durableSettle,
// and returns the deliveries the Broker's filter logged as failed since
// start before each round that deletes the filter's pods (they take their
// log with them).
func deleteRounds(ctx context.Context, t *testing.T, targets []pathTarget, jobs *taskJobs, ids []string, start, t0 time.Time) int {
	t.Helper()
	failed := 0
	filterGoes := slices.ContainsFunc(targets, func(p pathTarget) bool { return p.selector == knative.FilterPods })
	for round := range durableRounds {
		if filterGoes {
			if n, err := env.FailedDeliveries(ctx, start); err != nil {
				t.Logf("the filter's failed deliveries before round %d: %v", round+1, err)
			} else {
				failed += n
			}
		}
		final := finalStates(ctx, ids)
		deleted, err := deletePods(ctx, targets)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d (%s after the creates, %d Jobs seen, %d of %d tasks final): deleted %s",
			round+1, time.Since(t0).Round(time.Millisecond), jobs.countOf(ids), len(final), len(ids), strings.Join(deleted.names(), ", "))
		if err := waitReplaced(ctx, targets, deleted, 3*time.Minute); err != nil {
			t.Fatalf("round %d: %v (restarts in knative-eventing: %s; in %s: %s)", round+1, err,
				env.Restarts(ctx, "knative-eventing"), env.Namespaces.Platform, env.Restarts(ctx, env.Namespaces.Platform))
		}
		t.Logf("round %d: replacements Ready (%s after the creates)", round+1, time.Since(t0).Round(time.Millisecond))
		if err := sleepCtx(ctx, durableSettle); err != nil {
			t.Fatal(err)
		}
	}
	return failed
}

// settle waits until every task of ids is final, or durableIdle passes
// without a Job or a final state more, or deadline; then fails the test
// for each task not COMPLETE and each Job created twice, logs the slowest
// step and the deliveries the Broker's filter logged as failed: since
// start, and failed more that its pods deleted before took with them.
func settle(ctx context.Context, t *testing.T, api *knative.TES, jobs *taskJobs, ids []string, start, t0, deadline time.Time, failed int, sweep string) {
	t.Helper()
	wctx, wcancel := context.WithDeadline(ctx, deadline)
	progress, moved := 0, time.Now()
	_ = waitFor(wctx, time.Hour, func() bool {
		n := len(finalStates(wctx, ids))
		if p := n + jobs.countOf(ids); p != progress {
			progress, moved = p, time.Now()
		}
		return n == len(ids) || time.Since(moved) > durableIdle
	})
	wcancel()
	elapsed := time.Since(t0)

	var stuck []string
	for _, id := range ids {
		v, err := api.Get(ctx, id, "MINIMAL")
		switch {
		case err != nil:
			stuck = append(stuck, fmt.Sprintf("%s: %v; %s", id, err, jobs.step(id)))
		case v.State != tesv1.StateComplete:
			stuck = append(stuck, fmt.Sprintf("%s: %s; %s", id, v.State, jobs.step(id)))
		}
	}
	if len(stuck) > 0 {
		t.Errorf("%d of %d tasks not COMPLETE %s after the creates, %s; none moved for %s or the bound reached:\n  %s",
			len(stuck), len(ids), elapsed.Round(time.Second), sweep, durableIdle, strings.Join(stuck, "\n  "))
	}
	if twice := jobs.twice(); len(twice) > 0 {
		t.Errorf("Jobs created twice (one name, two UIDs): %s", strings.Join(twice, "; "))
	}
	slowest, at, gaps := jobs.slowestStep(ids)
	if n, err := env.FailedDeliveries(ctx, start); err != nil {
		t.Errorf("the filter's failed deliveries: %v", err)
	} else {
		failed += n
	}
	t.Logf("%s: %d of %d tasks COMPLETE %s after the creates; slowest step (a Job's terminal condition seen to its task's next Job seen) %s at %s, of %d steps; deliveries the Broker's filter logged as failed: %d",
		sweep, len(ids)-len(stuck), len(ids), elapsed.Round(time.Millisecond), slowest.Round(time.Millisecond), at, gaps, failed)
}

// pathTarget is a set of pods of the event path that each round deletes.
type pathTarget struct {
	what     string
	ns       string
	selector string // label selector; or
	prefix   string // name prefix
	// kill deletes them without a grace period.
	kill bool
	// optional: none may run (the handler at zero); its replacement is
	// Knative Serving's business, not waited for.
	optional bool
}

// pathPods are the pods of the event path of a Broker on a channel of
// kind: its dispatcher, the Broker's ingress and filter, and the handler.
// They are killed (no grace period) where the sender of what they hold
// retries: the channel delivers to the filter, and the filter to the
// handler, with the Triggers' retries. The ingress is deleted with its
// grace period, as a rollout replaces it, and drains: its senders do not
// retry (the ApiServerSource's adapter sends each change once), whatever
// the channel behind it. The ApiServerSource's adapter is not deleted:
// Eventing v0.50.0's sends nothing for what it lists when it starts (its
// store's Replace does nothing), so the changes of Jobs while it restarts
// are never sent, whatever the channel, and only the sweep makes them good
// (a first run that deleted it too left 9 of 50 tasks after a Job that had
// ended): the second phase deletes it (adapterPods), the sweep restored.
func pathPods(kind string) []pathTarget {
	dispatcher := jetStreamDispatcherPods
	if kind != "NatsJetStreamChannel" {
		dispatcher = inMemoryDispatcherPods
	}
	return []pathTarget{
		{what: "handler", ns: knative.Platform, selector: "serving.knative.dev/service=tesk-handler", kill: true, optional: true},
		{what: "filter", ns: "knative-eventing", selector: knative.FilterPods, kill: true},
		{what: "dispatcher", ns: "knative-eventing", selector: dispatcher, kill: true},
		{what: "ingress", ns: "knative-eventing", selector: "eventing.knative.dev/brokerRole=ingress"},
	}
}

// adapterPods is the pod of config/knative's ApiServerSource's adapter,
// killed: what it had not sent of the Jobs' changes is lost, and what
// changes while it restarts is never sent (see pathPods).
func adapterPods() []pathTarget {
	return []pathTarget{{what: "adapter", ns: knative.Platform, prefix: "apiserversource-", kill: true}}
}

// pods lists the target's pods that are not being deleted.
func (p pathTarget) pods(ctx context.Context) ([]corev1.Pod, error) {
	list, err := env.C.Client.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: p.selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil && strings.HasPrefix(pod.Name, p.prefix) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// deletedPods are a round's deleted pods by target.
type deletedPods map[string][]string

func (d deletedPods) names() []string {
	var out []string
	for what, names := range d {
		out = append(out, fmt.Sprintf("%s %v", what, names))
	}
	slices.Sort(out)
	return out
}

// deletePods deletes every target's pods, one target after the other.
func deletePods(ctx context.Context, targets []pathTarget) (deletedPods, error) {
	deleted := deletedPods{}
	for _, p := range targets {
		pods, err := p.pods(ctx)
		if err != nil {
			return nil, err
		}
		if len(pods) == 0 && !p.optional {
			return nil, fmt.Errorf("no %s pod (%s %s%s)", p.what, p.ns, p.selector, p.prefix)
		}
		opts := metav1.DeleteOptions{}
		if p.kill {
			zero := int64(0)
			opts.GracePeriodSeconds = &zero
		}
		for _, pod := range pods {
			if err := env.C.Client.CoreV1().Pods(p.ns).Delete(ctx, pod.Name, opts); err != nil {
				return nil, fmt.Errorf("delete %s pod %s: %w", p.what, pod.Name, err)
			}
			deleted[p.what] = append(deleted[p.what], pod.Name)
		}
	}
	return deleted, nil
}

// waitReplaced waits until every target but the optional ones has a Ready
// pod that the round did not delete.
func waitReplaced(ctx context.Context, targets []pathTarget, deleted deletedPods, timeout time.Duration) error {
	for _, p := range targets {
		if p.optional {
			continue
		}
		why := ""
		err := waitFor(ctx, timeout, func() bool {
			pods, err := p.pods(ctx)
			why = fmt.Sprint(err)
			for _, pod := range pods {
				if !slices.Contains(deleted[p.what], pod.Name) && podReady(&pod) {
					return true
				}
				why = fmt.Sprintf("pod %s %s", pod.Name, pod.Status.Phase)
			}
			return false
		})
		if err != nil {
			return fmt.Errorf("no Ready %s pod in place of %v: %v (last: %s)", p.what, deleted[p.what], err, why)
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// createTasks creates n tasks of durableExecutors executors (`true`),
// named prefix-NN, at once through the TES API.
func createTasks(ctx context.Context, api *knative.TES, prefix string, n int) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ids[i], errs[i] = api.Create(ctx, knative.RepeatTask(fmt.Sprintf("%s-%02d", prefix, i), durableExecutors, "true"))
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("create task %d: %w", i, err)
		}
	}
	return ids, nil
}

// finalStates is the final state of each task of ids that has one, from
// the anchors' label.
func finalStates(ctx context.Context, ids []string) map[string]string {
	out := map[string]string{}
	list, err := env.C.Client.CoreV1().ConfigMaps(env.Namespaces.Tasks).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelState})
	if err != nil {
		return out
	}
	for _, a := range list.Items {
		if s := a.Labels[taskmeta.LabelState]; s != "" && slices.Contains(ids, a.Name) {
			out[a.Name] = s
		}
	}
	return out
}

// taskJobs records, as a watch sees them, each Job of the tasks: its
// UIDs, its task, when it was first seen and when its terminal condition
// was.
type taskJobs struct {
	mu       sync.Mutex
	uids     map[string][]types.UID
	task     map[string]string
	added    map[string]time.Time
	terminal map[string]time.Time
	status   map[string]taskmeta.JobStatus
	stop     func()
}

// watchTaskJobs follows the tasks' Jobs in ns from now on (a list, then a
// watch that client-go's RetryWatcher takes again where it left off).
func watchTaskJobs(ctx context.Context, ns string) (*taskJobs, error) {
	jobsAPI := env.C.Client.BatchV1().Jobs(ns)
	opts := metav1.ListOptions{LabelSelector: taskmeta.LabelTask}
	list, err := jobsAPI.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	j := &taskJobs{uids: map[string][]types.UID{}, task: map[string]string{}, added: map[string]time.Time{},
		terminal: map[string]time.Time{}, status: map[string]taskmeta.JobStatus{}}
	now := time.Now()
	for i := range list.Items {
		j.see(&list.Items[i], now)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = opts.LabelSelector
			return jobsAPI.Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, err
	}
	go func() {
		for ev := range w.ResultChan() {
			if job, ok := ev.Object.(*batchv1.Job); ok {
				j.see(job, time.Now())
			}
		}
	}()
	j.stop = w.Stop
	return j, nil
}

func (j *taskJobs) see(job *batchv1.Job, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !slices.Contains(j.uids[job.Name], job.UID) {
		j.uids[job.Name] = append(j.uids[job.Name], job.UID)
	}
	if _, ok := j.added[job.Name]; !ok {
		j.added[job.Name] = now
		j.task[job.Name] = job.Labels[taskmeta.LabelTask]
	}
	s := taskmeta.StatusOf(job)
	j.status[job.Name] = s
	if _, ok := j.terminal[job.Name]; !ok && s != taskmeta.JobRunning {
		j.terminal[job.Name] = now
	}
}

func (j *taskJobs) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.added)
}

// countOf is how many Jobs of the tasks of ids were seen.
func (j *taskJobs) countOf(ids []string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, task := range j.task {
		if slices.Contains(ids, task) {
			n++
		}
	}
	return n
}

// twice names the Jobs seen with more than one UID.
func (j *taskJobs) twice() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for name, uids := range j.uids {
		if len(uids) > 1 {
			out = append(out, fmt.Sprintf("%s %v", name, uids))
		}
	}
	slices.Sort(out)
	return out
}

// ofTask is the task's Jobs in the order they were seen.
func (j *taskJobs) ofTask(id string) []string {
	var out []string
	for name, task := range j.task {
		if task == id {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return j.added[a].Compare(j.added[b]) })
	return out
}

// slowestStep is the longest time from a Job's terminal condition seen to
// its task's next Job seen, among the tasks of ids, the Job it ended, and
// how many such steps were seen.
func (j *taskJobs) slowestStep(ids []string) (time.Duration, string, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var slowest time.Duration
	at, n := "", 0
	for _, task := range ids {
		names := j.ofTask(task)
		for i := 1; i < len(names); i++ {
			done := j.terminal[names[i-1]]
			if done.IsZero() {
				continue
			}
			n++
			if d := j.added[names[i]].Sub(done); d > slowest {
				slowest, at = d, names[i-1]
			}
		}
	}
	return slowest, at, n
}

// step says where a task is: its Jobs seen and the last one's status.
func (j *taskJobs) step(id string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	names := j.ofTask(id)
	if len(names) == 0 {
		return "no Job seen"
	}
	last := names[len(names)-1]
	s := fmt.Sprintf("%d Jobs seen, the last %s %s", len(names), last, j.status[last])
	if t := j.terminal[last]; !t.IsZero() {
		s += fmt.Sprintf(" since %s, no next Job", time.Since(t).Round(time.Second))
	}
	return s
}

// waitFor polls cond every half second until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s", timeout)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
