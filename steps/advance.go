package steps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// advance walks the task's parts in order: it looks at each started part's
// job, starts the next part once the ones before it passed, and completes the
// task after the last.
func advance(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config, now time.Time) Plan {
	var toStart, passed []string
	state := tesv1.StateQueued
	for _, part := range prog.Parts {
		if skippedAfterFailure(prog, part) {
			continue
		}
		if !prog.IsStarted(part) {
			toStart = append(toStart, part)
			if part == taskmeta.PartPVC {
				continue // the PVC and the first job start together
			}
			break
		}
		if part == taskmeta.PartPVC {
			if reason, ok := prog.EndedReason(part); ok {
				// The API server rejected the claim (behaviour §8.6).
				return stop(plan, prog, cfg, tesv1.StateSystemError, reason)
			}
			if prog.InLastBatch(part, obs.Event) {
				plan.Actions = append(plan.Actions, Action{Kind: CreatePVC, Part: part})
			}
			continue
		}
		state = phaseOf(part)
		if prog.IsDone(part) {
			continue
		}
		var ok bool
		if plan, ok = partJob(plan, prog, obs, cfg, now, part, state); !ok {
			return endedAfterFailure(plan, prog)
		}
		passed = append(passed, part)
	}

	if len(toStart) > 0 {
		if cfg.MaxRun > 0 && prog.Began != nil {
			plan.Deadline = prog.Began.Add(cfg.MaxRun)
			if !now.Before(plan.Deadline) {
				msg := fmt.Sprintf("The task ran past its time limit of %s (TASK_MAX_RUN_SECONDS) before %s could start", secs(cfg.MaxRun), DescribePart(obs.Anchor.Name, toStart[len(toStart)-1]))
				plan.note("error", "%s", msg)
				return stop(plan, prog.WithDone(passed...), cfg, failedState(toStart[len(toStart)-1]), msg)
			}
		}
		plan = startParts(plan, prog.WithDone(passed...), obs.Event, now, toStart)
		plan.State = phaseOf(toStart[len(toStart)-1])
		return plan
	}
	if prog.Failed != nil {
		return uploadedAfterFailure(plan, prog, obs, cfg)
	}
	return complete(plan, prog, obs)
}

// partJob looks at a started part's job. ok is true when the part passed
// (its job completed, or failed ignoring errors); otherwise the plan is the
// step's: wait, fail the job, or stop the task.
func partJob(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config, now time.Time, part, state string) (Plan, bool) {
	task := obs.Anchor.Name
	job := obs.Jobs[part]
	if reason, ok := prog.EndedReason(part); ok {
		// The service ended this part itself: the task stops, also when
		// the job then ended on its own (in doubt, the task stops). A job
		// of the task that still runs is one whose deletion failed: delete
		// it again, unless its deletion was rejected (behaviour §1.13).
		if _, kept := prog.KeptReason(part); !kept && job != nil && !taskmeta.IsGone(job) && taskmeta.StatusOf(job) == taskmeta.JobRunning && taskmeta.OwnedBy(job, obs.Anchor.UID) {
			plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: reason})
		}
		return stop(plan, prog, cfg, tesv1.StateSystemError, reason), false
	}
	if job == nil || taskmeta.IsGone(job) {
		if job == nil && prog.InLastBatch(part, obs.Event) {
			// A redelivery of the event that recorded the part: its first
			// attempt may have stopped before it created it.
			plan.Actions = append(plan.Actions, Action{Kind: CreateJob, Part: part})
			plan.State = state
			return plan, false
		}
		if job == nil && obs.Gone != part && prog.Last != nil && slices.Contains(prog.Last.Parts, part) {
			if now.Sub(prog.Last.At) < recordedMissingGrace {
				// Recorded moments ago by another event, which may still be
				// creating it.
				plan.State = state
				return plan, false
			}
			// Past the grace, a job of the last record with no sign that it
			// ever existed (no deletion reported, none of its pods left)
			// was never created: the step that recorded it was cut short
			// and its event is not coming back (behaviour §6.5).
			if obs.Pods == nil {
				return waitForPods(plan, state), false
			}
			if len(podsOfJob(obs.Pods, taskmeta.ObjectName(task, part))) == 0 {
				return redo(plan, prog, obs, now, state), false
			}
		}
		msg := fmt.Sprintf("%s was deleted while it ran", Capitalize(DescribePart(task, part)))
		plan.note("error", "%s", msg)
		return stop(plan, prog, cfg, tesv1.StateSystemError, msg), false
	}
	switch taskmeta.StatusOf(job) {
	case taskmeta.JobComplete:
		return plan, true
	case taskmeta.JobFailed:
		failed, ok := failedJob(plan, prog, cfg, now, part, job, state)
		if up, uploads := uploadFirst(plan, failed, prog, obs, cfg, now, part); uploads {
			return up, false
		}
		return failed, ok
	}
	if taskmeta.EndedByService(job) {
		if at, ok := taskmeta.FailedAt(job); ok && now.Sub(at) >= cfg.PodTimeout {
			msg := fmt.Sprintf("Job '%s' was failed (%s) but Kubernetes didn't mark it Failed within %s; it is kept", job.Name, job.Annotations[taskmeta.AnnotationFailed], secs(cfg.PodTimeout))
			plan.note("error", "%s", msg)
			return stop(plan, prog, cfg, failedStateOf(part, job), msg), false
		}
		plan.State = state
		return plan, false
	}
	if obs.Pods == nil {
		return waitForPods(plan, state), false
	}
	return checkPods(plan, prog, obs, cfg, now, part, job, state), false
}

