package steps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// cancel stops a cancelled task: no further job, the running jobs deleted
// (recorded first, as the service's own ends), the jobs that ended kept;
// CANCELED once the deleted jobs are gone (behaviour §1.18). A part recorded
// moments ago whose job does not exist yet may still be being created by
// another step: the task stays CANCELING until it shows (and is deleted) or
// the grace period passes. A job whose deletion was rejected is kept, and one
// still terminating --pod-timeout after its deletion is waited for no more:
// the task ends CANCELED all the same, saying so (behaviour §8.3).
// cancelledReason is why the service ends the running parts of a task
// cancelled: recorded on the anchor, it says the task is CANCELING
// (RecordedState).
const cancelledReason = "Task cancelled"

func cancel(plan Plan, prog taskmeta.Progress, obs Observed, cfg Config, now time.Time) Plan {
	going := false
	next := prog
	var lines []string
	for _, part := range sortedParts(obs.Jobs) {
		job := obs.Jobs[part]
		if _, kept := prog.KeptReason(part); kept {
			continue // stop says why
		}
		if taskmeta.IsGone(job) {
			if now.Sub(job.DeletionTimestamp.Time) >= cfg.PodTimeout {
				lines = append(lines, fmt.Sprintf("Job '%s' was still terminating %s after it was deleted", job.Name, secs(cfg.PodTimeout)))
				continue
			}
			going = true
			continue
		}
		if taskmeta.StatusOf(job) == taskmeta.JobRunning {
			next = next.WithEnded(part, cancelledReason)
			plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: "task cancelled"})
			going = true
		}
	}
	for _, part := range prog.Running() {
		_, ended := prog.EndedReason(part)
		if obs.Jobs[part] == nil && !ended && prog.Last != nil && slices.Contains(prog.Last.Parts, part) && now.Sub(prog.Last.At) < recordedMissingGrace {
			going = true
		}
	}
	if len(next.Ended) != len(prog.Ended) {
		plan.Progress = &next
	}
	if going {
		plan.State = tesv1.StateCanceling
		return plan
	}
	if len(lines) > 0 {
		plan.note("warn", "%s", strings.Join(lines, "; "))
	}
	return stop(plan, prog, cfg, tesv1.StateCanceled, strings.Join(append([]string{"Task cancelled"}, lines...), "\n"))
}
