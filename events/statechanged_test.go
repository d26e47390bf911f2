package events

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
)

// A state change's event: its attributes, its id the same for the same
// task entering the same state (idempotent for subscribers), its data; the
// handler itself refuses it, so that a Trigger sending it back cannot loop.
func TestNewTaskStateChanged(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	ev := NewTaskStateChanged(StateChangedData{ID: "task-1", Namespace: "tesk", Owner: "alice", OldState: "RUNNING", NewState: "EXECUTOR_ERROR", Reason: "Job 'task-1-ex-00' failed"}, at)
	if err := ev.Validate(); err != nil {
		t.Fatal(err)
	}
	if ev.Type() != "org.ga4gh.tes.task.state_changed" || ev.ID() != "tesk/task-1/EXECUTOR_ERROR" || ev.Source() != "tesk-knative/handler" ||
		ev.Subject() != "task-1" || !ev.Time().Equal(at) || ev.DataContentType() != cloudevents.ApplicationJSON {
		t.Errorf("attributes: type %q, id %q, source %q, subject %q, time %v, content type %q", ev.Type(), ev.ID(), ev.Source(), ev.Subject(), ev.Time(), ev.DataContentType())
	}
	var data map[string]string
	if err := json.Unmarshal(ev.Data(), &data); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "task-1", "namespace": "tesk", "owner": "alice", "old_state": "RUNNING", "new_state": "EXECUTOR_ERROR",
		"time": "2026-01-02T02:04:05Z", "reason": "Job 'task-1-ex-00' failed"}
	if !reflect.DeepEqual(data, want) {
		t.Errorf("data %v\nwant %v", data, want)
	}
	again := NewTaskStateChanged(StateChangedData{ID: "task-1", Namespace: "tesk", OldState: "RUNNING", NewState: "EXECUTOR_ERROR"}, at.Add(time.Minute))
	if again.ID() != ev.ID() {
		t.Errorf("the same change told again has id %q, first %q", again.ID(), ev.ID())
	}
	if other := NewTaskStateChanged(StateChangedData{ID: "task-1", Namespace: "tesk", OldState: "QUEUED", NewState: "RUNNING"}, at); other.ID() == ev.ID() {
		t.Errorf("another state has the same id %q", other.ID())
	}
	if _, err := Classify(&ev, "tesk"); err == nil || !invalid.Is(err) {
		t.Errorf("the handler classifies its own state event: %v; want it refused as invalid", err)
	}
}
