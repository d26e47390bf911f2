package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/observability/tracing"
)

// apiServer answers GET of a ConfigMap as an API server would, and keeps
// the traceparent headers it got.
func apiServer(t *testing.T, got chan<- string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "task-1", Namespace: "ns"}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A request made with a step's context is a client span, the step's child,
// and carries the trace context to the API server.
func TestAPIRequestChildSpans(t *testing.T) {
	// The trace context is the process's propagator's, which Setup sets.
	otel.SetTextMapPropagator(tracing.DefaultTextMapPropagator())
	got := make(chan string, 1)
	srv := apiServer(t, got)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rc := &rest.Config{Host: srv.URL}
	TraceAPI(rc, tp)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, step := tp.Tracer("test").Start(context.Background(), "step submit")
	if _, err := client.CoreV1().ConfigMaps("ns").Get(ctx, "task-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	step.End()
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the request's and the step's", len(spans))
	}
	req := spans[0]
	if req.Name() != "k8s GET" || req.SpanKind() != trace.SpanKindClient || req.Parent().SpanID() != step.SpanContext().SpanID() {
		t.Fatalf("request span %q kind %v parent %s, want k8s GET, client, child of %s", req.Name(), req.SpanKind(), req.Parent().SpanID(), step.SpanContext().SpanID())
	}
	if h := <-got; h == "" || h[36:52] != req.SpanContext().SpanID().String() {
		t.Fatalf("traceparent to the API server %q, want the request span %s", h, req.SpanContext().SpanID())
	}
	// Outside any span (Events recorded in the background): no span.
	if _, err := client.CoreV1().ConfigMaps("ns").Get(context.Background(), "task-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h != "" || len(rec.Ended()) != 2 {
		t.Fatalf("a request outside any span: traceparent %q, %d spans, want none and 2", h, len(rec.Ended()))
	}
}

// The TES API's requests are server spans named by route, children of
// their traceparent; the events they post carry their trace context; they
// are counted by route, never by task id.
func TestAPIMiddlewareAndEvents(t *testing.T) {
	otel.SetTextMapPropagator(tracing.DefaultTextMapPropagator())
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := sdkmetric.NewManualReader()
	a, err := NewAPI(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), tp)
	if err != nil {
		t.Fatal(err)
	}
	sink := make(chan string, 1)
	sinkSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sink <- r.Header.Get("traceparent") }))
	defer sinkSrv.Close()
	e := echo.New()
	e.Use(a.Middleware)
	e.GET("/tasks/:id", func(c echo.Context) error {
		a.TaskCreated(c.Request().Context())
		req, _ := http.NewRequestWithContext(c.Request().Context(), http.MethodPost, sinkSrv.URL, nil)
		resp, err := (&http.Client{Transport: EventTransport(http.DefaultTransport, tp)}).Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return echo.NewHTTPError(http.StatusNotFound, "no task")
	})
	req := httptest.NewRequest(http.MethodGet, "/tasks/task-12345678", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	res := httptest.NewRecorder()
	e.ServeHTTP(res, req)
	if res.Code != http.StatusNotFound {
		t.Fatalf("status %d", res.Code)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the post's and the request's", len(spans))
	}
	post, server := spans[0], spans[1]
	if server.Name() != "GET /tasks/:id" || server.Parent().SpanID().String() != "00f067aa0ba902b7" || server.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("server span %q parent %s trace %s", server.Name(), server.Parent().SpanID(), server.SpanContext().TraceID())
	}
	if post.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Fatalf("the post is not the request's child")
	}
	if h := <-sink; h == "" || h[3:35] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the event's traceparent %q does not go on with the trace", h)
	}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == MetricAPIServerRequests {
				dp := s.DataPoints[0]
				route, _ := dp.Attributes.Value("http.route")
				code, _ := dp.Attributes.Value("http.response.status_code")
				if len(s.DataPoints) != 1 || dp.Value != 1 || route.AsString() != "/tasks/:id" || code.AsInt64() != 404 {
					t.Errorf("requests: %+v", s.DataPoints)
				}
			}
		}
	}
	if !seen[MetricAPIServerRequests] || !seen[MetricAPIServerDuration] || !seen[MetricTasksCreated] {
		t.Errorf("metrics %v", seen)
	}
}
