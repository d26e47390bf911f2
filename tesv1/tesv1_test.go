package tesv1

import "testing"

// TestIsFinal: the states a task never leaves in TES 1.1 are the four ends
// this service sets and PREEMPTED, which another server may set; a task in
// any other state, CANCELING and PAUSED included, may still change.
func TestIsFinal(t *testing.T) {
	final := map[string]bool{StateComplete: true, StateExecutorError: true, StateSystemError: true, StateCanceled: true, "PREEMPTED": true}
	for _, s := range States {
		if got := IsFinal(s); got != final[s] {
			t.Errorf("IsFinal(%s) = %v, want %v", s, got, final[s])
		}
	}
	if IsFinal("") || IsFinal("complete") {
		t.Error("a state that is not a tesState is final")
	}
}
