package tes

import (
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/elixir-cloud-aai/tesk-knative/internal/httperr"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// BasePath is where the API is served.
const BasePath = "/ga4gh/tes/v1"

// Config is the TES API's configuration.
type Config struct {
	// Namespace holds the tasks.
	Namespace string
	// Sink is where task.submitted and task.cancelled are posted (K_SINK);
	// none: the events are left out (the sweep starts the tasks).
	Sink string
	// SinkTokenFile holds the OIDC token sent as a bearer token with each
	// event when the file exists (a SinkBinding mounts it when Knative
	// Eventing's authentication-oidc is on); none: no token is sent.
	SinkTokenFile string
	// Info is the service-info (type, and the backend parameters, are set
	// by the service).
	Info tesv1.ServiceInfo
	// Prices, when set, price an hour of each task in its log's metadata
	// (steps.PricePerHourKey), for Cromwell (TES_PRICE_PER_*).
	Prices steps.Prices
	// LogTailBytes bounds each of a running executor's streams in the FULL
	// view (0: steps.DefaultLogTailBytes).
	LogTailBytes int
	// Steps is the handler's configuration, for the state derivation.
	Steps steps.Config
	// Convert holds the executors' secret and security context.
	Convert ConvertOptions
	// Limits are the most a task may ask for (the zero Limits: none).
	Limits Limits
	// ListBytes bounds the tasks of a FULL page of GET /tasks: the page
	// ends before the task that would pass it (0: DefaultListBytes).
	ListBytes int
	// CreatesPerMinute is how many tasks each user may create a minute
	// (TES_CREATE_RATE_PER_USER), in bursts of as many; 0: no limit.
	CreatesPerMinute float64
	// Backlog bounds each user's tasks that have not ended and their
	// anchors' bytes (the zero Backlog: none).
	Backlog Backlog
}

// Server is the TES API of one namespace. It keeps nothing between requests:
// every task is its anchor ConfigMap, its jobs and pods.
type Server struct {
	Client   kubernetes.Interface
	Metadata metadata.Interface
	Events   cloudevents.Client
	Config   Config
	Auth     Authenticator
	Log      *zap.SugaredLogger
	Now      func() time.Time
	// Telemetry, when set, makes each request a span and counts requests
	// and created tasks.
	Telemetry *Telemetry
	// Ready, when set, says why the API cannot serve yet (GET /readyz
	// answers 503 with it), or nil.
	Ready func() error

	// creates is each user's rate of creates (Config.CreatesPerMinute),
	// made by Echo.
	creates *createLimits
	// backlogs is each user's turn to create in this process, and the
	// creates a list may not show yet (Config.Backlog).
	backlogs backlogs
	// quotas are the tasks' namespace's ResourceQuotas as last read
	// (checkResourceQuota).
	quotas quotasRead
}

// store is the cluster as the API reads and writes it.
func (s *Server) store() Store {
	return Store{Client: s.Client, Metadata: s.Metadata, Namespace: s.Config.Namespace}
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Echo returns the routes.
func (s *Server) Echo() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Server.ReadHeaderTimeout = 10 * time.Second
	e.Server.ReadTimeout = 60 * time.Second
	e.Server.WriteTimeout = 2 * time.Minute
	e.Server.IdleTimeout = 2 * time.Minute
	e.HTTPErrorHandler = httperr.Handler
	if s.Config.CreatesPerMinute > 0 {
		s.creates = newCreateLimits(s.Config.CreatesPerMinute, 0, s.now)
	}
	if s.Telemetry != nil {
		e.Use(s.Telemetry.Middleware)
	}
	g := e.Group(BasePath, s.refuseCrossSite, s.authenticate)
	g.GET("/service-info", s.serviceInfo)
	g.POST("/tasks", s.create)
	g.GET("/tasks", s.list)
	g.GET("/tasks/:id", s.get)
	// "{id}:cancel" is one path segment.
	g.POST("/tasks/:ref", s.cancel)
	s.extensions(e, g)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", func(c echo.Context) error {
		if s.Ready != nil {
			if err := s.Ready(); err != nil {
				return c.JSON(http.StatusServiceUnavailable, httperr.Body{Error: "not ready: " + err.Error()})
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	return e
}

func (s *Server) serviceInfo(c echo.Context) error {
	info := s.Config.Info
	info.Type = tesv1.ServiceType{Group: "org.ga4gh", Artifact: "tes", Version: "1.1.0"}
	info.TesResourcesBackendParameters = s.Config.Steps.BackendParameters.Keys()
	info.Storage = s.storage()
	return c.JSON(http.StatusOK, info)
}

// storage is the storage the service offers (service-info.storage): the
// operator's list (TES_STORAGE), else what every deployment's filer
// reaches, and file:// with the transfer volume's path where the operator
// mounted one (HOST_BASE_PATH): Toil, for one, mounts its file job store
// into its tasks only when an entry is a prefix of the store's URL.
func (s *Server) storage() []string {
	if len(s.Config.Info.Storage) > 0 {
		return s.Config.Info.Storage
	}
	st := []string{"http://", "https://", "ftp://", "s3://"}
	if base := s.Config.Steps.HostBasePath; base != "" {
		st = append(st, "file://"+base)
	}
	return st
}

// fail answers an error with its status (httperr.Status), logging those
// that are the service's own.
func (s *Server) fail(c echo.Context, err error) error {
	code := httperr.Status(err)
	if code >= 500 {
		s.Log.Errorw("Request failed", "path", c.Request().URL.Path, "error", err, "status", code)
	}
	return httperr.Write(c, code, err)
}
