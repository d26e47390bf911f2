package taskmeta

import "testing"

// TestKubeEventReasons holds the reasons of the Kubernetes Events on a
// task's anchor to the words `kubectl describe` shows and the TES API's
// timeline reads.
func TestKubeEventReasons(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{ReasonStarted, "Started"},
		{ReasonJobCreated, "JobCreated"},
		{ReasonJobFailed, "JobFailed"},
		{ReasonJobDeleted, "JobDeleted"},
		{ReasonPreempted, "Preempted"},
		{ReasonCancelled, "Cancelled"},
		{ReasonEnded, "Ended"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
