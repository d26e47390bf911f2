// Package eventserver is the handler's HTTP surface: CloudEvents on POST /, the
// state changes posted to tasks' addresses on POST /notify, the TES view on
// GET /tasks/{namespace}/{task}, and the health probes.
package eventserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	k8sevents "k8s.io/client-go/tools/events"
	"knative.dev/pkg/logging"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// StepTimeout bounds one event's work: a step's few requests, each retried
// with bounded backoff, or a sweep over thousands of tasks.
const StepTimeout = 100 * time.Second

// Server handles the events of one namespace.
type Server struct {
	Runner    *runner.Runner
	Metadata  metadata.Interface
	Namespace string
	Log       *zap.SugaredLogger

	// Telemetry are the instruments and tracer of the steps (nil: from
	// otel's global providers, on first use).
	Telemetry *Telemetry
	// Auth, when set, checks each event's token (EVENTS_AUDIENCE): an
	// event without a valid one is refused with 401.
	Auth *EventAuth

	draining atomic.Bool
	// notifier posts state changes to tasks' addresses (POST /notify),
	// when the configuration allows any (NotifyURLPrefixes).
	notifier *notifier
	sweeps   sweepFlight
	// kubeEvents records the Kubernetes Events of the Runner's Recorder.
	kubeEvents k8sevents.EventBroadcaster
	telOnce    sync.Once
}

// telemetry returns the steps' instruments.
func (s *Server) telemetry() *Telemetry {
	s.telOnce.Do(func() {
		if s.Telemetry != nil {
			return
		}
		t, err := NewTelemetry(otel.GetMeterProvider(), otel.GetTracerProvider())
		if err != nil {
			s.Log.Errorw("No metrics or traces of the steps", "error", err)
			t, _ = NewTelemetry(metricnoop.NewMeterProvider(), tracenoop.NewTracerProvider())
		}
		s.Telemetry = t
	})
	return s.Telemetry
}

// New builds the server for a namespace from a client configuration.
func New(rc *rest.Config, cfg steps.Config, log *zap.SugaredLogger) (*Server, error) {
	// Protobuf to the API server for built-in types (patches stay JSON):
	// less to encode and decode on both sides of every step.
	rc = rest.CopyConfig(rc)
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	// Kubernetes Events on the anchors, recorded in the background.
	b := k8sevents.NewBroadcaster(&k8sevents.EventSinkImpl{Interface: client.EventsV1()})
	b.StartRecordingToSink(make(chan struct{}))
	return &Server{
		Runner:     &runner.Runner{Client: client, Metadata: md, Config: cfg, Log: log, Recorder: b.NewRecorder(scheme.Scheme, ReportingController)},
		Metadata:   md,
		Namespace:  cfg.Namespace,
		Log:        log,
		kubeEvents: b,
	}, nil
}

// ReportingController is the reporting controller of the Kubernetes Events
// on anchors.
const ReportingController = "tesk-knative.ga4gh.org/handler"

// Close stops recording Kubernetes Events.
func (s *Server) Close() {
	if s.kubeEvents != nil {
		s.kubeEvents.Shutdown()
	}
}

// Echo returns the routes.
func (s *Server) Echo() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	// Slow or idle clients cannot hold connections; a step answers within
	// StepTimeout.
	e.Server.ReadHeaderTimeout = 10 * time.Second
	e.Server.ReadTimeout = 60 * time.Second
	e.Server.WriteTimeout = StepTimeout + 10*time.Second
	e.Server.IdleTimeout = 2 * time.Minute
	e.HTTPErrorHandler = httperr.Handler
	e.POST("/", s.event, s.authenticate)
	if prefixes := s.Runner.Config.NotifyURLPrefixes; len(prefixes) > 0 {
		n, err := newNotifier(prefixes)
		if err != nil {
			s.Log.Errorw("No state changes posted to tasks' addresses", "error", err)
		} else {
			s.notifier = n
			e.POST("/notify", s.notify, s.authenticate)
		}
	}
	if s.Runner.Config.TrustEvents {
		// For local use, as TRUST_EVENTS is: it answers whoever reaches
		// the handler. Deployed, a task is read through the TES API, which
		// authenticates its owner.
		e.GET("/tasks/:namespace/:task", s.view)
	}
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", func(c echo.Context) error {
		if s.draining.Load() {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	return e
}

