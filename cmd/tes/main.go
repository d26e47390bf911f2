// Command tes is the project's GA4GH TES 1.1 API: it validates and converts
// submitted tasks, writes each task's anchor ConfigMap, posts the task's
// CloudEvents to K_SINK (the Broker, through a SinkBinding), and reads tasks
// back from the cluster.
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
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"knative.dev/pkg/signals"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/internal/cmdutil"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/internal/version"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func main() {
	if err := run(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "tes:", err)
		os.Exit(1)
	}
}

// options are the flags; each also comes from an environment variable, the
// flag winning.
type options struct {
	namespace, kubeconfig, sink string
	sinkToken                   string
	port                        int
	debug                       bool
	noAuth                      bool
	version                     bool
	// sinkRequired: no sink is an error, not "post no events".
	sinkRequired bool
	// sinkTokenRequired: a sink without its token file is an error.
	sinkTokenRequired bool
}

func parseOptions(args []string, getenv func(string) string) (options, error) {
	env := cmdutil.Env(getenv)
	def := env.String
	var o options
	port, err := env.Port(8080)
	if err != nil {
		return o, err
	}
	debug, err := env.Bool("DEBUG")
	if err != nil {
		return o, err
	}
	required, err := env.Bool("SINK_REQUIRED")
	if err != nil {
		return o, err
	}
	tokenRequired, err := env.Bool("SINK_TOKEN_REQUIRED")
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("tes", flag.ContinueOnError)
	ns := def("NAMESPACE", cmdutil.PodNamespace(steps.DefaultNamespace))
	fs.StringVar(&o.namespace, "namespace", ns, "namespace of the tasks (env NAMESPACE; in a pod, its own namespace)")
	fs.StringVar(&o.namespace, "n", ns, "shorthand for --namespace")
	fs.StringVar(&o.sink, "sink", getenv("K_SINK"), "where task.submitted and task.cancelled are posted (env K_SINK, set by a SinkBinding)")
	fs.StringVar(&o.sinkToken, "sink-token-file", def("SINK_TOKEN_FILE", events.DefaultSinkTokenFile), "the OIDC token sent with each event when the file exists (env SINK_TOKEN_FILE; a SinkBinding mounts it there when Eventing's authentication-oidc is on)")
	fs.IntVar(&o.port, "port", port, "HTTP port (env PORT)")
	fs.BoolVar(&o.debug, "debug", debug, "debug logging (env DEBUG)")
	fs.BoolVar(&o.noAuth, "no-auth", false, "serve without access control (local development only)")
	fs.BoolVar(&o.version, "version", false, "print the TES API's version and exit")
	fs.StringVar(&o.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig outside a cluster (env KUBECONFIG); in-cluster configuration if empty")
	fs.BoolVar(&o.sinkRequired, "sink-required", required, "refuse to start without a sink for task.submitted and task.cancelled (env SINK_REQUIRED)")
	fs.BoolVar(&o.sinkTokenRequired, "sink-token-required", tokenRequired, "refuse to start with a sink and no token in the sink token file (env SINK_TOKEN_REQUIRED; where Eventing's authentication-oidc is on)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.sinkRequired && o.sink == "" && !o.version {
		return o, errNoSink
	}
	return o, nil
}

// errNoSink stops a TES API that must post its events and has nowhere to:
// a revision of its Knative Service made before the SinkBinding bound it
// has no K_SINK, and each task it took would wait for the handler's sweep
// to start it. Exiting keeps that revision from ever being Ready, so
// Knative routes requests only to the bound one it makes next.
var errNoSink = errors.New("SINK_REQUIRED is set and K_SINK is not (the SinkBinding tesk-tes sets it on the revision it binds; this one was made before it did)")

// sinkReady stops a TES API that would post its events without the token
// the Broker asks for (events.RequireSinkToken): each task it took would
// wait for the handler's sweep.
func (o options) sinkReady() error {
	if !o.sinkTokenRequired || o.sink == "" {
		return nil
	}
	return events.RequireSinkToken(o.sinkToken)
}

// stdout receives --version's answer.
var stdout io.Writer = os.Stdout

// apiConfig reads the TES API's settings (the tesk-tes-config ConfigMap in
// config/knative lists them all).
func apiConfig(getenv func(string) string) (tes.Config, error) {
	def := cmdutil.Env(getenv).String
	cfg := tes.Config{
		Info: tesv1.ServiceInfo{
			ID:               def("TES_SERVICE_ID", "org.ga4gh.tesk-knative"),
			Name:             def("TES_SERVICE_NAME", "TESK on Knative"),
			Description:      def("TES_SERVICE_DESCRIPTION", "GA4GH TES on Kubernetes, each task's steps run as Knative events"),
			Organization:     tesv1.Organization{Name: def("TES_ORGANIZATION_NAME", "ELIXIR Cloud & AAI"), URL: def("TES_ORGANIZATION_URL", "https://elixir-cloud.dcc.sib.swiss")},
			ContactURL:       def("TES_CONTACT_URL", ""),
			DocumentationURL: def("TES_DOCUMENTATION_URL", "https://github.com/elixir-cloud-aai/tesk-knative"),
			Environment:      def("TES_ENVIRONMENT", ""),
			Version:          def("TES_SERVICE_VERSION", version.Get()),
		},
		LogTailBytes: steps.DefaultLogTailBytes,
	}
	if s := def("TES_STORAGE", ""); s != "" {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				cfg.Info.Storage = append(cfg.Info.Storage, p)
			}
		}
	}
	limits, err := taskLimits(def)
	if err != nil {
		return cfg, err
	}
	cfg.Limits = limits
	if v := def("TES_CREATE_RATE_PER_USER", ""); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || !(n >= 0 && n <= 1e6) {
			return cfg, fmt.Errorf("TES_CREATE_RATE_PER_USER=%q is not a number of tasks a minute from 0 to 1e6 (0: no limit)", v)
		}
		cfg.CreatesPerMinute = n
	}
	if cfg.Backlog, err = backlog(def); err != nil {
		return cfg, err
	}
	for _, p := range []struct {
		v, name string
		to      *float64
	}{
		{def("TES_PRICE_PER_CORE_HOUR_USD", ""), "TES_PRICE_PER_CORE_HOUR_USD", &cfg.Prices.CoreHour},
		{def("TES_PRICE_PER_RAM_GB_HOUR_USD", ""), "TES_PRICE_PER_RAM_GB_HOUR_USD", &cfg.Prices.RAMGBHour},
		{def("TES_PRICE_PER_DISK_GB_HOUR_USD", ""), "TES_PRICE_PER_DISK_GB_HOUR_USD", &cfg.Prices.DiskGBHour},
	} {
		if p.v != "" {
			n, err := strconv.ParseFloat(p.v, 64)
			if err != nil || !(n >= 0 && n <= 1e6) {
				return cfg, fmt.Errorf("%s=%q is not a price in US dollars from 0 to 1e6", p.name, p.v)
			}
			*p.to = n
		}
	}
	if s := def("TES_LOG_TAIL_BYTES", ""); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > steps.MaxLogTailBytes {
			return cfg, fmt.Errorf("TES_LOG_TAIL_BYTES=%q is not a number of bytes from 1 to 1048576", s)
		}
		cfg.LogTailBytes = n
	}
	return cfg, nil
}

