package steps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// failedJob: a failed job stops the task, unless it is an executor's that
// ignores errors and that the service did not end itself; that one passes
// once Kubernetes marked it Failed (behaviour §1.5, §1.6, §1.10).
func failedJob(plan Plan, prog taskmeta.Progress, cfg Config, now time.Time, part string, job *batchv1.Job, state string) (Plan, bool) {
	if _, isExec := taskmeta.ExecutorIndex(part); isExec && taskmeta.IgnoresErrors(job) && !taskmeta.EndedByService(job) && !prog.IsFailing(part) {
		if taskmeta.IsMarkedFailed(job) {
			plan.note("warn", "Executor job '%s' failed; ignoring the error", job.Name)
			return plan, true
		}
		if since, ok := taskmeta.FailureSince(job); ok && now.Sub(since) >= cfg.PodTimeout {
			msg := fmt.Sprintf("Executor job '%s' failed (ignore-error) but Kubernetes didn't mark it Failed within %s", job.Name, secs(cfg.PodTimeout))
			plan.note("error", "%s", msg)
			return stop(plan, prog, cfg, tesv1.StateSystemError, msg), false
		}
		plan.State = state
		return plan, false // its pods are still ending
	}
	msg := fmt.Sprintf("Job '%s' failed%s", job.Name, failureDetail(job))
	if why := job.Annotations[taskmeta.AnnotationFailed]; why != "" {
		// The service failed it: say why.
		msg = fmt.Sprintf("Job '%s' was failed: %s", job.Name, why)
	}
	plan.note("info", "%s", msg)
	return stop(plan, prog, cfg, failedStateOf(part, job), msg), false
}

// failedStateOf is the final state of a task whose part's job failed: the
// one the service failed it for (PREEMPTED), else the part's failure
// state.
func failedStateOf(part string, job *batchv1.Job) string {
	if s := job.Annotations[taskmeta.AnnotationFailedState]; s == tesv1.StatePreempted && taskmeta.EndedByService(job) {
		return s
	}
	return failedState(part)
}

// preempted counts the pods the cluster took from an executor's job
// (evicted, preempted, lost with their node: the DisruptionTarget
// condition), which Kubernetes runs again without spending the executor's
// retries (the job's pod failure policy): each new one is recorded on the
// job; one more than MaxPreemptions fails the job, and the task ends
// PREEMPTED (behaviour §1.21). It reports whether it failed the job.
func preempted(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config, part string, job *batchv1.Job, state string) (Plan, bool) {
	counted := taskmeta.PreemptedPods(job)
	var fresh []string
	why := ""
	for _, pod := range podsOfJob(obs.Pods, job.Name) {
		reason, message, ok := taskmeta.Disrupted(pod)
		if !ok || pod.Status.Phase == corev1.PodSucceeded {
			continue
		}
		why = fmt.Sprintf("pod '%s': %s", pod.Name, joinReason(reason, message))
		if !slices.Contains(counted, pod.Name) {
			fresh = append(fresh, pod.Name)
		}
	}
	if len(fresh) > 0 {
		plan.Actions = append(plan.Actions, Action{Kind: RecordPreemption, Part: part, Pods: strings.Join(fresh, ","), Reason: why})
	}
	n := len(counted) + len(fresh)
	if n <= cfg.MaxPreemptions || prog.IsFailing(part) {
		return plan, false
	}
	if why == "" {
		why = "pods " + strings.Join(append(counted, fresh...), ", ")
	}
	msg := fmt.Sprintf("Executor job '%s' lost its pod to the cluster %d times, more than it is run again (%d, EXECUTOR_MAX_PREEMPTIONS); last %s", job.Name, n, cfg.MaxPreemptions, why)
	plan.note("error", "%s", msg)
	plan = failJob(plan, prog, part, msg, state)
	plan.Actions[len(plan.Actions)-1].State = tesv1.StatePreempted
	return plan, true
}

// checkPods fails a running job whose pods cannot start within the pod
// timeout, and ends a task whose pod was not scheduled within
// TESK_MAX_QUEUE_SECONDS.
func checkPods(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config, now time.Time, part string, job *batchv1.Job, state string) Plan {
	if _, isExec := taskmeta.ExecutorIndex(part); isExec {
		var failed bool
		if plan, failed = preempted(plan, prog, obs, cfg, part, job, state); failed {
			return plan
		}
	}
	pods := podsOfJob(obs.Pods, job.Name)
	queued := false
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
			continue
		}
		if reason, message := taskmeta.CannotStart(pod); reason != "" {
			since := pod.CreationTimestamp.Time
			if pod.Status.StartTime != nil {
				since = pod.Status.StartTime.Time
			}
			if now.Sub(since) >= cfg.PodTimeout {
				msg := fmt.Sprintf("Pod '%s' of job '%s' couldn't start within %s: %s", pod.Name, job.Name, secs(cfg.PodTimeout), joinReason(reason, message))
				plan.note("error", "%s", msg)
				return failJob(plan, prog, part, msg, state)
			}
			continue
		}
		if message, ok := taskmeta.Unschedulable(pod); ok {
			queued = true
			if cfg.MaxQueue > 0 && now.Sub(pod.CreationTimestamp.Time) >= cfg.MaxQueue {
				msg := fmt.Sprintf("Pod '%s' of job '%s' wasn't scheduled within %s: %s", pod.Name, job.Name, secs(cfg.MaxQueue), message)
				plan.note("error", "%s", msg)
				if taskmeta.IsFilerPart(part) || ranBefore(job, pods) {
					return failJob(plan, prog, part, msg, state)
				}
				next := prog.WithEnded(part, msg)
				plan.Progress = &next
				plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: msg})
				return stop(plan, next, cfg, tesv1.StateSystemError, msg)
			}
		}
	}
	if (queued || noPodYet(prog, part, job, pods)) && state == tesv1.StateRunning && job.Status.Succeeded == 0 && job.Status.Failed == 0 && !anyRunning(pods) {
		state = tesv1.StateQueued
	}
	plan.State = state
	return plan
}

// noPodYet reports whether the task's first executor's job has no pod and
// never had one (the Job controller has yet to create it, or a
// ResourceQuota refuses its creates) and no inputs filer ran before it:
// the task waits as for a node. Where a part ran before (an executor, the
// inputs filer), the job without its pod leaves the task RUNNING: the
// state does not go back.
func noPodYet(prog taskmeta.Progress, part string, job *batchv1.Job, pods []*corev1.Pod) bool {
	i, isExec := taskmeta.ExecutorIndex(part)
	return isExec && i == 0 && !slices.Contains(prog.Started, taskmeta.PartInputsFiler) &&
		len(pods) == 0 && job.Status.Active == 0 && len(taskmeta.PreemptedPods(job)) == 0
}

// failJob fails a part's job, recorded first: in doubt (the patch got an
// error, then the job failed on its own), the task stops all the same.
func failJob(plan Plan, prog taskmeta.Progress, part, reason, state string) Plan {
	if !prog.IsFailing(part) {
		next := prog.WithFailing(part)
		plan.Progress = &next
	}
	plan.Actions = append(plan.Actions, Action{Kind: FailJob, Part: part, Reason: reason})
	plan.State = state
	return plan
}