// authenticate refuses an event whose token Auth does not accept.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.Auth == nil {
			return next(c)
		}
		if err := s.Auth.Verify(c.Request().Context(), c.Request()); err != nil {
			s.Log.Warnw("Event refused: not from a known sender", "error", err, "remote", c.Request().RemoteAddr)
			return c.JSON(http.StatusUnauthorized, map[string]string{"error": err.Error()})
		}
		return next(c)
	}
}

// Drain makes /readyz fail, so that no new request is routed here while the
// ones in flight finish.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) event(c echo.Context) error {
	req := c.Request()
	ev, err := events.FromHTTP(req)
	var step events.Step
	if err == nil {
		step, err = events.Classify(ev, s.Namespace)
	}
	kind := string(step.Kind)
	if err != nil {
		kind = "invalid"
	}
	// The step's span, a child of the event's trace context; its ids are
	// in each line the step logs.
	ctx, span := s.telemetry().StartStep(req.Context(), req.Header, ev, kind)
	span.Task(step.Task)
	log := s.Log.With(telemetry.LogFields(ctx)...)
	if ev != nil {
		log = log.With("event", ev.ID(), "type", ev.Type(), "source", ev.Source())
	}
	res, ignored, err := s.take(ctx, log, ev, step, err)
	var taken []runner.Result
	switch r := res.(type) {
	case runner.Result:
		taken = []runner.Result{r}
		span.Ended(r.Ended)
	case runner.SweepResult:
		taken = r.Stepped
		if r.Counts != nil {
			s.telemetry().SweptTasks(r.Counts.States, r.Counts.Queued(), r.Counts.Oldest)
			s.telemetry().SweptUsers(r.Counts.TopUsers(s.Runner.Config.MetricsUsers))
		}
	}
	for _, r := range taken {
		kinds := make([]string, len(r.Actions))
		for i, a := range r.Actions {
			kinds[i] = string(a.Kind)
		}
		span.Actions(ctx, kinds, r.Ended)
	}
	if err != nil {
		code := statusOf(err)
		span.End(ctx, code, false, err)
		if step.Task != "" {
			log = log.With("task", step.Task)
		}
		return s.fail(c, log, err, code)
	}
	span.End(ctx, http.StatusOK, ignored, nil)
	return s.ok(c, res)
}

// take takes the step of an event that decoded and classified (err nil).
func (s *Server) take(ctx context.Context, log *zap.SugaredLogger, ev *cloudevents.Event, step events.Step, err error) (res any, ignored bool, _ error) {
	if err != nil {
		return nil, false, err
	}
	// A step, once started, finishes its writes even if the caller goes away
	// (its own deadline bounds it): a step cut between its record and its
	// create would wait for a redelivery. The steps name the task in their
	// own lines; the server's lines here name it too.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StepTimeout)
	defer cancel()
	ctx = logging.WithLogger(ctx, log)
	if step.Task != "" {
		log = log.With("task", step.Task)
	}
	switch step.Kind {
	case events.KindIgnore:
		log.Debugw("Ignored", "why", step.Why)
		return map[string]string{"ignored": step.Why}, true, nil
	case events.KindSubmit:
		res, err = s.Runner.Submit(ctx, step.Namespace, step.Task, step.Input, ev.ID())
	case events.KindCancel:
		res, err = s.Runner.Cancel(ctx, step.Namespace, step.Task, ev.ID())
	case events.KindReconcile, events.KindPods:
		if step.Reason != "" {
			log.Debugw("Pod reported stuck", "pod", step.Pod, "reason", step.Reason, "message", step.Message)
		}
		opts := runner.Options{Event: ev.ID(), Pods: step.Kind == events.KindPods, Job: step.Job, Seen: step.Seen}
		if step.Deleted {
			opts.GoneJob = step.Job
		}
		res, err = s.Runner.Reconcile(ctx, step.Namespace, step.Task, opts)
		if errors.Is(err, runner.ErrUnknownTask) {
			// A late event of a task that was deleted: nothing to do.
			return map[string]string{"ignored": "unknown task " + step.Task}, true, nil
		}
	case events.KindSweep:
		swept, shared, serr := s.sweeps.do(ctx, step.Namespace, func() (runner.SweepResult, error) {
			return s.Runner.Sweep(ctx, step.Namespace, ev.ID(), s.Metadata)
		})
		if shared {
			// The running sweep's steps are counted by its own event.
			if serr != nil {
				return nil, false, serr
			}
			log.Debugw("Ping taken by the sweep in flight", "stepped", len(swept.Stepped))
			return map[string]string{"ignored": "a sweep was running; it covered this ping"}, true, nil
		}
		res, err = swept, serr
	}
	if err != nil {
		return res, false, err
	}
	log.Debugw("Step done", "result", res)
	return res, false, nil
}

