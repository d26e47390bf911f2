package steps

import (
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// submission starts a task: its whole sequence of parts is recorded. A task
// that can never run ends at once with SYSTEM_ERROR and why (behaviour §1.1,
// §8.5). ok is false when the plan is final.
func submission(plan Plan, obs Observed) (Plan, bool) {
	if obs.Unreadable != "" {
		plan.note("error", "%s", obs.Unreadable)
		plan.Final = &Final{State: tesv1.StateSystemError, Reason: obs.Unreadable}
		plan.State = tesv1.StateSystemError
		return plan, false
	}
	if obs.Spec == nil {
		plan.State = tesv1.StateQueued
		return plan, false
	}
	if err := obs.Spec.Refusal(); err != nil {
		plan.note("error", "%v", err)
		plan.Final = &Final{State: tesv1.StateSystemError, Reason: err.Error()}
		plan.State = tesv1.StateSystemError
		return plan, false
	}
	prog := taskmeta.Progress{Parts: Parts(obs.Spec)}
	plan.Progress = &prog
	return plan, true
}
