package steps

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
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

// exitedPod is a pod of the part's job whose command exited non-zero.
func exitedPod(part, suffix string) *corev1.Pod {
	p := podOf(part, corev1.PodFailed, ago(time.Minute))
	p.Name = taskmeta.ObjectName(testTask, part) + "-" + suffix
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}
	return p
}

func counted(j *batchv1.Job, pods ...string) *batchv1.Job {
	return annotate(j, taskmeta.AnnotationPreempted, strings.Join(pods, ","))
}

// An executor's pod that the cluster takes away is counted on its job and
// run again by Kubernetes; one more than EXECUTOR_MAX_PREEMPTIONS fails the
// job, and the task ends PREEMPTED. A command's own failure is never a
// preemption.
func TestPreemption(t *testing.T) {
	prog := progressOf([]string{"ex-00"}, "ev-old", ago(10*time.Minute), "ex-00")
	running1 := func(j *batchv1.Job, ps ...*corev1.Pod) Observed {
		return Observed{Event: "ev", Anchor: anchorWith(&prog), Jobs: jobsOf(j), Pods: pods(ps...)}
	}
	failedFor := func(state string) *batchv1.Job {
		j := failedByService(failed("ex-00"), ago(time.Minute))
		return annotate(j, taskmeta.AnnotationFailed, "lost its pod", taskmeta.AnnotationFailedState, state)
	}
	pod := func(s string) string { return taskmeta.ObjectName(testTask, "ex-00") + "-" + s }
	for _, c := range []struct {
		name    string
		obs     Observed
		max     int
		actions []Action
		final   string
		state   string
	}{
		{"an evicted pod is counted", running1(running("ex-00"), disruptedPod("ex-00", "a", "EvictionByEvictionAPI")), 3,
			[]Action{{Kind: RecordPreemption, Part: "ex-00", Pods: pod("a")}}, "", tesv1.StateRunning},
		{"a pod counted before is not counted again", running1(counted(running("ex-00"), pod("a")), disruptedPod("ex-00", "a", "EvictionByEvictionAPI")), 3,
			nil, "", tesv1.StateRunning},
		{"up to the bound, the job runs on", running1(counted(running("ex-00"), pod("a"), pod("b")), disruptedPod("ex-00", "c", "PreemptionByScheduler")), 3,
			[]Action{{Kind: RecordPreemption, Part: "ex-00", Pods: pod("c")}}, "", tesv1.StateRunning},
		{"one more than the bound fails the job for PREEMPTED", running1(counted(running("ex-00"), pod("a"), pod("b"), pod("c")), disruptedPod("ex-00", "d", "DeletionByTaintManager")), 3,
			[]Action{{Kind: RecordPreemption, Part: "ex-00", Pods: pod("d")}, {Kind: FailJob, Part: "ex-00", State: tesv1.StatePreempted}}, "", tesv1.StateRunning},
		{"a bound of 0 fails the job at the first", running1(running("ex-00"), disruptedPod("ex-00", "a", "EvictionByEvictionAPI")), 0,
			[]Action{{Kind: RecordPreemption, Part: "ex-00", Pods: pod("a")}, {Kind: FailJob, Part: "ex-00", State: tesv1.StatePreempted}}, "", tesv1.StateRunning},
		{"a command that exits non-zero is no preemption", running1(running("ex-00"), exitedPod("ex-00", "a")), 0,
			nil, "", tesv1.StateRunning},
		{"a job failed for preemption ends the task PREEMPTED", running1(failedFor(tesv1.StatePreempted)), 3,
			nil, tesv1.StatePreempted, tesv1.StatePreempted},
		{"a job failed for another cause ends it EXECUTOR_ERROR", running1(failedFor("COMPLETE")), 3,
			nil, tesv1.StateExecutorError, tesv1.StateExecutorError},
		{"a job that failed by itself ends it EXECUTOR_ERROR", running1(failed("ex-00"), exitedPod("ex-00", "a")), 3,
			nil, tesv1.StateExecutorError, tesv1.StateExecutorError},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxPreemptions = c.max
			p := Decide(c.obs, cfg, t0)
			var got []Action
			for _, a := range p.Actions {
				if a.Kind == RecordExecutorLog {
					continue
				}
				a.Reason = "" // checked below
				got = append(got, a)
			}
			if !slices.Equal(got, c.actions) {
				t.Errorf("actions %+v, want %+v", got, c.actions)
			}
			final := ""
			if p.Final != nil {
				final = p.Final.State
			}
			if final != c.final || p.State != c.state {
				t.Errorf("final %q, state %s; want %q, %s", final, p.State, c.final, c.state)
			}
			for _, a := range p.Actions {
				if a.Kind == FailJob && !strings.Contains(a.Reason, "EXECUTOR_MAX_PREEMPTIONS") {
					t.Errorf("FailJob's reason %q names no setting", a.Reason)
				}
				if a.Kind == RecordPreemption && !strings.Contains(a.Reason, "details of") {
					t.Errorf("RecordPreemption's reason %q says not why", a.Reason)
				}
			}
		})
	}
}