// waitForPods: the decision needs the task's pods, which the step did not
// read; a step that reads them (a pod's event, the sweep) decides.
func waitForPods(plan Plan, state string) Plan {
	plan.NeedsPods = true
	plan.State = state
	return plan
}

// redo records the last record's parts again, as this step's, and creates
// them: the PVC (AlreadyExists if it was created) and the jobs not done.
func redo(plan Plan, prog taskmeta.Progress, obs Observed, now time.Time, state string) Plan {
	var parts []string
	for _, part := range prog.Last.Parts {
		if !prog.IsDone(part) {
			parts = append(parts, part)
		}
	}
	plan = startParts(plan, prog, obs.Event, now, parts)
	plan.note("warn", "%s recorded as started %s ago was never created (the step that recorded it was cut short and its event did not come again); creating it now",
		Capitalize(strings.Join(describeAll(obs.Anchor.Name, parts), ", ")), secs(now.Sub(prog.Last.At)))
	plan.State = state
	return plan
}

// startParts starts parts in this step: it records them in prog as started
// by event at now, and creates each, the PVC as a claim and every other part
// as its job.
func startParts(plan Plan, prog taskmeta.Progress, event string, now time.Time, parts []string) Plan {
	next := prog.WithStarted(event, now, parts...)
	plan.Progress = &next
	for _, part := range parts {
		kind := CreateJob
		if part == taskmeta.PartPVC {
			kind = CreatePVC
		}
		plan.Actions = append(plan.Actions, Action{Kind: kind, Part: part})
	}
	return plan
}

func describeAll(task string, parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = DescribePart(task, p)
	}
	return out
}

// recordOutputFileLogs records the files the outputs filer uploaded, once.
func recordOutputFileLogs(plan Plan, prog taskmeta.Progress, obs Observed) Plan {
	if slices.Contains(prog.Parts, taskmeta.PartOutputsFiler) {
		if j := obs.Jobs[taskmeta.PartOutputsFiler]; j != nil && j.Annotations[taskmeta.AnnotationOutputFileLogs] == "" {
			plan.Actions = append(plan.Actions, Action{Kind: RecordOutputFileLogs, Part: taskmeta.PartOutputsFiler})
		}
	}
	return plan
}

// complete ends a task whose parts all passed: the uploaded files recorded,
// the PVC deleted, COMPLETE written (behaviour §1.3, §1.7).
func complete(plan Plan, prog taskmeta.Progress, obs Observed) Plan {
	plan = recordOutputFileLogs(plan, prog, obs)
	if prog.IsStarted(taskmeta.PartPVC) {
		plan.Actions = append(plan.Actions, Action{Kind: DeletePVC, Part: taskmeta.PartPVC})
	}
	plan.Final = &Final{State: tesv1.StateComplete}
	plan.State = tesv1.StateComplete
	return plan
}
