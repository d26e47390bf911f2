package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// statesHeard records what a StatePublisher was given; fail, while set,
// fails every publication.
type statesHeard struct {
	mu   sync.Mutex
	got  []steps.StateChange
	fail error
	// tries counts every publication, failed or not.
	tries int
	// onFail, if set, runs at each failed publication.
	onFail func()
}

func (h *statesHeard) PublishState(_ context.Context, ch steps.StateChange) error {
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
	api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(1, taskfixtures.WithInput), taskfixtures.AnchorWith(nil, taskmeta.AnnotationCreator, "alice")))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	heard := &statesHeard{}
	r := testRunner(api, cfg)
	r.States = heard
	ctx := testCtx(t)
	if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-submit"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-submit-again"); err != nil {
		t.Fatal(err)
	}
	setJob := func(j *batchv1.Job) {
		t.Helper()
		cur, err := api.BatchV1().Jobs(taskfixtures.Namespace).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("job %s: %v", j.Name, err)
		}
		cur.Status = j.Status
		if err := api.Tracker().Update(jobsResource, cur, taskfixtures.Namespace); err != nil {
			t.Fatal(err)
		}
	}
	setJob(taskfixtures.Completed(taskmeta.PartInputsFiler))
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-inputs", Job: taskmeta.ObjectName(taskfixtures.TaskName, taskmeta.PartInputsFiler)}); err != nil {
		t.Fatal(err)
	}
	setJob(taskfixtures.Failed("ex-00"))
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-ex", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-ex-again", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")}); err != nil {
		t.Fatal(err)
	}
	want := []string{"QUEUED>INITIALIZING", "INITIALIZING>RUNNING", "RUNNING>EXECUTOR_ERROR"}
	if got := heard.heard(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("told %v, want %v", got, want)
	}
	last := heard.got[2]
	if last.Owner != "alice" || !last.Time.Equal(taskfixtures.Now) || last.Reason == "" || last.Reason != api.anchor().Annotations[taskmeta.AnnotationReason] {
		t.Errorf("the end told as %+v; want alice's, at %v, with the anchor's reason %q", last, taskfixtures.Now, api.anchor().Annotations[taskmeta.AnnotationReason])
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
				api.inject("delete", "jobs", taskmeta.ObjectName(taskfixtures.TaskName, "ex-00"), errDenied, 0)
			}
			heard := &statesHeard{}
			r := testRunner(api, steps.DefaultConfig())
			r.States = heard
			for _, ev := range []string{"ev-cancel", "ev-deleted", "ev-later"} {
				if _, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: ev}); err != nil {
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
			prog := taskfixtures.ProgressOf([]string{"ex-00", "ex-01"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
			api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.Cancelled(taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL))), owned(taskfixtures.Completed("ex-00")))
			heard := &statesHeard{}
			if down {
				heard.fail = errors.New("503")
			}
			r := testRunner(api, steps.DefaultConfig())
			r.States = heard
			res, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-cancel"})
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
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	heard := &statesHeard{fail: errors.New("503 Service Unavailable")}
	r := testRunner(api, cfg)
	r.States = heard
	ctx := testCtx(t)
	owe := `[{"old":"QUEUED","new":"RUNNING","time":"2025-03-01T11:00:00Z"}]`
	// A change owed from before: the end queues behind it, untried.
	a := api.anchor()
	a.Annotations[taskmeta.AnnotationStateEventsOwed] = owe
	a.Annotations[taskmeta.AnnotationTags] = `{"tesk.notify_url":"https://hooks.example.org/t"}`
	if err := api.Tracker().Update(configMapsResource, a, taskfixtures.Namespace); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-done", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")})
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
	if _, err := r.Sweep(ctx, taskfixtures.Namespace, "sweep-1", newMetadataFake(t, api)); err != nil {
		t.Fatal(err)
	}
	if got := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; got != wantOwed {
		t.Fatalf("after a sweep whose sink failed, owed %s; want it kept", got)
	}
	heard.setFail(nil)
	if _, err := r.Sweep(ctx, taskfixtures.Namespace, "sweep-2", newMetadataFake(t, api)); err != nil {
		t.Fatal(err)
	}
	if got, want := heard.heard(), []string{"QUEUED>RUNNING", "RUNNING>COMPLETE"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the sweep told %v, want %v", got, want)
	}
	if end := heard.got[1]; !end.Time.Equal(taskfixtures.Now) || end.Reason != api.anchor().Annotations[taskmeta.AnnotationReason] {
		t.Errorf("the end told as %+v, want at %v with the anchor's reason", end, taskfixtures.Now)
	}
	for _, ch := range heard.got {
		if ch.NotifyURL != "https://hooks.example.org/t" {
			t.Errorf("the sweep told %s>%s naming the address %q, want the task's tag's", ch.Old, ch.New, ch.NotifyURL)
		}
	}
	if got, ok := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Errorf("owed %s after the sweep told all", got)
	}
	if _, err := r.Sweep(ctx, taskfixtures.Namespace, "sweep-3", newMetadataFake(t, api)); err != nil {
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
		_, err := api.CoreV1().ConfigMaps(taskfixtures.Namespace).Patch(context.Background(), taskfixtures.TaskName, types.MergePatchType, []byte(`{"metadata":{"labels":{"other":"writer"}}}`), metav1.PatchOptions{})
		if err != nil {
			t.Error(err)
		}
	}}
	r := testRunner(api, steps.DefaultConfig())
	r.States = heard
	res, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-done", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")})
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
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	// The final state's patch goes through; the failed publication makes
	// the next patch (the record) refused.
	heard := &statesHeard{fail: errors.New("dial tcp: connection refused"), onFail: func() { api.inject("patch", "configmaps", taskfixtures.TaskName, errDenied, 0) }}
	r := testRunner(api, cfg)
	r.States = heard
	res, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-done", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")})
	if err != nil || res.Ended != tesv1.StateComplete {
		t.Fatalf("step: %+v, %v; want it to end the task COMPLETE", res, err)
	}
	if _, ok := api.anchor().Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Error("the record was written though its patch was refused")
	}
}

var jobsResource = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
