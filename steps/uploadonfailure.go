package steps

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Outputs after a failure (behaviour §1.24): a task whose executor failed
// may upload the outputs that exist before it ends EXECUTOR_ERROR, so that
// a workflow engine gets its command's error output and exit code files.
// The executors after the failed one never run; the outputs filer leaves
// out what the executors did not write.

// TagUploadOutputsOnFailure is the task tag that turns the upload after a
// failure on ("true") or off ("false") for one task, whatever the
// operator's default (UPLOAD_OUTPUTS_ON_FAILURE).
const TagUploadOutputsOnFailure = "tesk.upload_outputs_on_failure"

// uploadsOnFailure reports whether a task whose executor fails uploads the
// outputs that exist first: as its tag says, else the operator's default.
func uploadsOnFailure(anchor metav1.ObjectMeta, cfg Config) bool {
	switch taskmeta.TagsOf(anchor)[TagUploadOutputsOnFailure] {
	case "true":
		return true
	case "false":
		return false
	}
	return cfg.UploadOutputsOnFailure
}

// uploadFirst: an executor's failure that ends the task EXECUTOR_ERROR
// (failed is that plan) starts the outputs filer instead, when the task has
// outputs to upload, has not started uploading, uploads on failure, and is
// within its time limit; the failure is recorded, to end the task with once
// the upload ended.
func uploadFirst(plan, failed Plan, prog taskmeta.Progress, obs Observed, cfg Config, now time.Time, part string) (Plan, bool) {
	if _, isExec := taskmeta.ExecutorIndex(part); !isExec || failed.Final == nil || failed.Final.State != tesv1.StateExecutorError ||
		prog.Failed != nil || !prog.HasPart(taskmeta.PartOutputsFiler) || prog.IsStarted(taskmeta.PartOutputsFiler) ||
		!uploadsOnFailure(obs.Anchor, cfg) {
		return failed, false
	}
	if cfg.MaxRun > 0 && prog.Began != nil {
		if plan.Deadline = prog.Began.Add(cfg.MaxRun); !now.Before(plan.Deadline) {
			return failed, false
		}
	}
	plan.Notes = append(plan.Notes, failed.Notes...)
	plan.note("info", "Executor job '%s' failed; uploading the outputs that exist before the task ends %s", taskmeta.ObjectName(obs.Anchor.Name, part), tesv1.StateExecutorError)
	plan = startParts(plan, prog.WithFailed(part, failed.Final.Reason), obs.Event, now, []string{taskmeta.PartOutputsFiler})
	plan.State = tesv1.StateRunning
	return plan, true
}

// skippedAfterFailure reports whether the walk of the parts passes over
// part: the executor that failed, and the executors after it, which never
// run, while the task uploads its outputs.
func skippedAfterFailure(prog taskmeta.Progress, part string) bool {
	if prog.Failed == nil {
		return false
	}
	_, isExec := taskmeta.ExecutorIndex(part)
	return part == prog.Failed.Part || (isExec && !prog.IsStarted(part))
}

// endedAfterFailure: a task that uploads after a failure and stops for
// another cause while it does (the outputs filer failed, say) ends
// EXECUTOR_ERROR all the same, with both reasons; a cancellation stays one.
func endedAfterFailure(plan Plan, prog taskmeta.Progress) Plan {
	if prog.Failed == nil || plan.Final == nil || plan.Final.State == tesv1.StateCanceled || plan.Final.State == tesv1.StateExecutorError {
		return plan
	}
	plan.Final = &Final{State: tesv1.StateExecutorError, Reason: prog.Failed.Reason + "\nUploading the outputs after the failure stopped: " + plan.Final.Reason}
	plan.State = tesv1.StateExecutorError
	return plan
}

// uploadedAfterFailure ends a task whose outputs filer passed after an
// executor failed: the uploaded files recorded, the PVC deleted (or kept),
// EXECUTOR_ERROR with the executor's reason.
func uploadedAfterFailure(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config) Plan {
	plan = recordOutputFileLogs(plan, prog, obs)
	return stop(plan, prog, cfg, tesv1.StateExecutorError, fmt.Sprintf("%s\nThe outputs the executors wrote were uploaded", prog.Failed.Reason))
}

// markPartialUpload marks each CreateJob of the outputs filer of a task
// that uploads after a failure (by the record the plan writes, or the
// anchor's), also one a redelivery creates again.
func markPartialUpload(plan *Plan, obs Observed) {
	prog := plan.Progress
	if prog == nil {
		p, err := taskmeta.ParseProgress(obs.Anchor.Annotations[taskmeta.AnnotationProgress])
		if err != nil {
			return
		}
		prog = &p
	}
	if prog.Failed == nil {
		return
	}
	for i, a := range plan.Actions {
		if a.Kind == CreateJob && a.Part == taskmeta.PartOutputsFiler {
			plan.Actions[i].Partial = true
		}
	}
}
