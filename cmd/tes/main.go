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
	"math"
	"net"
	"net/http"
	"os"
	"slices"
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
	"github.com/elixir-cloud-aai/tesk-knative/internal/settings"
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

// envOptions reads the options' environment variables, the flags'
// defaults.
func envOptions(getenv func(string) string) (options, error) {
	o := options{port: 8080}
	err := settings.Check(getenv, []settings.Setting{
		settings.Port("PORT", &o.port),
		settings.Bool("DEBUG", &o.debug, "a boolean"),
		settings.Bool("SINK_REQUIRED", &o.sinkRequired, "a boolean"),
		settings.Bool("SINK_TOKEN_REQUIRED", &o.sinkTokenRequired, "a boolean"),
		settings.Text("NAMESPACE", cmdutil.PodNamespace(steps.DefaultNamespace), &o.namespace),
		settings.RawText("K_SINK", &o.sink),
		settings.Text("SINK_TOKEN_FILE", events.DefaultSinkTokenFile, &o.sinkToken),
		settings.RawText("KUBECONFIG", &o.kubeconfig),
	})
	return o, err
}

func parseOptions(args []string, getenv func(string) string) (options, error) {
	o, err := envOptions(getenv)
	if err != nil {
		return o, err
	}
	fs := flag.NewFlagSet("tes", flag.ContinueOnError)
	ns := o.namespace
	fs.StringVar(&o.namespace, "namespace", ns, "namespace of the tasks (env NAMESPACE; in a pod, its own namespace)")
	fs.StringVar(&o.namespace, "n", ns, "shorthand for --namespace")
	fs.StringVar(&o.sink, "sink", o.sink, "where task.submitted and task.cancelled are posted (env K_SINK, set by a SinkBinding)")
	fs.StringVar(&o.sinkToken, "sink-token-file", o.sinkToken, "the OIDC token sent with each event when the file exists (env SINK_TOKEN_FILE; a SinkBinding mounts it there when Eventing's authentication-oidc is on)")
	fs.IntVar(&o.port, "port", o.port, "HTTP port (env PORT)")
	fs.BoolVar(&o.debug, "debug", o.debug, "debug logging (env DEBUG)")
	fs.BoolVar(&o.noAuth, "no-auth", false, "serve without access control (local development only)")
	fs.BoolVar(&o.version, "version", false, "print the TES API's version and exit")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig outside a cluster (env KUBECONFIG); in-cluster configuration if empty")
	fs.BoolVar(&o.sinkRequired, "sink-required", o.sinkRequired, "refuse to start without a sink for task.submitted and task.cancelled (env SINK_REQUIRED)")
	fs.BoolVar(&o.sinkTokenRequired, "sink-token-required", o.sinkTokenRequired, "refuse to start with a sink and no token in the sink token file (env SINK_TOKEN_REQUIRED; where Eventing's authentication-oidc is on)")
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
// config/knative lists them all): an unset variable keeps its default, and
// a value that does not parse is an error naming the variable.
func apiConfig(getenv func(string) string) (tes.Config, error) {
	cfg := tes.Config{
		LogTailBytes: steps.DefaultLogTailBytes,
		Limits:       tes.DefaultLimits(),
		Backlog:      tes.DefaultBacklog(),
	}
	var storage string
	err := settings.Check(getenv, slices.Concat(serviceInfo(&cfg.Info, &storage), apiSettings(&cfg)))
	for _, p := range strings.Split(storage, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Info.Storage = append(cfg.Info.Storage, p)
		}
	}
	return cfg, err
}

// serviceInfo are the settings of service-info: the service's, its
// organisation's and the storage's (a list, separated by commas).
func serviceInfo(info *tesv1.ServiceInfo, storage *string) []settings.Setting {
	return []settings.Setting{
		settings.Text("TES_SERVICE_ID", "org.ga4gh.tesk-knative", &info.ID),
		settings.Text("TES_SERVICE_NAME", "TESK on Knative", &info.Name),
		settings.Text("TES_SERVICE_DESCRIPTION", "GA4GH TES on Kubernetes, each task's steps run as Knative events", &info.Description),
		settings.Text("TES_ORGANIZATION_NAME", "ELIXIR Cloud & AAI", &info.Organization.Name),
		settings.Text("TES_ORGANIZATION_URL", "https://elixir-cloud.dcc.sib.swiss", &info.Organization.URL),
		settings.Text("TES_CONTACT_URL", "", &info.ContactURL),
		settings.Text("TES_DOCUMENTATION_URL", "https://github.com/elixir-cloud-aai/tesk-knative", &info.DocumentationURL),
		settings.Text("TES_ENVIRONMENT", "", &info.Environment),
		settings.Text("TES_SERVICE_VERSION", version.Get(), &info.Version),
		settings.Text("TES_STORAGE", "", storage),
	}
}

// apiSettings are the bounds of what a task may ask for and of each user's
// tasks that have not ended (0 lifts a bound), the rate of creations, the
// prices and the logs' tails.
func apiSettings(cfg *tes.Config) []settings.Setting {
	const count, gb = "a whole number from 0 (0: no limit)", "a number of GB from 0 to 1e9 (0: no limit)"
	const price = "a price in US dollars from 0 to 1e6"
	return []settings.Setting{
		settings.Int("TES_MAX_EXECUTORS", &cfg.Limits.Executors, 0, math.MaxInt, count),
		settings.Int("TES_MAX_INPUTS", &cfg.Limits.Inputs, 0, math.MaxInt, count),
		settings.Int("TES_MAX_OUTPUTS", &cfg.Limits.Outputs, 0, math.MaxInt, count),
		settings.Int("TES_MAX_CPU_CORES", &cfg.Limits.CPUCores, 0, math.MaxInt, count),
		settings.Float("TES_MAX_RAM_GB", &cfg.Limits.RAMGB, 0, 1e9, gb),
		settings.Float("TES_MAX_DISK_GB", &cfg.Limits.DiskGB, 0, 1e9, gb),
		settings.Float("TES_CREATE_RATE_PER_USER", &cfg.CreatesPerMinute, 0, 1e6, "a number of tasks a minute from 0 to 1e6 (0: no limit)"),
		settings.Int("TES_MAX_UNFINISHED_TASKS_PER_USER", &cfg.Backlog.Tasks, 0, math.MaxInt, "a whole number of tasks from 0 (0: no limit)"),
		settings.Int("TES_MAX_UNFINISHED_BYTES_PER_USER", &cfg.Backlog.Bytes, 0, math.MaxInt64, "a whole number of bytes from 0 (0: no limit)"),
		settings.Float("TES_PRICE_PER_CORE_HOUR_USD", &cfg.Prices.CoreHour, 0, 1e6, price),
		settings.Float("TES_PRICE_PER_RAM_GB_HOUR_USD", &cfg.Prices.RAMGBHour, 0, 1e6, price),
		settings.Float("TES_PRICE_PER_DISK_GB_HOUR_USD", &cfg.Prices.DiskGBHour, 0, 1e6, price),
		settings.Int("TES_LOG_TAIL_BYTES", &cfg.LogTailBytes, 1, steps.MaxLogTailBytes, "a number of bytes from 1 to 1048576"),
	}
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
