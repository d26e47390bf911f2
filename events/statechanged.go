package events

import (
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// TypeTaskStateChanged is the type of the event the handler publishes when
// a step records a change of a task's TES state. No Trigger of the handler
// takes it: it is for subscribers (docs/behaviour.md §5.8).
const TypeTaskStateChanged = "org.ga4gh.tes.task.state_changed"

// ExtensionNotify is the extension attribute that marks the state change
// events of a task that names an address of its own for them
// (taskmeta.TagNotifyURL) that the operator allows, with the value
// NotifyMarked: the chart's Trigger tesk-state-notify takes the events so
// marked to the handler's /notify, which reads the address from the task's
// anchor and posts them there. The address itself never travels on the
// event: every subscriber of the Broker, and its dead letter sink, gets it.
const ExtensionNotify = "tesknotify"

// NotifyMarked is the value of ExtensionNotify on a marked event.
const NotifyMarked = "true"

// StateChangedData is the data of org.ga4gh.tes.task.state_changed.
type StateChangedData struct {
	// ID is the task's TES id.
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Owner is who created the task (the TES API's caller), empty if
	// unknown.
	Owner    string `json:"owner"`
	OldState string `json:"old_state"`
	NewState string `json:"new_state"`
	// Time is when the new state was recorded (RFC 3339).
	Time string `json:"time"`
	// Reason says why a task that ended stopped (its system_logs, one line
	// each); empty for a state it passes through and mostly for COMPLETE.
	Reason string `json:"reason,omitempty"`
}

// StateChangedID is the id of a task's state change event: the namespace,
// the task and the new state, so that a redelivery, or the same change told
// again, has the same id (a task enters each state once).
func StateChangedID(namespace, task, state string) string {
	return namespace + "/" + task + "/" + state
}

// NewTaskStateChanged is the event of a task's state change: its type, id,
// source, subject (the task), time and data.
func NewTaskStateChanged(d StateChangedData, at time.Time) cloudevents.Event {
	d.Time = at.UTC().Format(time.RFC3339)
	ev := cloudevents.NewEvent()
	ev.SetType(TypeTaskStateChanged)
	ev.SetID(StateChangedID(d.Namespace, d.ID, d.NewState))
	ev.SetSource(SourceHandler)
	ev.SetSubject(d.ID)
	ev.SetTime(at.UTC())
	_ = ev.SetData(cloudevents.ApplicationJSON, d)
	return ev
}
