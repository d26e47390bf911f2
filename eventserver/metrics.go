package eventserver

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"knative.dev/pkg/observability/tracing"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// The handler's instruments. No attribute names a task: each has a few
// values at most.
const (
	MetricEvents       = "tesk.events"
	MetricStepDuration = "tesk.step.duration"
	MetricActions      = "tesk.actions"
	MetricTasksEnded   = "tesk.tasks.ended"
	// MetricStateEvents counts the tasks' state change events the handler
	// published (StateSink), by outcome: delivered or failed.
	MetricStateEvents = "tesk.state_events"
	// The gauges of the last sweep's counts (SweptTasks).
	MetricTasks        = "tesk.tasks"
	MetricTasksQueued  = "tesk.tasks.queued"
	MetricTasksStepAge = "tesk.tasks.step.age"
	// MetricUserTasks is each named owner's tasks, active or waiting for
	// its share (METRICS_USERS names the owners).
	MetricUserTasks = "tesk.user.tasks"
)

// SweepFresh is how long a replica reports the counts of the sweep it took
// last: the PingSource sweeps every minute, so past three minutes another
// replica took the later sweeps, or none was taken.
const SweepFresh = 3 * time.Minute

// The attributes of the handler's metrics and spans.
const (
	AttrEventType  = "cloudevents.event_type"
	AttrOutcome    = "tesk.outcome"
	AttrActionKind = "tesk.action.kind"
	AttrState      = "tesk.task.state"
	// AttrUser is an owner's creator-user-id, or steps.OtherUsers; on
	// MetricUserTasks only, whose owners are bounded by METRICS_USERS.
	AttrUser = "tesk.user"
	// AttrUserTasks is which of an owner's tasks: active or waiting.
	AttrUserTasks = "tesk.user.tasks.kind"
	// AttrTask is on spans only, never on a metric.
	AttrTask = "tesk.task"
)

// The outcomes of an event.
const (
	OutcomeDone    = "done"    // the step was taken
	OutcomeIgnored = "ignored" // nothing to do
	OutcomeRefused = "refused" // 4xx: it can never succeed
	OutcomeFailed  = "failed"  // 5xx: it should come again
)

// knownTypes are the event types the metrics name; any other is "other".
var knownTypes = map[string]bool{
	events.TypeTaskSubmitted: true, events.TypeTaskCancelled: true, events.TypeJobFinished: true, events.TypePodStuck: true,
	events.TypePing:           true,
	events.TypeResourceAdd:    true,
	events.TypeResourceUpdate: true,
	events.TypeResourceDelete: true,
	events.TypeRefAdd:         true,
	events.TypeRefUpdate:      true,
	events.TypeRefDelete:      true,
}

// EventType is the event type as a metric names it: one of the types the
// handler takes, or "other".
func EventType(t string) string {
	if knownTypes[t] {
		return t
	}
	return "other"
}

// Outcome is the outcome of an answer's status code.
func Outcome(status int, ignored bool) string {
	switch {
	case status >= 500:
		return OutcomeFailed
	case status >= 400:
		return OutcomeRefused
	case ignored:
		return OutcomeIgnored
	}
	return OutcomeDone
}

// Telemetry are the handler's instruments and tracer.
type Telemetry struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	events   metric.Int64Counter
	duration metric.Float64Histogram
	actions  metric.Int64Counter
	ended    metric.Int64Counter
	states   metric.Int64Counter

	swept atomic.Pointer[sweptCounts]
	users atomic.Pointer[sweptUsers]
	// now is the clock of the gauges (time.Now).
	now func() time.Time
}

// sweptCounts are a sweep's counts, as the gauges report them.
type sweptCounts struct {
	at     time.Time
	states map[string]int
	queued int
	oldest map[string]time.Time
}

// sweptUsers are a sweep's counts of the owners it names.
type sweptUsers struct {
	at    time.Time
	users map[string]steps.UserCounts
}

// NewTelemetry makes the handler's instruments with mp and its spans with tp;
// the trace context is W3C's (traceparent, tracestate).
func NewTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*Telemetry, error) {
	m := mp.Meter(telemetry.Scope)
	s := &Telemetry{tracer: tp.Tracer(telemetry.Scope), prop: tracing.DefaultTextMapPropagator(), now: time.Now}
	var err error
	if s.events, err = m.Int64Counter(MetricEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Events received, by type and outcome")); err != nil {
		return nil, err
	}
	if s.duration, err = m.Float64Histogram(MetricStepDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from an event's arrival to its answer, by type and outcome"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 100)); err != nil {
		return nil, err
	}
	if s.actions, err = m.Int64Counter(MetricActions, metric.WithUnit("{action}"),
		metric.WithDescription("Actions the steps took, by kind")); err != nil {
		return nil, err
	}
	if s.ended, err = m.Int64Counter(MetricTasksEnded, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks ended, by final state")); err != nil {
		return nil, err
	}
	if s.states, err = m.Int64Counter(MetricStateEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Tasks' state change events published, by outcome: delivered, or failed after its retries")); err != nil {
		return nil, err
	}
	tasks, err := m.Int64ObservableGauge(MetricTasks, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks of the namespace by state, as the last sweep found them"))
	if err != nil {
		return nil, err
	}
	queued, err := m.Int64ObservableGauge(MetricTasksQueued, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks QUEUED (submitted, nothing started yet, or waiting for a node), as the last sweep found them"))
	if err != nil {
		return nil, err
	}
	age, err := m.Float64ObservableGauge(MetricTasksStepAge, metric.WithUnit("s"),
		metric.WithDescription("Longest time since a task's last step (its latest parts started, or its creation), by state: QUEUED, INITIALIZING, RUNNING"))
	if err != nil {
		return nil, err
	}
	if _, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := s.swept.Load()
		now := s.now()
		if c == nil || now.Sub(c.at) > SweepFresh {
			return nil
		}
		for state, n := range c.states {
			o.ObserveInt64(tasks, int64(n), metric.WithAttributes(attribute.String(AttrState, state)))
		}
		o.ObserveInt64(queued, int64(c.queued))
		for state, at := range c.oldest {
			o.ObserveFloat64(age, now.Sub(at).Seconds(), metric.WithAttributes(attribute.String(AttrState, state)))
		}
		return nil
	}, tasks, queued, age); err != nil {
		return nil, err
	}
	users, err := m.Int64ObservableGauge(MetricUserTasks, metric.WithUnit("{task}"),
		metric.WithDescription("Each named owner's tasks not ended (active) and of them those waiting for the owner's share, as the last sweep found them; owners past METRICS_USERS summed as other"))
	if err != nil {
		return nil, err
	}
	if _, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := s.users.Load()
		if c == nil || s.now().Sub(c.at) > SweepFresh {
			return nil
		}
		for user, n := range c.users {
			o.ObserveInt64(users, int64(n.Active), metric.WithAttributes(attribute.String(AttrUser, user), attribute.String(AttrUserTasks, "active")))
			o.ObserveInt64(users, int64(n.Waiting), metric.WithAttributes(attribute.String(AttrUser, user), attribute.String(AttrUserTasks, "waiting")))
		}
		return nil
	}, users); err != nil {
		return nil, err
	}
	return s, nil
}

