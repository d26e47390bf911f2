// Package events decodes the CloudEvents the service receives, validates
// their data, and classifies each into the step it asks for: the four step
// types, Job, Pod and ConfigMap changes from a Knative ApiServerSource, and
// the PingSource's sweep. It builds the step events the TES API sends
// (NewTaskSubmitted, NewTaskCancelled).
package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The step types (the CloudEvent type attribute).
const (
	TypeTaskSubmitted = "task.submitted"
	TypeTaskCancelled = "task.cancelled"
	TypeJobFinished   = "job.finished"
	TypePodStuck      = "pod.stuck"

	// TypePing is a PingSource event: the sweep.
	TypePing = "dev.knative.sources.ping"
	// apiServerPrefix starts the ApiServerSource types
	// (dev.knative.apiserver.resource.add, ...ref.delete, ...).
	apiServerPrefix = "dev.knative.apiserver."
)

// The sources (the CloudEvent source attribute) of the events the project
// sends.
const (
	// SourceTESAPI is the source of the step events the TES API sends
	// (task.submitted, task.cancelled).
	SourceTESAPI = "tesk-knative/tes-api"
	// SourceHandler is the source of the events the handler publishes.
	SourceHandler = "tesk-knative/handler"
)

// MaxBodyBytes bounds a request body: a task JSON fits in a ConfigMap (1 MiB),
// and an ApiServerSource event carries one object.
const MaxBodyBytes = 3 << 20

// MaxTaskNameLen keeps every name derived from a task a valid label value:
// <task>-outputs-filer is at most 63 characters.
const MaxTaskNameLen = 63 - len("-outputs-filer")

// Kind is what a step does.
type Kind string

const (
	KindSubmit    Kind = "submit"
	KindCancel    Kind = "cancel"
	KindReconcile Kind = "reconcile" // look at the task again (job.finished)
	KindPods      Kind = "pods"      // look at the task and its pods (pod.stuck)
	KindSweep     Kind = "sweep"
	KindIgnore    Kind = "ignore"
)

// Step is what an event asks for.
type Step struct {
	Kind      Kind            `json:"kind"`
	Task      string          `json:"task,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Job       string          `json:"job,omitempty"`
	Pod       string          `json:"pod,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Input     json.RawMessage `json:"-"`
	// Deleted is set for the deletion of Job: it existed.
	Deleted bool `json:"deleted,omitempty"`
	// Seen is the job as a Resource-mode event carried it, once it has
	// ended: its end is final, so the step need not read it again.
	Seen *batchv1.Job `json:"-"`
	// Why says why an event is ignored.
	Why string `json:"why,omitempty"`
}

// bad is an event that can never succeed.
func bad(format string, a ...any) error { return invalid.Errorf(format, a...) }

// FromHTTP decodes a CloudEvents 1.0 request, binary or structured mode, and
// validates it. The body is bounded by MaxBodyBytes.
func FromHTTP(req *http.Request) (*cloudevents.Event, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return nil, bad("the request body is larger than %d bytes", MaxBodyBytes)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	msg := cehttp.NewMessageFromHttpRequest(req)
	defer func() { _ = msg.Finish(nil) }()
	if msg.ReadEncoding() == binding.EncodingUnknown {
		return nil, bad("not a CloudEvent: no ce-specversion header (binary mode) and no Content-Type application/cloudevents+json (structured mode)")
	}
	ev, err := binding.ToEvent(req.Context(), msg)
	if err != nil {
		return nil, bad("not a valid CloudEvent: %v", err)
	}
	if err := ev.Validate(); err != nil {
		return nil, bad("not a valid CloudEvent: %v", err)
	}
	return ev, nil
}

