package tes

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"knative.dev/pkg/observability/tracing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
)

// The TES API's instruments: by route (the path's template, never a task
// id), method and status code.
const (
	MetricAPIServerRequests = "tesk.tes.requests"
	MetricAPIServerDuration = "tesk.tes.request.duration"
	MetricTasksCreated      = "tesk.tes.tasks.created"
)

// Telemetry are the TES API's instruments and tracer.
type Telemetry struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	requests metric.Int64Counter
	duration metric.Float64Histogram
	created  metric.Int64Counter
}

// NewTelemetry makes the TES API's instruments with mp and its spans with
// tp.
func NewTelemetry(mp metric.MeterProvider, tp trace.TracerProvider) (*Telemetry, error) {
	m := mp.Meter(telemetry.Scope)
	a := &Telemetry{tracer: tp.Tracer(telemetry.Scope), prop: tracing.DefaultTextMapPropagator()}
	var err error
	if a.requests, err = m.Int64Counter(MetricAPIServerRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests to the TES API, by route, method and status code")); err != nil {
		return nil, err
	}
	if a.duration, err = m.Float64Histogram(MetricAPIServerDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to answer a request to the TES API, by route, method and status code"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)); err != nil {
		return nil, err
	}
	if a.created, err = m.Int64Counter(MetricTasksCreated, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks created through the TES API")); err != nil {
		return nil, err
	}
	return a, nil
}

// Middleware makes each request a server span, a child of the request's
// trace context (traceparent), named by its route; its context carries the
// span, so that the API requests it makes are its children. It counts the
// request and its duration.
func (a *Telemetry) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		ctx := a.prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := a.tracer.Start(ctx, req.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.route", route), attribute.String("http.request.method", req.Method)))
		defer span.End()
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		if err != nil {
			// The error handler writes the answer now, so that its status
			// is the one counted.
			c.Error(err)
		}
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		set := metric.WithAttributes(attribute.String("http.route", route), attribute.String("http.request.method", req.Method),
			attribute.Int("http.response.status_code", status))
		a.requests.Add(ctx, 1, set)
		a.duration.Record(ctx, time.Since(start).Seconds(), set)
		return nil
	}
}

// TaskCreated counts a created task.
func (a *Telemetry) TaskCreated(ctx context.Context) {
	if a != nil {
		a.created.Add(ctx, 1)
	}
}

// EventTransport is the transport of the events the TES API posts: each post
// is a client span of the request that made it, and carries the trace
// context as the traceparent header, so that the task's trace goes on in the
// handler's steps.
func EventTransport(base http.RoundTripper, tp trace.TracerProvider) http.RoundTripper {
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "event " + r.Method }))
}
