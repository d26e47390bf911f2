package steps

import (
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
	corev1 "k8s.io/api/core/v1"
)

// behaviour §1.6: a job the service set out to fail stops the task even if
// its executor ignores errors, and even when the patch got an error and the
// job then failed on its own: in doubt, the task stops.
func TestFailingIsRecordedBeforeThePatch(t *testing.T) {
	parts := []string{"ex-00", "ex-01"}
	cfg := DefaultConfig()

	// A pod that cannot start past the pod timeout: the job is failed, and the
	// record says so first.
	prog := progressOf(parts, "ev-1", ago(time.Hour), "ex-00")
	stuck := waiting("ex-00", ago(10*time.Minute), ago(10*time.Minute), "ErrImagePull", false)
	plan := Decide(Observed{Event: "ev-2", Anchor: anchorWith(&prog), Jobs: jobsOf(ignoring(running("ex-00"))), Pods: pods(stuck)}, cfg, t0)
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != FailJob {
		t.Fatalf("actions %v, want the job failed", plan.Actions)
	}
	if plan.Progress == nil || !plan.Progress.IsFailing("ex-00") {
		t.Fatalf("progress %+v, want ex-00 recorded as failing before the patch", plan.Progress)
	}

	// The patch did not take (a server error), and the ignore-error job then
	// failed on its own: the task stops, as for a job the service failed.
	rec := *plan.Progress
	plan = Decide(Observed{Event: "ev-3", Anchor: anchorWith(&rec), Jobs: jobsOf(ignoring(failed("ex-00"))), Pods: []*corev1.Pod{}}, cfg, t0)
	if plan.Final == nil || plan.Final.State != tesv1.StateExecutorError {
		t.Fatalf("final %+v, want the task stopped with EXECUTOR_ERROR", plan.Final)
	}
	for _, a := range plan.Actions {
		if a.Kind == CreateJob {
			t.Errorf("the next executor was started: %v", plan.Actions)
		}
	}

	// Without the record, the same failure is ignored and the task goes on.
	plan = Decide(Observed{Event: "ev-3", Anchor: anchorWith(&prog), Jobs: jobsOf(ignoring(failed("ex-00"))), Pods: []*corev1.Pod{}}, cfg, t0)
	if acts := kindsAndParts(plan.Actions); plan.Final != nil || len(acts) != 1 || acts[0].Kind != CreateJob || acts[0].Part != "ex-01" {
		t.Errorf("plan %+v, want ex-01 started past the ignored failure", plan)
	}
}
