package steps

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// What the policies of Decide share: how a task ends (stop), the TES state
// of a part that runs or failed, a part's name in messages, and the pods of
// a job.

// stop ends the task: its PVC deleted (kept and released from the task with
// KEEP_FAILED_PVC), the final state written last, with why: one line, and a
// line for each job whose deletion was rejected (TES system_logs).
func stop(plan Plan, prog taskmeta.Progress, cfg Config, state, reason string) Plan {
	if prog.IsStarted(taskmeta.PartPVC) {
		if cfg.KeepFailedPVC {
			plan.Actions = append(plan.Actions, Action{Kind: ReleasePVC, Part: taskmeta.PartPVC})
		} else {
			plan.Actions = append(plan.Actions, Action{Kind: DeletePVC, Part: taskmeta.PartPVC})
		}
	}
	for _, k := range prog.Kept {
		reason += "\n" + k.Reason
	}
	plan.Final = &Final{State: state, Reason: reason}
	plan.State = state
	return plan
}

// failedState is the TES state of a task stopped by a failed part: an
// executor's failure is the executor's error, a filer's the system's.
func failedState(part string) string {
	if _, ok := taskmeta.ExecutorIndex(part); ok {
		return tesv1.StateExecutorError
	}
	return tesv1.StateSystemError
}

// phaseOf is the TES state while a part runs.
func phaseOf(part string) string {
	if part == taskmeta.PartPVC || part == taskmeta.PartInputsFiler {
		return tesv1.StateInitializing
	}
	return tesv1.StateRunning
}

// describe names a part for messages.
func DescribePart(task, part string) string {
	if part == taskmeta.PartPVC {
		return fmt.Sprintf("PVC '%s'", taskmeta.PVCName(task))
	}
	return fmt.Sprintf("job '%s'", taskmeta.ObjectName(task, part))
}

// podsOfJob returns the pods the Job controller created for the job.
func podsOfJob(pods []*corev1.Pod, job string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Labels[batchv1.JobNameLabel] == job || p.Labels["job-name"] == job {
			out = append(out, p)
		}
	}
	return out
}

// Anchor is taskmeta.Anchor, the object that owns a task's PVC and jobs.
type Anchor = taskmeta.Anchor