// taskLimits reads the most a task may ask for: an unset variable keeps
// tes.DefaultLimits' value, 0 lifts the limit, and anything but a number
// from 0 up is an error naming the variable.
func taskLimits(def func(name, fallback string) string) (tes.Limits, error) {
	l := tes.DefaultLimits()
	counts := []struct {
		value, name string
		to          *int
	}{
		{def("TES_MAX_EXECUTORS", ""), "TES_MAX_EXECUTORS", &l.Executors},
		{def("TES_MAX_INPUTS", ""), "TES_MAX_INPUTS", &l.Inputs},
		{def("TES_MAX_OUTPUTS", ""), "TES_MAX_OUTPUTS", &l.Outputs},
		{def("TES_MAX_CPU_CORES", ""), "TES_MAX_CPU_CORES", &l.CPUCores},
	}
	for _, c := range counts {
		if c.value == "" {
			continue
		}
		n, err := strconv.Atoi(c.value)
		if err != nil || n < 0 {
			return l, fmt.Errorf("%s=%q is not a whole number from 0 (0: no limit)", c.name, c.value)
		}
		*c.to = n
	}
	sizes := []struct {
		value, name string
		to          *float64
	}{
		{def("TES_MAX_RAM_GB", ""), "TES_MAX_RAM_GB", &l.RAMGB},
		{def("TES_MAX_DISK_GB", ""), "TES_MAX_DISK_GB", &l.DiskGB},
	}
	for _, c := range sizes {
		if c.value == "" {
			continue
		}
		n, err := strconv.ParseFloat(c.value, 64)
		if err != nil || !(n >= 0 && n <= 1e9) {
			return l, fmt.Errorf("%s=%q is not a number of GB from 0 to 1e9 (0: no limit)", c.name, c.value)
		}
		*c.to = n
	}
	return l, nil
}

