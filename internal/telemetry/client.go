package telemetry

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/client-go/tools/metrics"
)

// Scope is the instrumentation scope of the project's instruments.
const Scope = "github.com/elixir-cloud-aai/tesk-knative"

// The instruments of the requests to the API server, from client-go's hooks.
const (
	MetricAPIRequests = "tesk.k8s.requests"
	MetricAPIDuration = "tesk.k8s.request.duration"
)

type clientInstruments struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
}

var (
	clientHooks   sync.Once
	clientCurrent atomic.Pointer[clientInstruments]
)

// RegisterClientMetrics counts client-go's requests (by verb and status
// code) and their latency (by verb) with mp's instruments. client-go takes
// its hooks once per process; a later call moves them to mp.
func RegisterClientMetrics(mp metric.MeterProvider) error {
	m := mp.Meter(Scope)
	var ci clientInstruments
	var err error
	if ci.requests, err = m.Int64Counter(MetricAPIRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests to the Kubernetes API server, by method and status code")); err != nil {
		return err
	}
	if ci.duration, err = m.Float64Histogram(MetricAPIDuration, metric.WithUnit("s"),
		metric.WithDescription("Latency of the requests to the Kubernetes API server, by method"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)); err != nil {
		return err
	}
	clientCurrent.Store(&ci)
	clientHooks.Do(func() {
		metrics.Register(metrics.RegisterOpts{RequestLatency: clientLatency{}, RequestResult: clientResult{}})
	})
	return nil
}

type clientLatency struct{}

func (clientLatency) Observe(ctx context.Context, verb string, _ url.URL, d time.Duration) {
	if ci := clientCurrent.Load(); ci != nil {
		ci.duration.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("http.request.method", strings.ToUpper(verb))))
	}
}

type clientResult struct{}

// Increment counts a request; code is the status code, or "<error>" when
// none came back (then error.type says so).
func (clientResult) Increment(ctx context.Context, code, method, _ string) {
	ci := clientCurrent.Load()
	if ci == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", strings.ToUpper(method))}
	if c, err := strconv.Atoi(code); err == nil {
		attrs = append(attrs, attribute.Int("http.response.status_code", c))
	} else {
		attrs = append(attrs, attribute.String("error.type", "no_response"))
	}
	ci.requests.Add(ctx, 1, metric.WithAttributes(attrs...))
}
