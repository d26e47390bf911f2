package steps

import (
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// submission starts a task: its whole sequence of parts is recorded. A task
// that can never run ends at once with SYSTEM_ERROR and why (behaviour §1.1,
// §8.5). With shares (cfg.Quota), a task of an owner starts only in a place
// of its owner's share (plan.Claim), and one that asks for more cores than
// a whole share can never run. ok is false when the plan is final.
func submission(plan Plan, obs Observed, cfg Config, now time.Time) (Plan, bool) {
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
	if owner := obs.Anchor.Labels[taskmeta.LabelCreator]; cfg.Quota.On() && owner != "" {
		cores := cfg.Quota.TaskCores(obs.Spec)
		if why := cfg.Quota.Never(cores); why != "" {
			plan.note("error", "%s", why)
			plan.Final = &Final{State: tesv1.StateSystemError, Reason: why}
			plan.State = tesv1.StateSystemError
			return plan, false
		}
		plan.Claim = &Claim{Owner: owner, Cores: cores}
	}
	began := now.UTC().Truncate(time.Second)
	prog := taskmeta.Progress{Parts: Parts(obs.Spec), Began: &began}
	plan.Progress = &prog
	return plan, true
}

// Parts is a task's sequence: the PVC if it needs one, the inputs filer if it
// has inputs, the executors, the outputs filer if it has outputs.
func Parts(t *taskspec.Task) []string {
	var parts []string
	if t.NeedsVolume() {
		parts = append(parts, taskmeta.PartPVC)
	}
	if len(t.Inputs) > 0 {
		parts = append(parts, taskmeta.PartInputsFiler)
	}
	for i := range t.Executors {
		parts = append(parts, taskmeta.ExecutorPart(i))
	}
	if len(t.Outputs) > 0 {
		parts = append(parts, taskmeta.PartOutputsFiler)
	}
	return parts
}