// SweptUsers records the owners a sweep counted (steps.TaskCounts.TopUsers):
// the gauge reports them for SweepFresh.
func (s *Telemetry) SweptUsers(users map[string]steps.UserCounts) {
	if users == nil {
		return
	}
	c := &sweptUsers{at: s.now(), users: make(map[string]steps.UserCounts, len(users))}
	for k, v := range users {
		c.users[k] = v
	}
	s.users.Store(c)
}

// SweptTasks records what a sweep found: the namespace's tasks by state, how
// many are QUEUED, and for some states the time of the oldest last step.
// The gauges report them, the step ages as of each collection, for
// SweepFresh; then nothing, until the next sweep this replica takes.
func (s *Telemetry) SweptTasks(states map[string]int, queued int, oldest map[string]time.Time) {
	c := &sweptCounts{at: s.now(), states: make(map[string]int, len(states)), queued: queued, oldest: make(map[string]time.Time, len(oldest))}
	for k, v := range states {
		c.states[k] = v
	}
	for k, v := range oldest {
		c.oldest[k] = v
	}
	s.swept.Store(c)
}

// Step is one event's span and clock.
type Step struct {
	s     *Telemetry
	span  trace.Span
	typ   string
	start time.Time
}

// StartStep starts the span of an event's step. Its parent is the trace
// context of the request's traceparent header, or else that of the event's
// distributed tracing extension (the traceparent attribute of a structured
// event, or the ce-traceparent header); a trace of its own without either.
func (s *Telemetry) StartStep(ctx context.Context, h http.Header, ev *cloudevents.Event, kind string) (context.Context, *Step) {
	start := time.Now()
	parent := s.prop.Extract(ctx, propagation.HeaderCarrier(h))
	if !trace.SpanContextFromContext(parent).IsValid() && ev != nil {
		c := propagation.MapCarrier{}
		for _, k := range []string{"traceparent", "tracestate"} {
			if v, ok := ev.Extensions()[k].(string); ok {
				c[k] = v
			}
		}
		parent = s.prop.Extract(ctx, c)
	}
	attrs := []attribute.KeyValue{}
	typ := "other"
	if ev != nil {
		typ = EventType(ev.Type())
		attrs = append(attrs, attribute.String(AttrEventType, ev.Type()),
			attribute.String("cloudevents.event_id", ev.ID()),
			attribute.String("cloudevents.event_source", ev.Source()))
	}
	ctx, span := s.tracer.Start(parent, "step "+kind, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, &Step{s: s, span: span, typ: typ, start: start}
}

// Task names the step's task on its span.
func (st *Step) Task(task string) {
	if task != "" {
		st.span.SetAttributes(attribute.String(AttrTask, task))
	}
}

// Actions counts the actions a step took on a task, and the state the task
// ended in, if it did.
func (st *Step) Actions(ctx context.Context, kinds []string, ended string) {
	for _, k := range kinds {
		st.s.actions.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrActionKind, k)))
	}
	if ended != "" {
		st.s.ended.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrState, ended)))
	}
}

// Ended records on the span of a one-task step the state it ended the task
// in.
func (st *Step) Ended(state string) {
	if state != "" {
		st.span.SetAttributes(attribute.String(AttrState, state))
	}
}

// End ends the step with its answer's status code: it counts the event and
// its duration, and ends the span (an error status for a 5xx).
func (st *Step) End(ctx context.Context, status int, ignored bool, err error) {
	outcome := Outcome(status, ignored)
	set := metric.WithAttributes(attribute.String(AttrEventType, st.typ), attribute.String(AttrOutcome, outcome))
	st.s.events.Add(ctx, 1, set)
	st.s.duration.Record(ctx, time.Since(st.start).Seconds(), set)
	st.span.SetAttributes(attribute.String(AttrOutcome, outcome), attribute.Int("http.response.status_code", status))
	if err != nil {
		st.span.RecordError(err)
		if status >= 500 {
			st.span.SetStatus(codes.Error, err.Error())
		}
	}
	st.span.End()
}