// ok answers a done step. A Knative dispatcher (a Trigger's delivery) asks
// with "Prefer: reply" and takes a 2xx reply only if its body is empty or a
// CloudEvent: it gets an empty one. Others (curl, the TES API) get the step's
// summary as JSON.
func (s *Server) ok(c echo.Context, res any) error {
	if c.Request().Header.Get("Prefer") == "reply" {
		return c.NoContent(http.StatusOK)
	}
	return c.JSON(http.StatusOK, res)
}

func (s *Server) view(c echo.Context) error {
	ns, task := c.Param("namespace"), c.Param("task")
	if ns != s.Namespace {
		return c.JSON(http.StatusNotFound, httperr.Body{Error: "no task " + ns + "/" + task + ": this service serves namespace " + s.Namespace})
	}
	v, err := s.Runner.View(c.Request().Context(), ns, task)
	if err != nil {
		return s.fail(c, s.Log.With("task", task), err, statusOf(err))
	}
	return c.JSON(http.StatusOK, redactView(v))
}

// redactView keeps a URL's scheme, host and path only: the view is served
// without authentication to whoever reaches the handler, and an output's
// URL may be presigned (its query string a credential). The TES API shows
// a task whole to its owner.
func redactView(v tesv1.Task) tesv1.Task {
	for i := range v.Inputs {
		v.Inputs[i].URL = taskspec.Redact(v.Inputs[i].URL)
	}
	for i := range v.Outputs {
		v.Outputs[i].URL = taskspec.Redact(v.Outputs[i].URL)
	}
	for i := range v.Logs {
		for j := range v.Logs[i].Outputs {
			v.Logs[i].Outputs[j].URL = taskspec.Redact(v.Logs[i].Outputs[j].URL)
		}
		for j := range v.Logs[i].SystemLogs {
			v.Logs[i].SystemLogs[j] = taskspec.RedactURLs(v.Logs[i].SystemLogs[j])
		}
	}
	return v
}

// statusOf is the answer to an error (httperr.Status), and 404 for an
// unknown task: 400 tells the Broker never to deliver the event again, 429
// and 503 to deliver it later, 500 too (e.g. a Role that lacks a
// permission: the event comes again once it is fixed, or goes to the dead
// letter sink).
func statusOf(err error) int {
	if errors.Is(err, runner.ErrUnknownTask) {
		return http.StatusNotFound
	}
	return httperr.Status(err)
}

// fail answers an error with its status code.
func (s *Server) fail(c echo.Context, log *zap.SugaredLogger, err error, code int) error {
	if code >= 500 {
		log.Errorw("Step failed; the event should come again", "error", err, "status", code)
	} else {
		log.Warnw("Event refused", "error", err, "status", code)
	}
	return httperr.Write(c, code, err)
}
