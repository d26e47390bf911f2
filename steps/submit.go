package steps

// submission starts a task: its whole sequence of parts is recorded. A task
// that can never run ends at once with SYSTEM_ERROR and why (behaviour §1.1,
// §8.5). ok is false when the plan is final.
func submission(plan Plan, obs Observed) (Plan, bool) {
	if obs.Unreadable != "" {
		plan.note("error", "%s", obs.Unreadable)
		plan.Final = &Final{State: StateSystemError, Reason: obs.Unreadable}
		plan.State = StateSystemError
		return plan, false
	}
	if obs.Spec == nil {
		plan.State = StateQueued
		return plan, false
	}
	if err := obs.Spec.Refusal(); err != nil {
		plan.note("error", "%v", err)
		plan.Final = &Final{State: StateSystemError, Reason: err.Error()}
		plan.State = StateSystemError
		return plan, false
	}
	prog := Progress{Parts: Parts(obs.Spec)}
	plan.Progress = &prog
	return plan, true
}
