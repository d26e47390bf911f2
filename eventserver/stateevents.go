package eventserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// StateSink publishes the tasks' state changes (runner.StatePublisher) as
// org.ga4gh.tes.task.state_changed CloudEvents to a sink: the Broker, as a
// SinkBinding gives it (K_SINK), or STATE_EVENTS_SINK. Each event is tried
// Attempts times, Backoff apart and doubling, for at most Timeout in all;
// an answer that says the event can never be taken (a 4xx other than 404,
// 408, 409 and 429) is not tried again.
type StateSink struct {
	URL      string
	Client   cloudevents.Client
	Attempts int
	Backoff  time.Duration
	Timeout  time.Duration
	// Sleep waits between attempts (nil: a timer).
	Sleep func(context.Context, time.Duration) error
	// Telemetry counts the events delivered and failed (nil: none).
	Telemetry *Telemetry
	// TokenFile holds the OIDC token sent as a bearer token with each
	// event when the file exists: a SinkBinding mounts it there
	// (events.DefaultSinkTokenFile) when Knative Eventing's authentication-oidc
	// is on, and the Broker then takes events from known senders only.
	TokenFile string
	// NotifyPrefixes are the addresses a task may ask its changes be
	// posted to (steps.Config.NotifyURLPrefixes): an event of a task whose
	// tag names one of them is marked (events.ExtensionNotify), without
	// the address, which /notify reads from the task's anchor.
	NotifyPrefixes []string
}

// OutcomeDelivered is a state change event the sink took
// (MetricStateEvents); one that failed after its retries is OutcomeFailed.
const OutcomeDelivered = "delivered"

// The StateSink's bounds by default: four attempts, 0.1, 0.2 and 0.4 s
// apart, 10 s in all, so that a sink that is down delays a step by less than
// a second, and one that hangs by at most 10 s.
const (
	DefaultStateAttempts = 4
	DefaultStateBackoff  = 100 * time.Millisecond
	DefaultStateTimeout  = 10 * time.Second
)

// NewStateSink is a StateSink to url with the default bounds.
func NewStateSink(url string) (*StateSink, error) {
	c, err := cloudevents.NewClientHTTP(cehttp.WithClient(http.Client{Timeout: DefaultStateTimeout}))
	if err != nil {
		return nil, err
	}
	return &StateSink{URL: url, Client: c, Attempts: DefaultStateAttempts, Backoff: DefaultStateBackoff, Timeout: DefaultStateTimeout}, nil
}

// PublishState sends a state change's event; the error is the last
// attempt's. The step's end does not cut it short: the change is recorded
// already.
func (s *StateSink) PublishState(ctx context.Context, ch steps.StateChange) error {
	ev := events.NewTaskStateChanged(events.StateChangedData{
		ID: ch.Task, Namespace: ch.Namespace, Owner: ch.Owner, OldState: ch.Old, NewState: ch.New, Reason: ch.Reason,
	}, ch.Time)
	if ch.NotifyURL != "" && steps.NotifyURLAllowed(ch.NotifyURL, s.NotifyPrefixes) == nil {
		ev.SetExtension(events.ExtensionNotify, events.NotifyMarked)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.Timeout)
	defer cancel()
	ctx = cloudevents.ContextWithTarget(ctx, s.URL)
	if token := s.token(); token != "" {
		ctx = cehttp.WithCustomHeader(ctx, http.Header{"Authorization": {"Bearer " + token}})
	}
	wait := s.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		res := s.Client.Send(ctx, ev)
		if cloudevents.IsACK(res) {
			s.count(ctx, OutcomeDelivered)
			return nil
		}
		err = fmt.Errorf("event %s to %s (attempt %d of %d): %w", ev.ID(), s.URL, attempt, s.Attempts, res)
		if attempt >= s.Attempts || !retriable(res) {
			s.count(ctx, OutcomeFailed)
			return err
		}
		if serr := s.sleep(ctx, wait); serr != nil {
			s.count(ctx, OutcomeFailed)
			return err
		}
		wait *= 2
	}
}

// token is the OIDC token to send, read for each event (the SinkBinding
// renews it before it expires); "" without one. A token that cannot be
// read is left out: the sink's refusal says why.
func (s *StateSink) token() string {
	token, _ := events.SinkToken(s.TokenFile)
	return token
}

func (s *StateSink) count(ctx context.Context, outcome string) {
	if s.Telemetry != nil {
		s.Telemetry.states.Add(ctx, 1, metric.WithAttributes(attribute.String(AttrOutcome, outcome)))
	}
}

// TellStates has the steps publish the tasks' state changes to url, with
// the default bounds and the OIDC token of tokenFile when it exists,
// counted in the server's metrics.
func (s *Server) TellStates(url, tokenFile string) error {
	sink, err := NewStateSink(url)
	if err != nil {
		return err
	}
	sink.Telemetry, sink.TokenFile = s.telemetry(), tokenFile
	sink.NotifyPrefixes = s.Runner.Config.NotifyURLPrefixes
	s.Runner.States = sink
	return nil
}

// retriable reports whether another attempt may deliver what this one did
// not: any failure but an answer that refuses the event for what it is.
func retriable(res error) bool {
	var hr *cehttp.Result
	if !errors.As(res, &hr) {
		return true
	}
	switch code := hr.StatusCode; {
	case code == http.StatusNotFound, code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooManyRequests:
		return true
	case code >= 400 && code < 500:
		return false
	}
	return true
}

func (s *StateSink) sleep(ctx context.Context, d time.Duration) error {
	if s.Sleep != nil {
		return s.Sleep(ctx, d)
	}
	return runner.Sleep(ctx, d)
}
