package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Behaviour §5.8: the state changes a step records, decided from the anchor
// before it and the plan, as Decide makes it from what is on the cluster.
func TestStateChanges(t *testing.T) {
	full := taskWith(2, withInput, withOutput)
	at := func(started ...string) *taskmeta.Progress {
		p := progressOf(fullParts, "ev-1", ago(time.Minute), started...)
		return &p
	}
	done := func(p *taskmeta.Progress, parts ...string) *taskmeta.Progress {
		q := p.WithDone(parts...)
		return &q
	}
	owned := func(m map[string]string) func(o Observed) Observed {
		return func(o Observed) Observed {
			for k, v := range m {
				if k == taskmeta.LabelCreator {
					o.Anchor.Labels[k] = v
				} else {
					o.Anchor.Annotations[k] = v
				}
			}
			return o
		}
	}
	for _, c := range []struct {
		name string
		obs  Observed
		// started and ended: "OLD>NEW", or "" for none.
		started, ended string
		// notify: the address every change names.
		notify string
		reason string
		owner  string
	}{
		{name: "submitted with inputs: initializing", obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: full}, started: "QUEUED>INITIALIZING"},
		{name: "submitted without inputs, outputs or volumes: running", obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1)}, started: "QUEUED>RUNNING"},
		{name: "submitted with outputs only: the volume and the first executor start together", obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, withOutput)}, started: "QUEUED>RUNNING"},
		{name: "a submission whose task is not read yet: nothing", obs: Observed{Event: "ev-1", Anchor: anchorWith(nil)}},
		{name: "a redelivered submission: nothing", obs: Observed{Event: "ev-1", Anchor: anchorWith(at(taskmeta.PartPVC, taskmeta.PartInputsFiler)), Spec: full, Jobs: jobsOf(running(taskmeta.PartInputsFiler))}},
		{name: "the inputs filer completed: running", obs: Observed{Event: "ev-2", Anchor: anchorWith(at(taskmeta.PartPVC, taskmeta.PartInputsFiler)), Jobs: jobsOf(completed(taskmeta.PartInputsFiler))}, started: "INITIALIZING>RUNNING"},
		{name: "the first executor completed: the second starts, still running", obs: Observed{Event: "ev-3", Anchor: anchorWith(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.PartInputsFiler)), Jobs: jobsOf(completed("ex-00"))}},
		{name: "the last executor completed: the outputs filer starts, still running", obs: Observed{Event: "ev-4", Anchor: anchorWith(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01"), taskmeta.PartInputsFiler, "ex-00")), Jobs: jobsOf(completed("ex-01"))}},
		{name: "the outputs filer completed: complete", obs: Observed{Event: "ev-5", Anchor: anchorWith(done(at(fullParts...), taskmeta.PartInputsFiler, "ex-00", "ex-01")), Jobs: jobsOf(completed(taskmeta.PartOutputsFiler))}, ended: "RUNNING>COMPLETE"},
		{name: "an executor failed: executor error, with why", obs: Observed{Event: "ev-3", Anchor: anchorWith(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.PartInputsFiler)), Jobs: jobsOf(failed("ex-00"))}, ended: "RUNNING>EXECUTOR_ERROR", reason: "Job 'task-1234abcd-ex-00' failed: Test: FailureTarget"},
		{name: "the inputs filer failed: system error", obs: Observed{Event: "ev-2", Anchor: anchorWith(at(taskmeta.PartPVC, taskmeta.PartInputsFiler)), Jobs: jobsOf(failed(taskmeta.PartInputsFiler))}, ended: "INITIALIZING>SYSTEM_ERROR", reason: "Job 'task-1234abcd-inputs-filer' failed: Test: FailureTarget"},
		{name: "a task refused at its submission: system error", obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, func(t *taskspec.Task) {
			t.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/data/*/out.txt"}}
		})}, ended: "QUEUED>SYSTEM_ERROR", reason: "path_prefix"},
		{name: "cancelled while an executor runs: its job deleted, canceling", obs: Observed{Event: "ev-c", Anchor: cancelled(anchorWith(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.PartInputsFiler))), Jobs: jobsOf(running("ex-00"))}, started: "RUNNING>CANCELING"},
		{name: "cancelled, the deleted job still going: nothing more", obs: Observed{Event: "ev-c2", Anchor: cancelled(anchorWith(ended(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.PartInputsFiler), "ex-00", "Task cancelled"))), Jobs: jobsOf(deleting(running("ex-00")))}},
		{name: "cancelled, the deleted job gone: canceled", obs: Observed{Event: "ev-c3", Anchor: cancelled(anchorWith(ended(done(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.PartInputsFiler), "ex-00", "Task cancelled"))), Jobs: jobsOf()}, ended: "CANCELING>CANCELED", reason: "Task cancelled"},
		{name: "cancelled between two jobs: canceling and canceled at once", obs: Observed{Event: "ev-c", Anchor: cancelled(anchorWith(at(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))), Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failed("ex-00"))}, ended: "RUNNING>CANCELING CANCELING>CANCELED", reason: "Task cancelled"},
		{name: "cancelled before it started: canceling and canceled at once", obs: Observed{Event: "ev-c", Anchor: cancelled(anchorWith(nil)), Spec: full}, ended: "QUEUED>CANCELING CANCELING>CANCELED", reason: "Task cancelled"},
		{name: "cancelled after its last step passed: complete, never canceling", obs: Observed{Event: "ev-c", Anchor: cancelled(anchorWith(done(at(fullParts...), taskmeta.PartInputsFiler, "ex-00", "ex-01"))), Jobs: jobsOf(completed(taskmeta.PartOutputsFiler))}, ended: "RUNNING>COMPLETE"},
		{name: "an ended task: nothing", obs: Observed{Event: "ev-9", Anchor: anchorWith(at(fullParts...), taskmeta.AnnotationState, tesv1.StateComplete)}},
		{name: "a progress record that does not parse: unknown to system error", obs: Observed{Event: "ev-9", Anchor: anchorWith(nil, taskmeta.AnnotationProgress, "{")}, ended: "UNKNOWN>SYSTEM_ERROR", reason: "unreadable"},
		{name: "the owner is the creator's subject", obs: owned(map[string]string{taskmeta.AnnotationCreator: "alice@example.org", taskmeta.LabelCreator: "alice-example-org"})(Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1)}),
			started: "QUEUED>RUNNING", owner: "alice@example.org"},
		{name: "the owner of a task the TESK API wrote is its label", obs: owned(map[string]string{taskmeta.LabelCreator: "user-1"})(Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1)}),
			started: "QUEUED>RUNNING", owner: "user-1"},
		{name: "a task whose tag names an address: each change names it", obs: owned(map[string]string{taskmeta.AnnotationTags: `{"tesk.notify_url":"https://hooks.example.org/t1"}`})(Observed{Event: "ev-c", Anchor: cancelled(anchorWith(nil)), Spec: full}),
			ended: "QUEUED>CANCELING CANCELING>CANCELED", reason: "Task cancelled", notify: "https://hooks.example.org/t1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(c.obs, DefaultConfig(), t0)
			started, ended := stateChanges(c.obs.Anchor, plan)
			var all []StateChange
			if started != nil {
				all = append(all, *started)
			}
			all = append(all, ended...)
			show := func(chs []StateChange) string {
				var out []string
				for _, ch := range chs {
					out = append(out, ch.Old+">"+ch.New)
				}
				return strings.Join(out, " ")
			}
			if show(all[:len(all)-len(ended)]) != c.started || show(ended) != c.ended {
				t.Fatalf("changes %q and %q, want %q and %q (plan: state %s, progress %v, final %v)", show(all[:len(all)-len(ended)]), show(ended), c.started, c.ended, plan.State, plan.Progress, plan.Final)
			}
			for i, ch := range all {
				if ch.NotifyURL != c.notify {
					t.Errorf("change %s>%s names the address %q, want %q", ch.Old, ch.New, ch.NotifyURL, c.notify)
				}
				if ch.Task != testTask || ch.Namespace != testNS || ch.Owner != c.owner {
					t.Errorf("change of %s/%s by %q, want %s/%s by %q", ch.Namespace, ch.Task, ch.Owner, testNS, testTask, c.owner)
				}
				if !tesv1.IsFinal(ch.New) {
					if ch.Reason != "" {
						t.Errorf("a state passed through has a reason: %q", ch.Reason)
					}
					continue
				}
				if i != len(all)-1 || !strings.Contains(strings.ToLower(ch.Reason), strings.ToLower(c.reason)) || (c.reason == "" && ch.Reason != "") {
					t.Errorf("final change %d of %d, reason %q; want the last, with %q", i+1, len(all), ch.Reason, c.reason)
				}
			}
		})
	}
}

// The state a task's anchor records, which the view shows once no step is
// pending.
func TestRecordedState(t *testing.T) {
	at := func(parts []string, started ...string) metav1.ObjectMeta {
		p := progressOf(parts, "ev", ago(time.Minute), started...)
		return anchorWith(&p)
	}
	for _, c := range []struct {
		name   string
		anchor metav1.ObjectMeta
		want   string
	}{
		{"no progress", anchorWith(nil), tesv1.StateQueued},
		{"the parts recorded, none started", at(fullParts), tesv1.StateQueued},
		{"the volume and the inputs filer", at(fullParts, taskmeta.PartPVC, taskmeta.PartInputsFiler), tesv1.StateInitializing},
		{"the first executor", at(fullParts, taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), tesv1.StateRunning},
		{"the outputs filer", at(fullParts, fullParts...), tesv1.StateRunning},
		{"no volume: the first executor", at([]string{"ex-00"}, "ex-00"), tesv1.StateRunning},
		{"ended", anchorWith(nil, taskmeta.AnnotationState, tesv1.StateExecutorError), tesv1.StateExecutorError},
		{"unreadable", anchorWith(nil, taskmeta.AnnotationProgress, "not json"), "UNKNOWN"},
		{"labelled cancelled, not yet taken up", cancelled(at(fullParts, taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")), tesv1.StateRunning},
		{"a cancel taken up", cancelled(cancelTakenUp()), tesv1.StateCanceling},
		{"a part ended by the service, not cancelled", cancelTakenUp(), tesv1.StateRunning},
	} {
		if got := RecordedState(c.anchor); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// ended is a progress record with a part the service ended.
func ended(p *taskmeta.Progress, part, reason string) *taskmeta.Progress {
	q := p.WithEnded(part, reason)
	return &q
}

// cancelTakenUp is an anchor whose running executor a cancel step ended.
func cancelTakenUp() metav1.ObjectMeta {
	p := progressOf(fullParts, "ev", ago(time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")
	return anchorWith(ended(&p, "ex-00", cancelledReason))
}

// statesHeard records what a StatePublisher was given; fail, while set,
// fails every publication.
type statesHeard struct {
	mu   sync.Mutex
	got  []StateChange
	fail error
	// tries counts every publication, failed or not.
	tries int
	// onFail, if set, runs at each failed publication.
	onFail func()
}

func (h *statesHeard) PublishState(_ context.Context, ch StateChange) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if h.fail != nil {
		if h.onFail != nil {
			h.onFail()
		}
		return h.fail
	}
	h.got = append(h.got, ch)
	return nil
}

func (h *statesHeard) heard() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ch := range h.got {
		out = append(out, ch.Old+">"+ch.New)
	}
	return out
}

func (h *statesHeard) setFail(err error) {
	h.mu.Lock()
	h.fail = err
	h.mu.Unlock()
}

// Behaviour §5.8: a task's steps tell each state they record, once, after
// the write; an event of the task that records nothing tells nothing.
func TestStepsTellTheirStateChanges(t *testing.T) {
	api := newFakeAPI(t, anchorObject(taskWith(1, withInput), anchorWith(nil, taskmeta.AnnotationCreator, "alice")))
	cfg := DefaultConfig()
	cfg.Namespace = testNS
	heard := &statesHeard{}
	r := testRunner(api, cfg)
	r.States = heard
	ctx := testCtx(t)
	if _, err := r.Submit(ctx, testNS, testTask, nil, "ev-submit"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(ctx, testNS, testTask, nil, "ev-submit-again"); err != nil {
		t.Fatal(err)
	}
	setJob := func(j *batchv1.Job) {
		t.Helper()
		cur, err := api.BatchV1().Jobs(testNS).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("job %s: %v", j.Name, err)
		}
		cur.Status = j.Status
		if err := api.Tracker().Update(jobsResource, cur, testNS); err != nil {
			t.Fatal(err)
		}
	}
	setJob(completed(taskmeta.PartInputsFiler))
	if _, err := r.Reconcile(ctx, testNS, testTask, Options{Event: "ev-inputs", Job: taskmeta.ObjectName(testTask, taskmeta.PartInputsFiler)}); err != nil {
		t.Fatal(err)
	}
	setJob(failed("ex-00"))
	if _, err := r.Reconcile(ctx, testNS, testTask, Options{Event: "ev-ex", Job: taskmeta.ObjectName(testTask, "ex-00")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, testNS, testTask, Options{Event: "ev-ex-again", Job: taskmeta.ObjectName(testTask, "ex-00")}); err != nil {
		t.Fatal(err)
	}
	want := []string{"QUEUED>INITIALIZING", "INITIALIZING>RUNNING", "RUNNING>EXECUTOR_ERROR"}
	if got := heard.heard(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("told %v, want %v", got, want)
	}
	last := heard.got[2]
	if last.Owner != "alice" || !last.Time.Equal(t0) || last.Reason == "" || last.Reason != api.anchor().Annotations[taskmeta.AnnotationReason] {
		t.Errorf("the end told as %+v; want alice's, at %v, with the anchor's reason %q", last, t0, api.anchor().Annotations[taskmeta.AnnotationReason])
	}
	if _, ok := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Error("changes told are recorded as owed")
	}
}

// Behaviour §5.8: a cancelled task is told CANCELING when a step takes the
// cancel up (its running job deleted), then CANCELED; a cancel whose job's
// deletion is rejected the same.
func TestCancelIsToldCancelingThenCanceled(t *testing.T) {
	for _, rejected := range []bool{false, true} {
		t.Run(fmt.Sprintf("deletion rejected %v", rejected), func(t *testing.T) {
			api := newFakeAPI(t, cancelledTask()...)
			if rejected {
				api.inject("delete", "jobs", taskmeta.ObjectName(testTask, "ex-00"), errDenied, 0)
			}
			heard := &statesHeard{}
			r := testRunner(api, DefaultConfig())
			r.States = heard
			for _, ev := range []string{"ev-cancel", "ev-deleted", "ev-later"} {
				if _, err := r.Reconcile(testCtx(t), testNS, testTask, Options{Event: ev}); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := heard.heard(), []string{"RUNNING>CANCELING", "CANCELING>CANCELED"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("told %v, want %v", got, want)
			}
		})
	}
	// Cancelled between two executors: both told by the one step; and
	// when the sink is down, both owed, in order.
	for _, down := range []bool{false, true} {
		t.Run(fmt.Sprintf("no job running, sink down %v", down), func(t *testing.T) {
			prog := progressOf([]string{"ex-00", "ex-01"}, "ev-0", ago(time.Hour), "ex-00")
			api := newFakeAPI(t, anchorObject(taskWith(2), cancelled(anchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL))), owned(completed("ex-00")))
			heard := &statesHeard{}
			if down {
				heard.fail = errors.New("503")
			}
			r := testRunner(api, DefaultConfig())
			r.States = heard
			res, err := r.Reconcile(testCtx(t), testNS, testTask, Options{Event: "ev-cancel"})
			if err != nil || res.Ended != tesv1.StateCanceled {
				t.Fatalf("%+v, %v; want the task CANCELED", res, err)
			}
			owed := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]
			if !down {
				if got, want := heard.heard(), []string{"RUNNING>CANCELING", "CANCELING>CANCELED"}; fmt.Sprint(got) != fmt.Sprint(want) || owed != "" {
					t.Errorf("told %v, owed %q; want %v, none owed", got, owed, want)
				}
				return
			}
			if want := `[{"old":"RUNNING","new":"CANCELING","time":"2025-03-01T12:00:00Z"},{"old":"CANCELING","new":"CANCELED","time":"2025-03-01T12:00:00Z"}]`; owed != want || heard.tries != 1 {
				t.Errorf("owed %s after %d tries\nwant %s after 1", owed, heard.tries, want)
			}
		})
	}
}

// Behaviour §5.8: a change that cannot be told fails nothing: the step
// succeeds, the anchor records the change as owed; later changes queue
// behind it; the sweep tells them, in order, once the sink takes them, and
// removes the record.
func TestUntoldStateChangesAreOwedAndToldBySweep(t *testing.T) {
	api := newFakeAPI(t, completedTask()...)
	cfg := DefaultConfig()
	cfg.Namespace = testNS
	heard := &statesHeard{fail: errors.New("503 Service Unavailable")}
	r := testRunner(api, cfg)
	r.States = heard
	ctx := testCtx(t)
	owe := `[{"old":"QUEUED","new":"RUNNING","time":"2025-03-01T11:00:00Z"}]`
	// A change owed from before: the end queues behind it, untried.
	a := api.anchor()
	a.Annotations[taskmeta.AnnotationStateEventsOwed] = owe
	a.Annotations[taskmeta.AnnotationTags] = `{"tesk.notify_url":"https://hooks.example.org/t"}`
	if err := api.Tracker().Update(configMapsResource, a, testNS); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, testNS, testTask, Options{Event: "ev-done", Job: taskmeta.ObjectName(testTask, "ex-00")})
	if err != nil || res.Ended != tesv1.StateComplete {
		t.Fatalf("step: %+v, %v; want it to end the task COMPLETE whatever the sink", res, err)
	}
	if heard.tries != 0 {
		t.Errorf("%d publications while a change was owed, want none", heard.tries)
	}
	wantOwed := `[{"old":"QUEUED","new":"RUNNING","time":"2025-03-01T11:00:00Z"},{"old":"RUNNING","new":"COMPLETE","time":"2025-03-01T12:00:00Z"}]`
	if got := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; got != wantOwed {
		t.Fatalf("owed %s\nwant %s", got, wantOwed)
	}

	// The sink still fails: the sweep keeps the record.
	if _, err := r.Sweep(ctx, testNS, "sweep-1", newMetadataFake(t, api)); err != nil {
		t.Fatal(err)
	}
	if got := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; got != wantOwed {
		t.Fatalf("after a sweep whose sink failed, owed %s; want it kept", got)
	}
	heard.setFail(nil)
	if _, err := r.Sweep(ctx, testNS, "sweep-2", newMetadataFake(t, api)); err != nil {
		t.Fatal(err)
	}
	if got, want := heard.heard(), []string{"QUEUED>RUNNING", "RUNNING>COMPLETE"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the sweep told %v, want %v", got, want)
	}
	if end := heard.got[1]; !end.Time.Equal(t0) || end.Reason != api.anchor().Annotations[taskmeta.AnnotationReason] {
		t.Errorf("the end told as %+v, want at %v with the anchor's reason", end, t0)
	}
	for _, ch := range heard.got {
		if ch.NotifyURL != "https://hooks.example.org/t" {
			t.Errorf("the sweep told %s>%s naming the address %q, want the task's tag's", ch.Old, ch.New, ch.NotifyURL)
		}
	}
	if got, ok := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Errorf("owed %s after the sweep told all", got)
	}
	if _, err := r.Sweep(ctx, testNS, "sweep-3", newMetadataFake(t, api)); err != nil {
		t.Fatal(err)
	}
	if n := len(heard.heard()); n != 2 {
		t.Errorf("%d changes told after a third sweep, want the 2", n)
	}
}

// A change that cannot be told while another writer changes the anchor is
// recorded on a fresh read.
func TestUntoldStateChangeRecordedOnAFreshRead(t *testing.T) {
	api := newFakeAPI(t, completedTask()...)
	heard := &statesHeard{fail: errors.New("503"), onFail: func() {
		_, err := api.CoreV1().ConfigMaps(testNS).Patch(context.Background(), testTask, types.MergePatchType, []byte(`{"metadata":{"labels":{"other":"writer"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Error(err)
		}
	}}
	r := testRunner(api, DefaultConfig())
	r.States = heard
	res, err := r.Reconcile(testCtx(t), testNS, testTask, Options{Event: "ev-done", Job: taskmeta.ObjectName(testTask, "ex-00")})
	if err != nil || res.Ended != tesv1.StateComplete {
		t.Fatalf("step: %+v, %v; want it to end the task COMPLETE", res, err)
	}
	a := api.anchor()
	if want := `[{"old":"RUNNING","new":"COMPLETE","time":"2025-03-01T12:00:00Z"}]`; a.Annotations[taskmeta.AnnotationStateEventsOwed] != want || a.Labels["other"] != "writer" {
		t.Errorf("owed %q, labels %v; want %s beside the other writer's label", a.Annotations[taskmeta.AnnotationStateEventsOwed], a.Labels, want)
	}
}

// A change that cannot be told while the anchor cannot record it either is
// logged as lost; the step still succeeds.
func TestUntoldStateChangeThatCannotBeRecorded(t *testing.T) {
	api := newFakeAPI(t, completedTask()...)
	cfg := DefaultConfig()
	cfg.Namespace = testNS
	// The final state's patch goes through; the failed publication makes
	// the next patch (the record) refused.
	heard := &statesHeard{fail: errors.New("dial tcp: connection refused"), onFail: func() { api.inject("patch", "configmaps", testTask, errDenied, 0) }}
	r := testRunner(api, cfg)
	r.States = heard
	res, err := r.Reconcile(testCtx(t), testNS, testTask, Options{Event: "ev-done", Job: taskmeta.ObjectName(testTask, "ex-00")})
	if err != nil || res.Ended != tesv1.StateComplete {
		t.Fatalf("step: %+v, %v; want it to end the task COMPLETE", res, err)
	}
	if _, ok := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Error("the record was written though its patch was refused")
	}
}

var jobsResource = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