// SubmittedData is the data of task.submitted.
type SubmittedData struct {
	Task      string          `json:"task"`
	Namespace string          `json:"namespace,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// CancelledData is the data of task.cancelled.
type CancelledData struct {
	Task      string `json:"task"`
	Namespace string `json:"namespace,omitempty"`
}

// NewTaskSubmitted is the task.submitted event of a task whose anchor is on
// the cluster (no input): its type, its subject (the task) and its data. The
// sender sets its id and source.
func NewTaskSubmitted(task, namespace string) cloudevents.Event {
	return newStepEvent(TypeTaskSubmitted, task, SubmittedData{Task: task, Namespace: namespace})
}

// NewTaskCancelled is the task.cancelled event of a task: its type, its
// subject (the task) and its data. The sender sets its id and source.
func NewTaskCancelled(task, namespace string) cloudevents.Event {
	return newStepEvent(TypeTaskCancelled, task, CancelledData{Task: task, Namespace: namespace})
}

// newStepEvent is a step's event of type typ about a task, with its data
// as JSON.
func newStepEvent(typ, task string, data any) cloudevents.Event {
	ev := cloudevents.NewEvent()
	ev.SetType(typ)
	ev.SetSubject(task)
	_ = ev.SetData(cloudevents.ApplicationJSON, data)
	return ev
}

// JobFinishedData is the data of job.finished.
type JobFinishedData struct {
	Task      string `json:"task"`
	Namespace string `json:"namespace,omitempty"`
	Job       string `json:"job"`
}

// PodStuckData is the data of pod.stuck.
type PodStuckData struct {
	Task      string `json:"task"`
	Namespace string `json:"namespace,omitempty"`
	Job       string `json:"job"`
	Pod       string `json:"pod"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Classify turns an event into its step. namespace is the service's: a step
// for another namespace can never succeed.
func Classify(ev *cloudevents.Event, namespace string) (Step, error) {
	t := ev.Type()
	switch {
	case t == TypeTaskSubmitted:
		var d SubmittedData
		if err := decodeData(ev, &d); err != nil {
			return Step{}, err
		}
		if string(bytes.TrimSpace(d.Input)) == "null" {
			d.Input = nil
		}
		if len(bytes.TrimSpace(d.Input)) > 0 && !bytes.HasPrefix(bytes.TrimSpace(d.Input), []byte("{")) {
			return Step{}, bad("data.input: the task JSON must be an object")
		}
		return checked(Step{Kind: KindSubmit, Task: d.Task, Namespace: d.Namespace, Input: d.Input}, namespace)
	case t == TypeTaskCancelled:
		var d CancelledData
		if err := decodeData(ev, &d); err != nil {
			return Step{}, err
		}
		return checked(Step{Kind: KindCancel, Task: d.Task, Namespace: d.Namespace}, namespace)
	case t == TypeJobFinished:
		var d JobFinishedData
		if err := decodeData(ev, &d); err != nil {
			return Step{}, err
		}
		if d.Job == "" {
			return Step{}, bad("data.job is missing")
		}
		return checked(Step{Kind: KindReconcile, Task: d.Task, Namespace: d.Namespace, Job: d.Job}, namespace)
	case t == TypePodStuck:
		var d PodStuckData
		if err := decodeData(ev, &d); err != nil {
			return Step{}, err
		}
		if d.Job == "" || d.Pod == "" {
			return Step{}, bad("data.job and data.pod are required")
		}
		return checked(Step{Kind: KindPods, Task: d.Task, Namespace: d.Namespace, Job: d.Job, Pod: d.Pod, Reason: d.Reason, Message: d.Message}, namespace)
	case t == TypePing:
		return Step{Kind: KindSweep, Namespace: namespace}, nil
	case strings.HasPrefix(t, apiServerPrefix):
		return classifyAPIServer(ev, namespace)
	}
	return Step{}, bad("unknown event type %q: this service takes %s, %s, %s, %s, %s and %s* events",
		t, TypeTaskSubmitted, TypeTaskCancelled, TypeJobFinished, TypePodStuck, TypePing, apiServerPrefix)
}

// decodeData decodes a step's JSON data strictly: unknown fields are errors.
func decodeData(ev *cloudevents.Event, into any) error {
	if ct := ev.DataMediaType(); ct != "" && ct != "application/json" && !strings.HasSuffix(ct, "+json") {
		return bad("%s: data must be application/json, not %q", ev.Type(), ct)
	}
	data := ev.Data()
	if len(bytes.TrimSpace(data)) == 0 {
		return bad("%s: the event has no data", ev.Type())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return bad("%s: data is not valid: %v", ev.Type(), err)
	}
	if dec.More() {
		return bad("%s: data has more than one JSON value", ev.Type())
	}
	return nil
}

// checked validates the task and namespace of a step.
func checked(s Step, namespace string) (Step, error) {
	if s.Task == "" {
		return Step{}, bad("data.task is missing")
	}
	if errs := validation.IsDNS1123Label(s.Task); len(errs) > 0 {
		return Step{}, bad("data.task %q is not a valid task name: %s", s.Task, strings.Join(errs, "; "))
	}
	if len(s.Task) > MaxTaskNameLen {
		return Step{}, bad("data.task %q is longer than %d characters", s.Task, MaxTaskNameLen)
	}
	if s.Namespace == "" {
		s.Namespace = namespace
	}
	if s.Namespace != namespace {
		return Step{}, bad("data.namespace %q is not this service's namespace %q", s.Namespace, namespace)
	}
	return s, nil
}
