package steps

import (
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The policies of Decide, each with its own table. The cases cite
// docs/behaviour.md.

func endedAt(p *taskmeta.Progress, state string, at time.Time, kv ...string) metav1.ObjectMeta {
	return anchorWith(p, append([]string{taskmeta.AnnotationState, state, taskmeta.AnnotationEnded, at.Format(time.RFC3339)}, kv...)...)
}

func TestEndedTaskPolicy(t *testing.T) {
	full := progressOf(fullParts, "ev-old", ago(2*time.Hour), fullParts...)
	runDecideCases(t, []decideCase{
		{
			name:    "behaviour §4.2: a task that ended its TTL ago is deleted",
			obs:     Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateComplete, ago(time.Hour), taskmeta.AnnotationTTL, "3600")},
			actions: []Action{act(DeleteTask, "")},
			state:   tesv1.StateComplete,
		},
		{
			name:  "behaviour §4.2: a task that ended less than its TTL ago is kept",
			obs:   Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateComplete, ago(59*time.Minute), taskmeta.AnnotationTTL, "3600")},
			state: tesv1.StateComplete,
		},
		{
			name:    "behaviour §4.2: with a TTL of 0 an ended task is deleted at once",
			obs:     Observed{Event: "ev", Anchor: endedAt(nil, tesv1.StateCanceled, t0, taskmeta.AnnotationTTL, "0")},
			actions: []Action{act(DeleteTask, "")},
			state:   tesv1.StateCanceled,
		},
		{
			name:  "behaviour §4.2: the TTL is the task's own: a lower TASK_TTL_SECONDS set later does not shorten it",
			obs:   Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateComplete, ago(time.Hour), taskmeta.AnnotationTTL, "86400")},
			cfg:   func(c *Config) { c.TaskTTL = ptr(time.Second) },
			state: tesv1.StateComplete,
		},
		{
			name:  "behaviour §4.2: a task that started without a TTL keeps it after TASK_TTL_SECONDS is set",
			obs:   Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateComplete, ago(1000*time.Hour), taskmeta.AnnotationTTL, taskmeta.NoTTL)},
			cfg:   func(c *Config) { c.TaskTTL = ptr(time.Second) },
			state: tesv1.StateComplete,
		},
		{
			name:  "behaviour §4.2: a task that recorded no TTL at all (it started before TTLs were recorded) is kept",
			obs:   Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateSystemError, ago(1000*time.Hour))},
			cfg:   func(c *Config) { c.TaskTTL = ptr(time.Second) },
			state: tesv1.StateSystemError,
		},
		{
			name:  "behaviour §4.2: a TTL that does not parse is none",
			obs:   Observed{Event: "ev", Anchor: endedAt(&full, tesv1.StateComplete, ago(1000*time.Hour), taskmeta.AnnotationTTL, "-1")},
			state: tesv1.StateComplete,
		},
	})
}

// TestTTLIsRecordedByTheFirstWrite: the first write on a task (its
// progress, or its final state when it ends at once) records the TTL in
// force then; later writes leave it (behaviour §4.2).
func TestTTLIsRecordedByTheFirstWrite(t *testing.T) {
	hour := func(c *Config) { c.TaskTTL = ptr(time.Hour) }
	spec := taskWith(1)
	cases := []struct {
		name string
		obs  Observed
		cfg  func(*Config)
		want string
	}{
		{"at submission, with TASK_TTL_SECONDS", Observed{Event: "ev", Anchor: anchorWith(nil), Spec: spec}, hour, "3600"},
		{"at submission, without TASK_TTL_SECONDS", Observed{Event: "ev", Anchor: anchorWith(nil), Spec: spec}, nil, taskmeta.NoTTL},
		{"a task cancelled before it was submitted", Observed{Event: "ev", Anchor: cancelled(anchorWith(nil))}, hour, "3600"},
		{"a task that can never run", Observed{Event: "ev", Anchor: anchorWith(nil), Unreadable: "invalid task: x"}, hour, "3600"},
		{"a later step leaves the recorded TTL", Observed{Event: "ev", Anchor: anchorWith(ptr(progressOf([]string{"ex-00"}, "ev-0", ago(time.Hour), "ex-00")), taskmeta.AnnotationTTL, "60"),
			Jobs: jobsOf(completed("ex-00"))}, hour, ""},
		{"a step that writes nothing records nothing", Observed{Event: "ev", Anchor: anchorWith(nil)}, hour, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			if got := Decide(c.obs, cfg, t0).TTL; got != c.want {
				t.Errorf("TTL recorded %q, want %q", got, c.want)
			}
		})
	}
}

func TestSubmissionPolicy(t *testing.T) {
	runDecideCases(t, []decideCase{
		{
			name:  "behaviour §8.5: a task whose stored JSON cannot be read ends with SYSTEM_ERROR and why, creating nothing",
			obs:   Observed{Event: "ev", Anchor: anchorWith(nil), Unreadable: "invalid task: no executors"},
			final: tesv1.StateSystemError,
			state: tesv1.StateSystemError,
			check: func(t *testing.T, p Plan) { wantReason(t, p, "invalid task: no executors") },
		},
		{
			name:  "behaviour §5: before its submission a task is QUEUED and nothing is written",
			obs:   Observed{Event: "ev", Anchor: anchorWith(nil)},
			state: tesv1.StateQueued,
		},
	})
}