// backlog reads the bounds of each user's tasks that have not ended: an
// unset variable keeps tes.DefaultBacklog's value, 0 lifts the bound, and
// anything but a whole number from 0 is an error naming the variable.
func backlog(def func(name, fallback string) string) (tes.Backlog, error) {
	b := tes.DefaultBacklog()
	if v := def("TES_MAX_UNFINISHED_TASKS_PER_USER", ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return b, fmt.Errorf("TES_MAX_UNFINISHED_TASKS_PER_USER=%q is not a whole number of tasks from 0 (0: no limit)", v)
		}
		b.Tasks = n
	}
	if v := def("TES_MAX_UNFINISHED_BYTES_PER_USER", ""); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return b, fmt.Errorf("TES_MAX_UNFINISHED_BYTES_PER_USER=%q is not a whole number of bytes from 0 (0: no limit)", v)
		}
		b.Bytes = n
	}
	return b, nil
}

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
	log := cmdutil.NewLogger("tes", o.debug)
	defer func() { _ = log.Sync() }()

	cfg, err := serviceConfig(o, getenv, log)
	if err != nil {
		return err
	}
	auth, ready, err := authenticator(context.Background(), getenv, o.noAuth, log)
	if err != nil {
		return err
	}
	// Metrics and traces as K_OBSERVABILITY_CONFIG asks, flushed on the
	// way out.
	tel, _, err := telemetry.FromEnv(getenv("K_OBSERVABILITY_CONFIG"), "tesk-knative-tes", cfg.Namespace)
	if err != nil {
		return err
	}
	defer tel.Flush(log, 10*time.Second)
	srv, err := newServer(o, cfg, auth, ready, tel, log)
	if err != nil {
		return err
	}
	e := srv.Echo()
	dash := dashboardConfig(getenv, o.noAuth, auth)
	dashboard.Mount(e, dash)
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", o.port))
	if err != nil {
		return err
	}
	e.Listener = ln
	ctx := signals.NewContext()
	errc := make(chan error, 1)
	go func() { errc <- e.Start("") }()
	log.Infow("Serving", "version", version.Get(), "port", o.port, "namespace", cfg.Namespace, "sink", cfg.Sink, "backendParameters", cfg.Steps.BackendParameters.Keys(), "auth", dash.Auth, "startup", time.Since(start).String())
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	log.Infow("Shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.Shutdown(sctx)
}

// serviceConfig is the TES API's configuration: its variables (apiConfig)
// and options, and the steps' settings. The state derivation follows the
// handler's rules and settings, and the backend parameters a task may set
// are read as the handler reads them; a configuration that does not parse
// stops the API.
func serviceConfig(o options, getenv func(string) string, log *zap.SugaredLogger) (tes.Config, error) {
	cfg, err := apiConfig(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.Namespace, cfg.Sink, cfg.SinkTokenFile = o.namespace, o.sink, o.sinkToken
	sc, err := steps.FromEnv(getenv, log, nil)
	if err != nil {
		return cfg, err
	}
	sc.Namespace = o.namespace
	cfg.Steps = sc
	return cfg, nil
}

// newServer is the TES API's server: its metrics and traces, its clients of
// the API server, and, with a sink, its client of CloudEvents.
func newServer(o options, cfg tes.Config, auth tes.Authenticator, ready func() error, tel *telemetry.Providers, log *zap.SugaredLogger) (*tes.Server, error) {
	api, err := tes.NewTelemetry(tel.Meter, tel.Tracer)
	if err != nil {
		return nil, err
	}
	rc, err := cmdutil.RESTConfig(o.kubeconfig, cmdutil.Client{QPS: 200, Burst: 400, UserAgent: "tesk-knative-tes"})
	if err != nil {
		return nil, err
	}
	telemetry.TraceAPI(rc, tel.Tracer)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	srv := &tes.Server{Client: client, Metadata: md, Config: cfg, Auth: auth, Log: log, Telemetry: api, Ready: ready}
	if cfg.Sink != "" {
		// Each event carries the trace context of the request that posts it.
		rt := tes.EventTransport(http.DefaultTransport, tel.Tracer)
		if srv.Events, err = cloudevents.NewClientHTTP(cehttp.WithRoundTripper(rt)); err != nil {
			return nil, err
		}
	} else {
		log.Warnw("No K_SINK: no events are posted; the handler's sweep starts and cancels the tasks")
	}
	return srv, nil
}

// dashboardConfig tells the dashboard how the API is reached: its modes
// ("none", "oidc", "basic", "basic,oidc"), and with OIDC the issuer and the
// client to log in as.
func dashboardConfig(getenv func(string) string, noAuth bool, auth tes.Authenticator) dashboard.Config {
	dash := dashboard.Config{API: tes.BasePath, Auth: "none"}
	s, ok := auth.(tes.Schemes)
	if !ok {
		return dash
	}
	modes, _ := authModes(getenv, noAuth)
	dash.Auth = strings.Join(modes, ",")
	if s.Bearer != nil {
		dash.Issuer, dash.ClientID = strings.TrimSpace(getenv("OIDC_ISSUER")), strings.TrimSpace(getenv("OIDC_AUDIENCE"))
	}
	return dash
}
