package events

import "testing"

// TestWireNames holds the types and sources the project sends or matches to
// the words on the wire: the chart's Triggers and EventPolicies, and every
// subscriber, name them.
func TestWireNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{TypeTaskSubmitted, "task.submitted"},
		{TypeTaskCancelled, "task.cancelled"},
		{TypeJobFinished, "job.finished"},
		{TypePodStuck, "pod.stuck"},
		{TypePing, "dev.knative.sources.ping"},
		{TypeResourceAdd, "dev.knative.apiserver.resource.add"},
		{TypeResourceUpdate, "dev.knative.apiserver.resource.update"},
		{TypeResourceDelete, "dev.knative.apiserver.resource.delete"},
		{TypeRefAdd, "dev.knative.apiserver.ref.add"},
		{TypeRefUpdate, "dev.knative.apiserver.ref.update"},
		{TypeRefDelete, "dev.knative.apiserver.ref.delete"},
		{TypeTaskStateChanged, "org.ga4gh.tes.task.state_changed"},
		{SourceTESAPI, "tesk-knative/tes-api"},
		{SourceHandler, "tesk-knative/handler"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
