package tes

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"knative.dev/pkg/observability/tracing"
)

// The TES API's requests are server spans named by route, children of
// their traceparent; the events they post carry their trace context; they
// are counted by route, never by task id.
func TestAPIMiddlewareAndEvents(t *testing.T) {
	otel.SetTextMapPropagator(tracing.DefaultTextMapPropagator())
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := sdkmetric.NewManualReader()
	a, err := NewTelemetry(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), tp)
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