func TestRejectedPVCPolicy(t *testing.T) {
	prog := progressOf(fullParts, "ev-1", ago(time.Second), taskmeta.PartPVC, taskmeta.PartInputsFiler).
		WithEnded(taskmeta.PartPVC, "Creating the task's volume claim was rejected: exceeded quota")
	runDecideCases(t, []decideCase{
		{
			name: "behaviour §8.6: a claim the API server rejected stops the task at once, also on a redelivery of the event that recorded it",
			obs:  Observed{Event: "ev-1", Anchor: anchorWith(&prog)},
			// The claim's deletion is harmless (NotFound counts as done);
			// neither the claim nor the filer is created again.
			actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
			final:   tesv1.StateSystemError,
			state:   tesv1.StateSystemError,
			check:   func(t *testing.T, p Plan) { wantReason(t, p, "exceeded quota") },
		},
	})
}

func TestCancelPolicy(t *testing.T) {
	parts := []string{"ex-00", "ex-01"}
	deleted := func(part string) taskmeta.Progress {
		return progressOf(parts, "ev-1", ago(time.Hour), part).WithEnded(part, "Task cancelled")
	}
	stuck := deleting(running("ex-00"))
	stuck.DeletionTimestamp = ptr(metav1.NewTime(ago(DefaultPodTimeout)))
	recent := deleting(running("ex-00"))
	recent.DeletionTimestamp = ptr(metav1.NewTime(ago(DefaultPodTimeout - time.Second)))
	kept := deleted("ex-00").WithKept("ex-00", "Deleting job 'task-1234abcd-ex-00' was rejected (forbidden); it is kept")
	keptPVC := progressOf(append([]string{taskmeta.PartPVC}, parts...), "ev-1", ago(time.Hour), taskmeta.PartPVC, "ex-00").
		WithEnded("ex-00", "Task cancelled").WithKept("ex-00", "Deleting job 'task-1234abcd-ex-00' was rejected (forbidden); it is kept")
	runDecideCases(t, []decideCase{
		{
			name:  "behaviour §8.3: a deleted job whose pods are still going is waited for: CANCELING",
			obs:   Observed{Event: "ev", Anchor: cancelled(anchorWith(ptr(deleted("ex-00")))), Jobs: jobsOf(recent)},
			state: tesv1.StateCanceling,
		},
		{
			name:  "behaviour §8.3: a deleted job still terminating --pod-timeout after its deletion is waited for no more: CANCELED, naming it",
			obs:   Observed{Event: "ev", Anchor: cancelled(anchorWith(ptr(deleted("ex-00")))), Jobs: jobsOf(stuck)},
			final: tesv1.StateCanceled,
			state: tesv1.StateCanceled,
			check: func(t *testing.T, p Plan) {
				wantReason(t, p, "Task cancelled\nJob 'task-1234abcd-ex-00' was still terminating 240 s after it was deleted")
			},
		},
		{
			name:  "behaviour §8.3: a job whose deletion was rejected is not deleted again; the task ends CANCELED, saying so",
			obs:   Observed{Event: "ev", Anchor: cancelled(anchorWith(&kept)), Jobs: jobsOf(running("ex-00"))},
			final: tesv1.StateCanceled,
			state: tesv1.StateCanceled,
			check: func(t *testing.T, p Plan) {
				wantReason(t, p, "Task cancelled\nDeleting job 'task-1234abcd-ex-00' was rejected (forbidden); it is kept")
			},
		},
		{
			name:    "behaviour §8.3: the PVC of a task whose job's deletion was rejected is deleted as for any cancelled task",
			obs:     Observed{Event: "ev", Anchor: cancelled(anchorWith(&keptPVC)), Jobs: jobsOf(running("ex-00"))},
			actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
			final:   tesv1.StateCanceled,
			state:   tesv1.StateCanceled,
		},
		{
			name:    "behaviour §8.3: with KEEP_FAILED_PVC it is kept and released from the task",
			obs:     Observed{Event: "ev", Anchor: cancelled(anchorWith(&keptPVC)), Jobs: jobsOf(running("ex-00"))},
			cfg:     func(c *Config) { c.KeepFailedPVC = true },
			actions: []Action{act(ReleasePVC, taskmeta.PartPVC)},
			final:   tesv1.StateCanceled,
			state:   tesv1.StateCanceled,
		},
	})
}

func TestEndedPartPolicy(t *testing.T) {
	parts := []string{"ex-00", "ex-01"}
	msg := "Pod 'p' of job 'task-1234abcd-ex-00' wasn't scheduled within 600 s: 0/1 nodes are available"
	ended := progressOf(parts, "ev-1", ago(time.Hour), "ex-00").WithEnded("ex-00", msg)
	kept := ended.WithKept("ex-00", "Deleting job 'task-1234abcd-ex-00' was rejected (denied by policy); it is kept")
	runDecideCases(t, []decideCase{
		{
			name:    "behaviour §1.13: a job the service ended that still runs is deleted again",
			obs:     Observed{Event: "ev", Anchor: anchorWith(&ended), Jobs: jobsOf(running("ex-00"))},
			actions: []Action{act(DeleteJob, "ex-00")},
			final:   tesv1.StateSystemError,
			state:   tesv1.StateSystemError,
		},
		{
			name:  "behaviour §8.4: one whose deletion was rejected is kept (failed instead); the task stops, saying why",
			obs:   Observed{Event: "ev", Anchor: anchorWith(&kept), Jobs: jobsOf(running("ex-00"))},
			final: tesv1.StateSystemError,
			state: tesv1.StateSystemError,
			check: func(t *testing.T, p Plan) {
				if lines := strings.Split(p.Final.Reason, "\n"); len(lines) != 2 || lines[0] != msg || !strings.Contains(lines[1], "rejected") {
					t.Errorf("reason %q, want the scheduler's message, then the rejection", p.Final.Reason)
				}
			},
		},
	})
}
