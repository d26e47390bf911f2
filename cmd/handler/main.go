// Command handler is the TESK taskmaster as a stateless Knative service: it
// takes each step of a task as a CloudEvent and creates the next step's
// Kubernetes objects.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/signals"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/internal/cmdutil"
	"github.com/elixir-cloud-aai/tesk-knative/internal/settings"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// shutdownGrace bounds how long in-flight requests may take to finish after
// SIGTERM: as long as a step may take. Knative gives a revision's pods a
// termination grace period of its timeoutSeconds (120 in config/knative).
const shutdownGrace = eventserver.StepTimeout + 5*time.Second

// flushTimeout bounds the flush of metrics and traces at the end.
const flushTimeout = 10 * time.Second

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}

// options are the handler's flags; each also comes from an environment
// variable (a Knative Service sets env), the flag winning.
type options struct {
	namespace, podTimeout, filerName, filerVersion string
	pullPolicyAlways, debug, version               bool
	port                                           int
	kubeconfig                                     string
	stateSink, sinkToken                           string
	// stateEventsRequired: no sink is an error, not "publish nowhere".
	stateEventsRequired bool
	// sinkTokenRequired: a sink without its token file is an error.
	sinkTokenRequired bool
}

// envOptions reads the options' environment variables, the flags'
// defaults.
func envOptions(getenv func(string) string) (options, error) {
	o := options{port: 8080}
	err := settings.Check(getenv, []settings.Setting{
		settings.Bool("PULL_POLICY_ALWAYS", &o.pullPolicyAlways, "a boolean"),
		settings.Bool("DEBUG", &o.debug, "a boolean"),
		settings.Port("PORT", &o.port),
		settings.Bool("STATE_EVENTS_REQUIRED", &o.stateEventsRequired, "a boolean"),
		settings.Bool("SINK_TOKEN_REQUIRED", &o.sinkTokenRequired, "a boolean"),
		settings.Text("NAMESPACE", cmdutil.PodNamespace(steps.DefaultNamespace), &o.namespace),
		settings.Text("POD_TIMEOUT", "240", &o.podTimeout),
		settings.Text("FILER_NAME", jobspec.DefaultFilerName, &o.filerName),
		settings.Text("FILER_VERSION", jobspec.DefaultFilerVersion, &o.filerVersion),
		settings.RawText("KUBECONFIG", &o.kubeconfig),
		// A SinkBinding on the handler (the chart's stateEvents) sets K_SINK.
		settings.Text("STATE_EVENTS_SINK", getenv("K_SINK"), &o.stateSink),
		settings.Text("SINK_TOKEN_FILE", events.DefaultSinkTokenFile, &o.sinkToken),
	})
	return o, err
}

func parseOptions(args []string, getenv func(string) string) (options, error) {
	o, err := envOptions(getenv)
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("handler", flag.ContinueOnError)
	ns, podTimeout, filerName, filerVersion, debug := o.namespace, o.podTimeout, o.filerName, o.filerVersion, o.debug
	fs.StringVar(&o.namespace, "namespace", ns, "namespace of the tasks (env NAMESPACE; in a pod, its own namespace)")
	fs.StringVar(&o.namespace, "n", ns, "shorthand for --namespace")
	fs.StringVar(&o.podTimeout, "pod-timeout", podTimeout, "seconds after which a pending pod that can't start fails its job (env POD_TIMEOUT)")
	fs.StringVar(&o.podTimeout, "pt", podTimeout, "shorthand for --pod-timeout")
	fs.StringVar(&o.filerName, "filer-name", filerName, "image of the filer, without its tag (env FILER_NAME)")
	fs.StringVar(&o.filerName, "fn", filerName, "shorthand for --filer-name")
	fs.StringVar(&o.filerVersion, "filer-version", filerVersion, "tag of the filer image (env FILER_VERSION)")
	fs.StringVar(&o.filerVersion, "fv", filerVersion, "shorthand for --filer-version")
	fs.BoolVar(&o.pullPolicyAlways, "pull-policy-always", o.pullPolicyAlways, "pull the filer image on every start (env PULL_POLICY_ALWAYS)")
	fs.BoolVar(&o.debug, "debug", debug, "debug logging, also of the filer, and each job created as a manifest, credentials hidden (env DEBUG)")
	fs.BoolVar(&o.debug, "d", debug, "shorthand for --debug")
	fs.IntVar(&o.port, "port", o.port, "HTTP port (env PORT)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig to use outside a cluster (env KUBECONFIG); in-cluster configuration if empty")
	fs.StringVar(&o.stateSink, "state-events-sink", o.stateSink, "where each task's state changes are published as CloudEvents (env STATE_EVENTS_SINK, else K_SINK); empty: nowhere")
	fs.StringVar(&o.sinkToken, "sink-token-file", o.sinkToken, "the OIDC token sent with each state change event when the file exists (env SINK_TOKEN_FILE; a SinkBinding mounts it there when Eventing's authentication-oidc is on)")
	fs.BoolVar(&o.stateEventsRequired, "state-events-required", o.stateEventsRequired, "refuse to start without a sink for the state changes (env STATE_EVENTS_REQUIRED)")
	fs.BoolVar(&o.sinkTokenRequired, "sink-token-required", o.sinkTokenRequired, "refuse to start with a sink for the state changes and no token in the sink token file (env SINK_TOKEN_REQUIRED; where Eventing's authentication-oidc is on)")
	fs.BoolVar(&o.version, "version", false, "print the handler's version and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.stateEventsRequired && o.stateSink == "" && !o.version {
		return o, errNoStateSink
	}
	return o, nil
}

