package steps

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			started, ended := StateChanges(c.obs.Anchor, plan)
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
