package steps

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The cases cite the section of docs/behaviour.md that each checks.

// act is an action as the tests compare it: kind and part.
func act(kind ActionKind, part string) Action { return Action{Kind: kind, Part: part} }

type decideCase struct {
	name string
	obs  Observed
	cfg  func(*Config)
	now  time.Time // t0 if zero

	actions []Action // compared by kind and part, in order
	final   string   // the final state written, "" for none
	state   string
	check   func(t *testing.T, p Plan)
}

func TestDecide(t *testing.T) {
	full := taskWith(2, withInput, withOutput)
	started := func(parts ...string) *taskmeta.Progress {
		p := progressOf(fullParts, "ev-old", ago(10*time.Minute), parts...)
		return &p
	}
	execOnly := []string{"ex-00", "ex-01"}

	// The cases, by the policy of Decide that each exercises.
	tables := []struct {
		policy string
		cases  []decideCase
	}{
		{"a submission", []decideCase{
			// Submission.
			{
				name:    "behaviour §1.1: a task with inputs starts its PVC and its inputs filer together",
				obs:     Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: full},
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, taskmeta.PartInputsFiler)},
				state:   tesv1.StateInitializing,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, fullParts, []string{taskmeta.PartPVC, taskmeta.PartInputsFiler})
					if p.Progress.Last == nil || p.Progress.Last.Event != "ev-submit" || !p.Progress.Last.At.Equal(t0) ||
						!slices.Equal(p.Progress.Last.Parts, []string{taskmeta.PartPVC, taskmeta.PartInputsFiler}) {
						t.Errorf("last batch %+v, want the submission's event, time and both parts", p.Progress.Last)
					}
				},
			},
			{
				name:    "behaviour §1.1: no PVC without inputs, outputs or volumes",
				obs:     Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(2)},
				actions: []Action{act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, execOnly, []string{"ex-00"})
				},
			},
			{
				name:    "behaviour §1.1: outputs need the PVC, which starts with the first executor when there are no inputs",
				obs:     Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, withOutput)},
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, []string{taskmeta.PartPVC, "ex-00", taskmeta.PartOutputsFiler}, []string{taskmeta.PartPVC, "ex-00"})
				},
			},
			{
				name:    "behaviour §1.3: volumes need the PVC but no filer",
				obs:     Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, withVolume)},
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, []string{taskmeta.PartPVC, "ex-00"}, []string{taskmeta.PartPVC, "ex-00"})
				},
			},
			{
				name: "behaviour §1.1: a wildcard in the first path component is refused before the PVC or any job is created",
				obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, withInput, func(t *taskspec.Task) {
					t.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/*.txt", PathPrefix: "/"}}
				})},
				final: tesv1.StateSystemError,
				state: tesv1.StateSystemError,
				check: func(t *testing.T, p Plan) {
					if p.Progress != nil {
						t.Errorf("a refused task records progress %v", p.Progress)
					}
					wantReason(t, p, "first component")
				},
			},
			{
				name: "behaviour §1.1: a wildcard output without path_prefix is refused before anything is created",
				obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, func(t *taskspec.Task) {
					t.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/data/*/out.txt"}}
				})},
				final: tesv1.StateSystemError,
				state: tesv1.StateSystemError,
				check: func(t *testing.T, p Plan) { wantReason(t, p, "path_prefix") },
			},
			{
				name: "behaviour §1.1: a wildcard output with path_prefix below the first component runs",
				obs: Observed{Event: "ev-submit", Anchor: anchorWith(nil), Spec: taskWith(1, func(t *taskspec.Task) {
					t.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/data/*/out.txt", PathPrefix: "/data"}}
				})},
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name:  "behaviour §5: a submitted task whose JSON was not read yet stays QUEUED and creates nothing",
				obs:   Observed{Event: "ev-1", Anchor: anchorWith(nil)},
				state: tesv1.StateQueued,
			},
			{
				name: "behaviour §6: a duplicate submission of a started task creates nothing twice",
				obs: Observed{Event: "ev-submit-2", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)), Spec: full,
					Jobs: jobsOf(running(taskmeta.PartInputsFiler)), Pods: pods()},
				state: tesv1.StateInitializing,
			},
			{
				name: "behaviour §6: a redelivery of the submission creates what its first attempt recorded",
				obs: func() Observed {
					p := progressOf(fullParts, "ev-submit", ago(5*time.Second), taskmeta.PartPVC, taskmeta.PartInputsFiler)
					p.Last.Parts = []string{taskmeta.PartPVC, taskmeta.PartInputsFiler}
					return Observed{Event: "ev-submit", Anchor: anchorWith(&p), Spec: full, Jobs: jobsOf()}
				}(),
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, taskmeta.PartInputsFiler)},
				state:   tesv1.StateInitializing,
				check:   func(t *testing.T, p Plan) { wantNoProgress(t, p) },
			},
		}},
		{"a part's job", []decideCase{
			// Executors, in order.
			{
				name:    "behaviour §1.2: the first executor starts once the inputs filer completed",
				obs:     Observed{Event: "ev-2", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)), Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				actions: []Action{act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, fullParts, []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"})
					if p.Progress.Last == nil || p.Progress.Last.Event != "ev-2" || !slices.Equal(p.Progress.Last.Parts, []string{"ex-00"}) {
						t.Errorf("last batch %+v, want ev-2 starting ex-00", p.Progress.Last)
					}
				},
			},
			{
				name: "behaviour §1.2: executors run one after another",
				obs: Observed{Event: "ev-3", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"))},
				actions: []Action{act(CreateJob, "ex-01")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantProgress(t, p, fullParts, []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01"})
					if !slices.Equal(p.Progress.Done, []string{taskmeta.PartInputsFiler, "ex-00"}) {
						t.Errorf("done %v, want the completed jobs", p.Progress.Done)
					}
				},
			},
			{
				name: "behaviour §9: a part recorded done is not read again",
				obs: Observed{Event: "ev-4", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01").WithDone(taskmeta.PartInputsFiler, "ex-00")
					return &p
				}()), Jobs: jobsOf(completed("ex-01"))},
				actions: []Action{act(CreateJob, taskmeta.PartOutputsFiler)},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.2: while an executor runs, no later job starts",
				obs: Observed{Event: "ev-3", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")), Pods: pods(podOf("ex-00", corev1.PodRunning, ago(time.Minute)))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.3: the outputs filer starts after the last executor",
				obs: Observed{Event: "ev-4", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"))},
				actions: []Action{act(CreateJob, taskmeta.PartOutputsFiler)},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.3, §1.7: a completed task records the output file logs, deletes its PVC and is COMPLETE",
				obs: Observed{Event: "ev-5", Anchor: anchorWith(started(fullParts...)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), completed(taskmeta.PartOutputsFiler))},
				actions: []Action{act(RecordOutputFileLogs, taskmeta.PartOutputsFiler), act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateComplete,
				state:   tesv1.StateComplete,
			},
			{
				name: "behaviour §1.7: output file logs that are recorded already are not read again",
				obs: Observed{Event: "ev-5", Anchor: anchorWith(started(fullParts...)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"),
						annotate(completed(taskmeta.PartOutputsFiler), taskmeta.AnnotationOutputFileLogs, "[]"))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateComplete,
				state:   tesv1.StateComplete,
			},
			{
				name: "behaviour §1.3: a task without a PVC completes without deleting one",
				obs: Observed{Event: "ev-5", Anchor: anchorWith(ptr(progressOf(execOnly, "ev-old", ago(time.Hour), execOnly...))),
					Jobs: jobsOf(completed("ex-00"), completed("ex-01"))},
				final: tesv1.StateComplete,
				state: tesv1.StateComplete,
			},

			// Job conditions.
			{
				name: "behaviour §1.10: a job with the condition Failed counts as failed",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", cond(batchv1.JobFailed, ago(time.Minute))))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.10: a job with the condition FailureTarget counts as failed",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", cond(batchv1.JobFailureTarget, ago(time.Minute))))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.10: a job with the condition Complete counts as complete",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", cond(batchv1.JobComplete, ago(time.Minute))))},
				actions: []Action{act(CreateJob, "ex-01")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.10: a job with the condition SuccessCriteriaMet counts as complete",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", cond(batchv1.JobSuccessCriteriaMet, ago(time.Minute))))},
				actions: []Action{act(CreateJob, "ex-01")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.10: a Suspended job is still running",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", cond(batchv1.JobSuspended, ago(time.Minute)))), Pods: pods()},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.10: a condition that is not True counts for nothing",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00", batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionFalse})),
					Pods: pods()},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a running job's pods are needed to decide, and asked for when not read",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00"))},
				state: tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					if !p.NeedsPods {
						t.Error("NeedsPods not set")
					}
				},
			},

			// Failures.
			{
				name: "behaviour §1.5: a failed executor stops the task: EXECUTOR_ERROR, no later job, the job kept, the PVC deleted",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failed("ex-00"))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "Job '"+testTask+"-ex-00' failed") },
			},
			{
				name: "behaviour §1.5: a failed inputs filer stops the task with SYSTEM_ERROR",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(failed(taskmeta.PartInputsFiler))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §1.5: a failed outputs filer stops the task with SYSTEM_ERROR and records no file logs",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(fullParts...)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), failed(taskmeta.PartOutputsFiler))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §1.8: KEEP_FAILED_PVC keeps the PVC of a task that failed",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failed("ex-00"))},
				cfg:     func(c *Config) { c.KeepFailedPVC = true },
				actions: []Action{act(ReleasePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.8: a task that completes deletes its PVC also with KEEP_FAILED_PVC",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(fullParts...)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), completed(taskmeta.PartOutputsFiler))},
				cfg:     func(c *Config) { c.KeepFailedPVC = true },
				actions: []Action{act(RecordOutputFileLogs, taskmeta.PartOutputsFiler), act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateComplete,
				state:   tesv1.StateComplete,
			},

			// ignore-error.
			{
				name: "behaviour §1.6: an ignore-error executor that is only FailureTarget is waited for",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), ignoring(jobOf("ex-00", cond(batchv1.JobFailureTarget, ago(time.Minute)))))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.6: an ignore-error executor marked Failed is kept and the next executor starts, with a warning",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), ignoring(failed("ex-00")))},
				actions: []Action{act(CreateJob, "ex-01")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantNote(t, p, "warn", "Executor job '"+testTask+"-ex-00' failed; ignoring the error")
				},
			},
			{
				name: "behaviour §1.6: after the last executor failed with ignore-error, the outputs filer starts",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), ignoring(failed("ex-01")))},
				actions: []Action{act(CreateJob, taskmeta.PartOutputsFiler)},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.6: an ignore-error executor not marked Failed within the pod timeout stops the task",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), ignoring(jobOf("ex-00", cond(batchv1.JobFailureTarget, ago(241*time.Second)))))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "didn't mark it Failed within 240 s") },
			},
			{
				name: "behaviour §1.6: an ignore-error executor that the service failed (failed annotation) still stops the task",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), annotate(ignoring(failed("ex-00")), taskmeta.AnnotationFailed, "Pod couldn't start"))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.6: an ignore-error executor with activeDeadlineSeconds 1 (failed by an earlier run) still stops the task",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), func() *batchv1.Job {
						j := ignoring(failed("ex-00"))
						j.Spec.ActiveDeadlineSeconds = ptr(int64(1))
						return j
					}())},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.6: another value of the ignore-error annotation stops the task at the executor's failure",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), annotate(failed("ex-00"), taskmeta.AnnotationIgnoreError, "yes"))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
			},
			{
				name: "behaviour §1.6: ignore-error is an executor's: a filer job with it still stops the task",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(ignoring(failed(taskmeta.PartInputsFiler)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
		}},
		{"the record", []decideCase{
			// Jobs recorded as started but missing.
			{
				name: "behaviour §6.5: a job recorded started, missing past the grace: its pods are looked at first",
				obs: Observed{Event: "ev-new", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				state: tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					if !p.NeedsPods {
						t.Error("NeedsPods not set")
					}
					wantNoProgress(t, p)
				},
			},
			{
				name: "behaviour §6.5: a job recorded started, missing, with a pod of it left was deleted: SYSTEM_ERROR, not re-created",
				obs: Observed{Event: "ev-new", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler)), Pods: pods(podOf("ex-00", corev1.PodRunning, ago(time.Minute)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "was deleted") },
			},
			{
				name: "behaviour §6.5: a job recorded started past the grace, with no sign it ever existed, was never created: recorded again as this event's and created",
				obs: Observed{Event: "ev-new", Anchor: anchorWith(ptr(progressOf(fullParts, "ev-old", ago(2*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00").WithDone(taskmeta.PartInputsFiler))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler)), Pods: pods(podOf(taskmeta.PartInputsFiler, corev1.PodSucceeded, ago(3*time.Minute)))},
				actions: []Action{act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					if p.Progress == nil || p.Progress.Last == nil || p.Progress.Last.Event != "ev-new" || !slices.Equal(p.Progress.Last.Parts, []string{"ex-00"}) || !p.Progress.Last.At.Equal(t0) {
						t.Errorf("progress %+v, want ex-00 recorded again by ev-new now", p.Progress)
					}
					wantNote(t, p, "warn", "was never created")
				},
			},
			{
				name: "behaviour §6.5: the PVC and first job of a cut-short submission are both created again",
				obs: Observed{Anchor: anchorWith(ptr(func() taskmeta.Progress {
					p := progressOf(fullParts, "ev-submit", ago(2*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler)
					p.Last.Parts = []string{taskmeta.PartPVC, taskmeta.PartInputsFiler}
					return p
				}())), Jobs: jobsOf(), Pods: pods()},
				actions: []Action{act(CreatePVC, taskmeta.PartPVC), act(CreateJob, taskmeta.PartInputsFiler)},
				state:   tesv1.StateInitializing,
			},
			{
				name: "behaviour §6: a job being deleted by someone stops the task with SYSTEM_ERROR",
				obs: Observed{Event: "ev-new", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), deleting(running("ex-00")))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §6: a redelivery of the event that recorded a missing job creates it",
				obs: Observed{Event: "ev-old", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				actions: []Action{act(CreateJob, "ex-00")},
				state:   tesv1.StateRunning,
				check:   func(t *testing.T, p Plan) { wantNoProgress(t, p) },
			},
			{
				name: "behaviour §6: another event within the grace period waits for a job recorded moments ago",
				obs: Observed{Event: "ev-other", Anchor: anchorWith(ptr(progressOf(fullParts, "ev-old", ago(5*time.Second), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §6: a job whose deletion the event reported is not waited for, even within the grace period",
				obs: Observed{Event: "ev-delete", Gone: "ex-00", Anchor: anchorWith(ptr(progressOf(fullParts, "ev-old", ago(5*time.Second), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §7: a sweep within the grace period waits for a job recorded moments ago",
				obs: Observed{Anchor: anchorWith(ptr(progressOf(fullParts, "ev-old", ago(5*time.Second), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler)), Pods: pods()},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §6.5: a sweep past the grace period finds a recorded job missing and a pod of it: SYSTEM_ERROR",
				obs: Observed{Anchor: anchorWith(ptr(progressOf(fullParts, "", ago(2*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler)), Pods: pods(podOf("ex-00", corev1.PodSucceeded, ago(time.Minute)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},

			// Parts the service ended itself.
			{
				name: "behaviour §1.13: a part the service deleted stops the task with SYSTEM_ERROR and its reason",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00").WithEnded("ex-00", "Pod 'p' of job 'j' wasn't scheduled within 3600 s: no nodes")
					return &p
				}()), Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "wasn't scheduled within 3600 s: no nodes") },
			},
			{
				name: "behaviour §1.12: a part whose creation the API server refused stops the task with SYSTEM_ERROR and why",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler).WithEnded(taskmeta.PartInputsFiler, "Creating job 'x' was refused: invalid")
					return &p
				}())},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "was refused: invalid") },
			},
			{
				name: "behaviour §1.14: a job the service is deleting that still runs (its deletion failed) is deleted again, and the task stops",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00").WithEnded("ex-00", "not scheduled")
					return &p
				}()), Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")), Pods: pods()},
				actions: []Action{act(DeleteJob, "ex-00"), act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §1.6: an ignore-error job the service tried to delete, which then failed on its own, still stops the task",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00").WithEnded("ex-00", "not scheduled")
					return &p
				}()), Jobs: jobsOf(completed(taskmeta.PartInputsFiler), ignoring(failed("ex-00")))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "not scheduled") },
			},
			{
				name: "behaviour §1.6: a job the service tried to delete, which then completed on its own, still stops the task (in doubt, the task stops)",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00").WithEnded("ex-00", "not scheduled")
					return &p
				}()), Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §6: a job of the same name that the task does not own is not deleted",
				obs: Observed{Event: "ev", Anchor: anchorWith(func() *taskmeta.Progress {
					p := started(taskmeta.PartPVC, taskmeta.PartInputsFiler).WithEnded(taskmeta.PartInputsFiler, "Job exists but does not belong to the task")
					return &p
				}()), Jobs: jobsOf(func() *batchv1.Job {
					j := running(taskmeta.PartInputsFiler)
					j.OwnerReferences = nil
					return j
				}()), Pods: pods()},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},

			// Duplicate and late events.
			{
				name: "behaviour §6: a late job.finished of a finished task does nothing",
				obs: Observed{Event: "ev-late", Anchor: anchorWith(started(fullParts...), taskmeta.AnnotationState, tesv1.StateComplete, taskmeta.AnnotationEnded, ago(time.Minute).Format(time.RFC3339)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), completed(taskmeta.PartOutputsFiler))},
				state: tesv1.StateComplete,
			},
			{
				name: "behaviour §6: a finished task stays finished even if a job changes later",
				obs: Observed{Event: "ev-late", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"), taskmeta.AnnotationState, tesv1.StateExecutorError, taskmeta.AnnotationEnded, ago(time.Minute).Format(time.RFC3339)),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"))},
				state: tesv1.StateExecutorError,
			},
			{
				name: "behaviour §6: a duplicate job.finished of an executor whose successor runs creates nothing",
				obs: Observed{Event: "ev-dup", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), running("ex-01")), Pods: pods()},
				state: tesv1.StateRunning,
			},

			// The record.
			{
				name:    "behaviour §6: an unreadable progress record stops the task with SYSTEM_ERROR, and its PVC is deleted as for any stop (NotFound counts as done)",
				obs:     Observed{Event: "ev", Anchor: anchorWith(nil, taskmeta.AnnotationProgress, "{not json")},
				actions: []Action{{Kind: DeletePVC, Part: taskmeta.PartPVC}},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "progress record is unreadable") },
			},
		}},
		{"a cancelled task", []decideCase{
			// Cancellation.
			{
				name: "behaviour §1.18: a cancelled task's running job is deleted, the jobs that ended are kept, CANCELING",
				obs: Observed{Event: "ev-cancel", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00"))},
				actions: []Action{act(DeleteJob, "ex-00")},
				state:   tesv1.StateCanceling,
			},
			{
				name: "behaviour §1.18: a cancelled task is CANCELING while its deleted jobs are going",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), deleting(running("ex-00")))},
				state: tesv1.StateCanceling,
			},
			{
				name: "behaviour §1.8, §1.18: a cancelled task without running jobs is CANCELED, its PVC deleted, no job started",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateCanceled,
				state:   tesv1.StateCanceled,
			},
			{
				name: "behaviour §1.8: KEEP_FAILED_PVC keeps the PVC of a cancelled task",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler))},
				cfg:     func(c *Config) { c.KeepFailedPVC = true },
				actions: []Action{act(ReleasePVC, taskmeta.PartPVC)},
				final:   tesv1.StateCanceled,
				state:   tesv1.StateCanceled,
			},
			{
				name:  "behaviour §1.18: a task cancelled before anything started is CANCELED and creates nothing",
				obs:   Observed{Event: "ev", Anchor: cancelled(anchorWith(nil)), Spec: full},
				final: tesv1.StateCanceled,
				state: tesv1.StateCanceled,
				check: func(t *testing.T, p Plan) { wantNoProgress(t, p) },
			},
			{
				name: "behaviour §1.18: a job the service is failing is deleted when the task is cancelled",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failedByService(running("ex-00"), ago(time.Minute)))},
				actions: []Action{act(DeleteJob, "ex-00")},
				state:   tesv1.StateCanceling,
			},
			{
				name: "behaviour §1.18: a failed job of a cancelled task is kept with its logs",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), ignoring(jobOf("ex-00", cond(batchv1.JobFailureTarget, ago(time.Minute)))))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateCanceled,
				state:   tesv1.StateCanceled,
			},
			{
				name: "behaviour §1.18: a cancel of a task that ended changes nothing",
				obs: Observed{Event: "ev", Anchor: cancelled(anchorWith(started(fullParts...), taskmeta.AnnotationState, tesv1.StateComplete, taskmeta.AnnotationEnded, ago(time.Minute).Format(time.RFC3339))),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), completed(taskmeta.PartOutputsFiler))},
				state: tesv1.StateComplete,
			},
		}},
		{"a job's pods", []decideCase{
			// Pods that can't start.
			{
				name: "behaviour §1.11: ErrImagePull past the pod timeout (from the pod's start) fails the job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(10*time.Minute), ago(241*time.Second), "ErrImagePull", false))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
				check: func(t *testing.T, p Plan) {
					wantActionReason(t, p, FailJob, "Pod '"+testTask+"-ex-00-x7k2q' of job '"+testTask+"-ex-00' couldn't start within 240 s: ErrImagePull")
				},
			},
			{
				name: "behaviour §1.11: ImagePullBackOff of an init container past the pod timeout fails the job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(10*time.Minute), ago(5*time.Minute), "ImagePullBackOff", true))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: InvalidImageName past the pod timeout fails the job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(10*time.Minute), ago(5*time.Minute), "InvalidImageName", false))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: CreateContainerConfigError past the pod timeout fails the job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(10*time.Minute), ago(5*time.Minute), "CreateContainerConfigError", false))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: CreateContainerConfigError of an init container past the pod timeout fails the job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(10*time.Minute), ago(5*time.Minute), "CreateContainerConfigError", true))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a pod that hasn't started is timed from its creation",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(241*time.Second), time.Time{}, "ErrImagePull", false))},
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a pod that started is timed from its start, not its creation",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(time.Hour), ago(time.Minute), "ErrImagePull", false))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a pod that can't start before the pod timeout keeps waiting",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(239*time.Second), time.Time{}, "ImagePullBackOff", false))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.12: a pod pending for another reason (pulling a large image) keeps waiting",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting("ex-00", ago(time.Hour), ago(time.Hour), "ContainerCreating", false))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a pod that is being deleted is not checked",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(func() *corev1.Pod {
						p := waiting("ex-00", ago(time.Hour), ago(time.Hour), "ErrImagePull", false)
						p.DeletionTimestamp = ptr(p.CreationTimestamp)
						return p
					}())},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: only the pods of the running job count",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(waiting(taskmeta.PartInputsFiler, ago(time.Hour), ago(time.Hour), "ErrImagePull", false))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.11: a filer pod that can't start fails the filer's job",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(running(taskmeta.PartInputsFiler)),
					Pods: pods(waiting(taskmeta.PartInputsFiler, ago(time.Hour), ago(time.Hour), "ErrImagePull", false))},
				actions: []Action{act(FailJob, taskmeta.PartInputsFiler)},
				state:   tesv1.StateInitializing,
			},
			{
				name: "behaviour §1.12: a job the service failed is waited for until Kubernetes marks it Failed",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failedByService(running("ex-00"), ago(time.Minute))),
					Pods: pods(waiting("ex-00", ago(time.Hour), ago(time.Hour), "ErrImagePull", false))},
				state: tesv1.StateRunning,
			},
			{
				name: "behaviour §1.12: a job the service failed is handled as any failed job once marked Failed",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(failedByService(failed(taskmeta.PartInputsFiler), ago(time.Minute)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},
			{
				name: "behaviour §1.12: a failed job not marked Failed within another pod timeout stops the task, the job kept",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), failedByService(running("ex-00"), ago(241*time.Second)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateExecutorError,
				state:   tesv1.StateExecutorError,
				check:   func(t *testing.T, p Plan) { wantReason(t, p, "it is kept") },
			},
			{
				name: "behaviour §1.12: a failed filer job not marked Failed within another pod timeout stops the task with SYSTEM_ERROR",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(failedByService(running(taskmeta.PartInputsFiler), ago(241*time.Second)))},
				actions: []Action{act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
			},

			// Pods that aren't scheduled.
			{
				name: "behaviour §1.13: an executor whose pod wasn't scheduled within TESK_MAX_QUEUE_SECONDS, and never ran, is deleted: SYSTEM_ERROR",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(unschedulablePod("ex-00", ago(time.Hour)))},
				cfg:     func(c *Config) { c.MaxQueue = time.Hour },
				actions: []Action{act(DeleteJob, "ex-00"), act(DeletePVC, taskmeta.PartPVC)},
				final:   tesv1.StateSystemError,
				state:   tesv1.StateSystemError,
				check: func(t *testing.T, p Plan) {
					msg := "Pod '" + testTask + "-ex-00-x7k2q' of job '" + testTask + "-ex-00' wasn't scheduled within 3600 s: 0/3 nodes are available: 3 Insufficient cpu."
					wantReason(t, p, msg)
					wantNote(t, p, "error", msg)
					if p.Progress == nil {
						t.Fatal("no progress: the deletion is not recorded before it is done")
					}
					if r, ok := p.Progress.EndedReason("ex-00"); !ok || r != msg {
						t.Errorf("ended record of ex-00 = %q, %v; want %q", r, ok, msg)
					}
				},
			},
			{
				name: "behaviour §1.13: an unschedulable pod before TESK_MAX_QUEUE_SECONDS keeps waiting, QUEUED",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(unschedulablePod("ex-00", ago(59*time.Minute)))},
				cfg:   func(c *Config) { c.MaxQueue = time.Hour },
				state: tesv1.StateQueued,
			},
			{
				name: "behaviour §1.13: an executor job with a pod that failed before is failed and kept (EXECUTOR_ERROR)",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), func() *batchv1.Job { j := running("ex-00"); j.Status.Failed = 1; return j }()),
					Pods: pods(unschedulablePod("ex-00", ago(2*time.Hour)))},
				cfg:     func(c *Config) { c.MaxQueue = time.Hour },
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.13: an executor job with a pod that ran before is failed and kept",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(podOf("ex-00", corev1.PodFailed, ago(3*time.Hour)), unschedulablePod("ex-00", ago(2*time.Hour)))},
				cfg:     func(c *Config) { c.MaxQueue = time.Hour },
				actions: []Action{act(FailJob, "ex-00")},
				state:   tesv1.StateRunning,
			},
			{
				name: "behaviour §1.13: a filer job whose pod wasn't scheduled in time is failed and kept",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
					Jobs: jobsOf(running(taskmeta.PartInputsFiler)),
					Pods: pods(unschedulablePod(taskmeta.PartInputsFiler, ago(2*time.Hour)))},
				cfg:     func(c *Config) { c.MaxQueue = time.Hour },
				actions: []Action{act(FailJob, taskmeta.PartInputsFiler)},
				state:   tesv1.StateInitializing,
			},
			{
				name: "behaviour §1.13: without TESK_MAX_QUEUE_SECONDS an unschedulable pod waits forever, QUEUED",
				obs: Observed{Event: "ev", Anchor: anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
					Jobs: jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")),
					Pods: pods(unschedulablePod("ex-00", ago(1000*time.Hour)))},
				state: tesv1.StateQueued,
			},
		}},
	}
	for _, tb := range tables {
		t.Run(tb.policy, func(t *testing.T) { runDecideCases(t, tb.cases) })
	}
}

// runDecideCases decides each case and checks its plan: the actions by kind
// and part, the final state, the state; that Decide changed nothing of its
// input, and that the same observation gives the same plan.
func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			now := c.now
			if now.IsZero() {
				now = t0
			}
			before := fmt.Sprintf("%+v", c.obs.Anchor)
			p := Decide(c.obs, cfg, now)
			if got := kindsAndParts(p.Actions); !slices.Equal(got, c.actions) {
				t.Errorf("actions %v, want %v", got, c.actions)
			}
			switch {
			case c.final == "" && p.Final != nil:
				t.Errorf("final %+v, want none", *p.Final)
			case c.final != "" && p.Final == nil:
				t.Errorf("no final state, want %s", c.final)
			case c.final != "" && p.Final.State != c.final:
				t.Errorf("final %+v, want %s", *p.Final, c.final)
			}
			if p.State != c.state {
				t.Errorf("state %s, want %s", p.State, c.state)
			}
			if c.check != nil {
				c.check(t, p)
			}
			if after := fmt.Sprintf("%+v", c.obs.Anchor); after != before {
				t.Errorf("Decide changed its input:\n%s\n%s", before, after)
			}
			// The sweep decides on compacted objects: the same plan.
			compact := c.obs
			if c.obs.Jobs != nil {
				compact.Jobs = map[string]*batchv1.Job{}
				for part, j := range c.obs.Jobs {
					compact.Jobs[part] = compactJob(j)
				}
			}
			if c.obs.Pods != nil {
				compact.Pods = []*corev1.Pod{}
				for _, pod := range c.obs.Pods {
					compact.Pods = append(compact.Pods, CompactPod(pod))
				}
			}
			if got := Decide(compact, cfg, now); !reflect.DeepEqual(got, p) {
				t.Errorf("on the sweep's compacted objects the plan differs:\n%+v\n%+v", p, got)
			}
			// Level-triggered: the same observation gives the same plan.
			if again := Decide(c.obs, cfg, now); !reflect.DeepEqual(again, p) {
				t.Errorf("a second decision differs:\n%+v\n%+v", p, again)
			}
		})
	}
}

// TestDecideStepsThroughATask applies each plan's progress as the apply layer
// would, and plays the jobs' outcomes, from submission to COMPLETE: every job
// is created once, in order (behaviour §1.1-§1.3).
func TestDecideStepsThroughATask(t *testing.T) {
	spec := taskWith(3, withInput, withOutput, withVolume)
	anchor := anchorWith(nil)
	jobs := map[string]*batchv1.Job{}
	var created []string
	now := t0
	for i := 0; i < 20; i++ {
		now = now.Add(2 * time.Minute)
		obs := Observed{Event: fmt.Sprintf("ev-%d", i), Anchor: anchor, Jobs: jobs, Pods: pods()}
		if _, ok := anchor.Annotations[taskmeta.AnnotationProgress]; !ok {
			obs.Spec = spec
		}
		p := Decide(obs, DefaultConfig(), now)
		// A duplicate of the event decides the same.
		if dup := Decide(obs, DefaultConfig(), now); fmt.Sprintf("%v", dup.Actions) != fmt.Sprintf("%v", p.Actions) {
			t.Fatalf("a duplicate event decided %v, the first %v", dup.Actions, p.Actions)
		}
		if p.Progress != nil {
			anchor.Annotations[taskmeta.AnnotationProgress] = p.Progress.String()
		}
		for _, a := range p.Actions {
			switch a.Kind {
			case CreatePVC, CreateJob:
				created = append(created, a.Part)
				if a.Kind == CreateJob {
					jobs[a.Part] = completed(a.Part)
				}
			}
		}
		if p.Final != nil {
			if p.Final.State != tesv1.StateComplete {
				t.Fatalf("the task ended %+v", *p.Final)
			}
			want := []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01", "ex-02", taskmeta.PartOutputsFiler}
			if !slices.Equal(created, want) {
				t.Errorf("created %v, want %v", created, want)
			}
			if got := kindsAndParts(p.Actions); !slices.Equal(got, []Action{act(RecordOutputFileLogs, taskmeta.PartOutputsFiler), act(DeletePVC, taskmeta.PartPVC)}) {
				t.Errorf("last actions %v", got)
			}
			return
		}
	}
	t.Fatalf("the task did not complete; created %v", created)
}

// kindsAndParts are the actions' kinds and parts, without the records of
// ended executors' logs, which TestRecordLogs covers.
func kindsAndParts(as []Action) []Action {
	out := []Action{}
	for _, a := range as {
		if a.Kind != RecordExecutorLog {
			out = append(out, act(a.Kind, a.Part))
		}
	}
	return out
}

// TestRecordLogs: every executor whose job ended without a record gets one,
// in the executors' order, after what the plan creates and before what it
// deletes; a running job, one being deleted, one recorded and a task that
// ended get none.
func TestRecordLogs(t *testing.T) {
	recorded := annotate(completed("ex-00"), taskmeta.AnnotationExecutorLog, `{"exit_code":0}`)
	gone := failed("ex-01")
	gone.DeletionTimestamp = &metav1.Time{Time: t0}
	cases := []struct {
		name    string
		actions []Action
		jobs    map[string]*batchv1.Job
		want    []Action
	}{
		{"nothing ended", []Action{act(CreateJob, "ex-01")}, jobsOf(running("ex-00")), []Action{act(CreateJob, "ex-01")}},
		{"after the create", []Action{act(CreateJob, "ex-01")}, jobsOf(completed("ex-00")),
			[]Action{act(CreateJob, "ex-01"), act(RecordExecutorLog, "ex-00")}},
		{"before the deletes", []Action{act(CreatePVC, "pvc"), act(DeleteJob, "ex-02"), act(DeletePVC, "pvc")}, jobsOf(ignoring(failed("ex-01")), failed("ex-10"), completed("ex-02")),
			[]Action{act(CreatePVC, "pvc"), act(RecordExecutorLog, "ex-01"), act(RecordExecutorLog, "ex-02"), act(RecordExecutorLog, "ex-10"), act(DeleteJob, "ex-02"), act(DeletePVC, "pvc")}},
		{"no plan", nil, jobsOf(failed("ex-00")), []Action{act(RecordExecutorLog, "ex-00")}},
		{"recorded, being deleted, a filer", nil, jobsOf(recorded, gone, completed(taskmeta.PartInputsFiler)), []Action{}},
	}
	for _, c := range cases {
		got := recordLogs(c.actions, Observed{Jobs: c.jobs})
		if g := append([]Action{}, got...); !slices.Equal(g, c.want) {
			t.Errorf("%s: %v, want %v", c.name, g, c.want)
		}
	}
	// A job a step went past (recorded done) is left to that step.
	p := progressOf([]string{"ex-00", "ex-01"}, "ev", t0, "ex-00", "ex-01")
	p.Done = []string{"ex-00"}
	if got := recordLogs(nil, Observed{Anchor: anchorWith(&p), Jobs: jobsOf(completed("ex-00"), failed("ex-01"))}); !slices.Equal(got, []Action{act(RecordExecutorLog, "ex-01")}) {
		t.Errorf("past a done job: %v, want ex-01's record only", got)
	}
	// A task that ended records nothing, whatever its jobs.
	ended := anchorWith(nil, taskmeta.AnnotationState, tesv1.StateComplete)
	if p := Decide(Observed{Anchor: ended, Jobs: jobsOf(completed("ex-00"))}, DefaultConfig(), t0); len(p.Actions) != 0 {
		t.Errorf("ended task: actions %v", p.Actions)
	}
}

func wantProgress(t *testing.T, p Plan, parts, started []string) {
	t.Helper()
	if p.Progress == nil {
		t.Fatal("no progress recorded")
	}
	if !slices.Equal(p.Progress.Parts, parts) {
		t.Errorf("parts %v, want %v", p.Progress.Parts, parts)
	}
	if !slices.Equal(p.Progress.Started, started) {
		t.Errorf("started %v, want %v", p.Progress.Started, started)
	}
}

func wantNoProgress(t *testing.T, p Plan) {
	t.Helper()
	if p.Progress != nil {
		t.Errorf("progress %+v written, want none", *p.Progress)
	}
}

func wantReason(t *testing.T, p Plan, sub string) {
	t.Helper()
	if p.Final == nil || !strings.Contains(p.Final.Reason, sub) {
		t.Errorf("final %+v, want a reason with %q", p.Final, sub)
	}
}

func wantActionReason(t *testing.T, p Plan, kind ActionKind, sub string) {
	t.Helper()
	for _, a := range p.Actions {
		if a.Kind == kind {
			if !strings.Contains(a.Reason, sub) {
				t.Errorf("%s reason %q, want %q in it", kind, a.Reason, sub)
			}
			return
		}
	}
	t.Errorf("no %s action", kind)
}

func wantNote(t *testing.T, p Plan, level, sub string) {
	t.Helper()
	for _, n := range p.Notes {
		if n.Level == level && strings.Contains(n.Msg, sub) {
			return
		}
	}
	t.Errorf("notes %+v, want a %s note with %q", p.Notes, level, sub)
}

// TestLastLogMarkedDone: the step that ends a task COMPLETE marks the
// executor whose log it records done before it records it, so that the
// task read again by another step records nothing more; a task that ends
// in failure writes no progress (its failed executor is not done).
func TestLastLogMarkedDone(t *testing.T) {
	p := progressOf([]string{"ex-00", "ex-01"}, "ev", t0, "ex-00", "ex-01")
	p.Done = []string{"ex-00"}
	obs := Observed{Anchor: anchorWith(&p), Jobs: jobsOf(annotate(completed("ex-00"), taskmeta.AnnotationExecutorLog, `{"exit_code":0}`), completed("ex-01"))}
	plan := Decide(obs, DefaultConfig(), t0)
	if plan.Final == nil || plan.Final.State != tesv1.StateComplete {
		t.Fatalf("final %+v, want COMPLETE", plan.Final)
	}
	if !slices.ContainsFunc(plan.Actions, func(a Action) bool { return a.Kind == RecordExecutorLog && a.Part == "ex-01" }) {
		t.Fatalf("actions %v: ex-01's log not recorded", plan.Actions)
	}
	if plan.Progress == nil || !plan.Progress.IsDone("ex-01") || !plan.Progress.IsDone("ex-00") {
		t.Fatalf("progress %+v: want ex-00 and ex-01 done, written before the record", plan.Progress)
	}
	// Another step reads the anchor with that progress: the task ends
	// COMPLETE again, recording nothing.
	again := Decide(Observed{Anchor: anchorWith(plan.Progress), Jobs: obs.Jobs}, DefaultConfig(), t0)
	if again.Final == nil || again.Final.State != tesv1.StateComplete {
		t.Fatalf("read again: final %+v, want COMPLETE", again.Final)
	}
	if slices.ContainsFunc(again.Actions, func(a Action) bool { return a.Kind == RecordExecutorLog }) {
		t.Errorf("read again: actions %v record a log again", again.Actions)
	}
	// A failed executor: the task ends with its log recorded, no progress
	// written.
	bad := Decide(Observed{Anchor: anchorWith(&p), Jobs: jobsOf(obs.Jobs["ex-00"], failed("ex-01"))}, DefaultConfig(), t0)
	if bad.Final == nil || bad.Final.State == tesv1.StateComplete {
		t.Fatalf("failed executor: final %+v", bad.Final)
	}
	if bad.Progress != nil {
		t.Errorf("failed executor: progress %+v written, want none", bad.Progress)
	}
}

// Decide on an ended task: the PVC its end left is deleted again, until the
// TTL deletes the task with it.
func TestEndedTaskDeletesTheLeftPVC(t *testing.T) {
	ended := func(ago time.Duration, kv ...string) Observed {
		m := anchorWith(nil, append([]string{taskmeta.AnnotationState, tesv1.StateComplete,
			taskmeta.AnnotationEnded, t0.Add(-ago).Format(time.RFC3339), taskmeta.AnnotationTTL, "3600"}, kv...)...)
		return Observed{Anchor: m}
	}
	for _, c := range []struct {
		name string
		obs  Observed
		want string
	}{
		{"ended, nothing left", ended(time.Minute), ""},
		{"ended, its PVC left", ended(time.Minute, taskmeta.AnnotationPVCLeft, "503"), "delete-pvc"},
		{"past its TTL, its PVC left", ended(2*time.Hour, taskmeta.AnnotationPVCLeft, "503"), "delete-task"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(c.obs, DefaultConfig(), t0)
			var got []string
			for _, a := range plan.Actions {
				got = append(got, string(a.Kind))
			}
			if fmt.Sprint(got) != fmt.Sprint(strings.Fields(c.want)) || plan.State != tesv1.StateComplete || plan.Final != nil {
				t.Errorf("actions %v, state %s, final %v; want [%s], COMPLETE, none", got, plan.State, plan.Final, c.want)
			}
		})
	}
}