// errNoStateSink stops a handler that must publish the state changes and
// has nowhere to: a revision of its Knative Service made before the
// SinkBinding bound it has no K_SINK, and would drop every change it made.
// Exiting keeps that revision from ever being Ready, so Knative routes
// events only to the bound one it makes next.
var errNoStateSink = errors.New("STATE_EVENTS_REQUIRED is set and there is no sink for the state changes: neither STATE_EVENTS_SINK nor K_SINK (which the SinkBinding tesk-handler-state-events sets on the revision it binds; this one was made before it did)")

// sinkReady stops a handler that would publish its state changes without
// the token the Broker asks for (events.RequireSinkToken).
func (o options) sinkReady() error {
	if !o.sinkTokenRequired || o.stateSink == "" {
		return nil
	}
	return events.RequireSinkToken(o.sinkToken)
}

// stdout receives --version's answer.
var stdout io.Writer = os.Stdout

func run(args []string, getenv func(string) string) error {
	start := time.Now()
	o, err := parseOptions(args, getenv)
	if err != nil {
		return err
	}
	if o.version {
		_, err := fmt.Fprintln(stdout, version.Get())
		return err
	}
	if err := o.sinkReady(); err != nil {
		return err
	}
	log := cmdutil.NewLogger("handler", o.debug)
	defer func() { _ = log.Sync() }()

	cfg, err := handlerConfig(o, getenv, log)
	if err != nil {
		return err
	}
	// Metrics and traces as config-observability (K_OBSERVABILITY_CONFIG)
	// asks; flushed on the way out.
	tel, ocfg, err := telemetry.FromEnv(getenv("K_OBSERVABILITY_CONFIG"), "tesk-knative-handler", cfg.Namespace)
	if err != nil {
		return err
	}
	defer tel.Flush(log, flushTimeout)

	// One replica takes several hundred events a second, each a few requests.
	rc, err := cmdutil.RESTConfig(o.kubeconfig, cmdutil.Client{QPS: 500, Burst: 1000, UserAgent: "tesk-knative-handler"})
	if err != nil {
		return err
	}
	telemetry.TraceAPI(rc, tel.Tracer)
	srv, err := newServer(o, rc, cfg, log)
	if err != nil {
		return err
	}
	e := srv.Echo()
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", o.port))
	if err != nil {
		return err
	}
	e.Listener = ln
	ctx := signals.NewContext()
	errc := make(chan error, 1)
	go func() { errc <- e.Start("") }()
	log.Infow("Ready", "version", version.Get(), "port", o.port, "metrics", ocfg.Metrics.Protocol, "tracing", ocfg.Tracing.Protocol, "namespace", cfg.Namespace, "podTimeout", cfg.PodTimeout.String(),
		"filerImage", cfg.FilerImage(), "backendParameters", cfg.BackendParameters.Keys(), "stateEvents", o.stateSink, "startup", time.Since(start).String())
	return serveUntilSignal(ctx, errc, srv, e, log)
}

// handlerConfig is the steps' configuration: the variables (steps.FromEnv)
// and the options. The pod timeout is the flag's (POD_TIMEOUT its
// default). A configuration of the backend parameters that does not parse
// stops the handler: ignored, it would place tasks otherwise than asked.
func handlerConfig(o options, getenv func(string) string, log *zap.SugaredLogger) (steps.Config, error) {
	cfg, err := steps.FromEnv(getenv, log, &o.podTimeout)
	if err != nil {
		return cfg, err
	}
	cfg.Namespace = o.namespace
	cfg.FilerName, cfg.FilerVersion = o.filerName, o.filerVersion
	cfg.PullPolicyAlways, cfg.Debug = o.pullPolicyAlways, o.debug
	return cfg, nil
}

// newServer is the handler's server, taking events only with a token for
// EVENTS_AUDIENCE when it is set, and telling the tasks' state changes to
// the state sink when there is one.
func newServer(o options, rc *rest.Config, cfg steps.Config, log *zap.SugaredLogger) (*eventserver.Server, error) {
	srv, err := eventserver.New(rc, cfg, log)
	if err != nil {
		return nil, err
	}
	if cfg.EventsAudience != "" {
		if srv.Auth, err = eventserver.NewEventAuth(rc, cfg.EventsAudience, cmdutil.PodNamespace(cfg.Namespace)); err != nil {
			return nil, err
		}
		log.Infow("Events are taken only with a token for their audience", "audience", cfg.EventsAudience, "senders", "ServiceAccounts of "+srv.Auth.Namespace)
	}
	if o.stateSink != "" {
		if err := srv.TellStates(o.stateSink, o.sinkToken); err != nil {
			return nil, err
		}
	}
	return srv, nil
}

// serveUntilSignal serves until the server fails (errc) or SIGTERM or
// SIGINT (ctx): then it takes no new request, finishes those in flight
// (shutdownGrace at most) and closes the server.
func serveUntilSignal(ctx context.Context, errc <-chan error, srv *eventserver.Server, e *echo.Echo, log *zap.SugaredLogger) error {
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	log.Infow("Shutting down: finishing requests in flight")
	srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := e.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	srv.Close()
	log.Infow("Stopped")
	return nil
}
