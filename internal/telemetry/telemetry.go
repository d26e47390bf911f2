// Package telemetry is the OpenTelemetry of the handler and the TES API,
// set up as Knative components set theirs up (knative.dev/pkg/observability):
// metrics and traces pushed over OTLP when configured, nothing otherwise,
// Prometheus only on request. It holds what both services share: the
// configuration, the providers, the resource, the traced client-go transport,
// the client-go request metrics and the log fields of a span. Each service's
// own instruments are beside the code they measure: the handler's steps' in
// package server, the TES API's requests' in package tes.
package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/observability"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/tracing"
)

// EnvConfig is the environment variable with the observability settings, as
// Knative passes them to its own components: a JSON object of the
// config-observability keys ({"metrics-protocol": "http/protobuf", ...}), or
// of observability.Config ({"metrics": {"protocol": ...}, "tracing": ...}).
const EnvConfig = "K_OBSERVABILITY_CONFIG"

// DefaultPrometheusPort is where the Prometheus metrics are served when
// metrics-protocol is prometheus and metrics-endpoint names no address: 9090
// and 9091 are Knative's queue-proxy's.
const DefaultPrometheusPort = "9092"

// ParseConfig reads the settings of K_OBSERVABILITY_CONFIG; empty, nothing
// is exported. An invalid value is an error.
func ParseConfig(v string) (*observability.Config, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return observability.DefaultConfig(), nil
	}
	cfg, err := parseConfig([]byte(v))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvConfig, err)
	}
	return cfg, nil
}

func parseConfig(b []byte) (*observability.Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	_, m := top["metrics"]
	_, t := top["tracing"]
	_, r := top["runtime"]
	var cfg *observability.Config
	if m || t || r {
		cfg = observability.DefaultConfig()
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cfg); err != nil {
			return nil, err
		}
		if cfg.Metrics.Protocol == "" {
			cfg.Metrics.Protocol = metrics.ProtocolNone
		}
		if cfg.Tracing.Protocol == "" {
			cfg.Tracing.Protocol = tracing.ProtocolNone
		}
		if err := errors.Join(cfg.Metrics.Validate(), cfg.Tracing.Validate(), cfg.Runtime.Validate()); err != nil {
			return nil, err
		}
	} else {
		flat := map[string]string{}
		if err := json.Unmarshal(b, &flat); err != nil {
			return nil, fmt.Errorf("the config-observability keys take string values: %v", err)
		}
		var err error
		if cfg, err = observability.NewFromMap(flat); err != nil {
			return nil, err
		}
	}
	if cfg.Metrics.Protocol == metrics.ProtocolPrometheus && cfg.Metrics.Endpoint == "" {
		cfg.Metrics.Endpoint = ":" + DefaultPrometheusPort
	}
	return cfg, nil
}

// Providers are the meter and tracer providers of a process.
type Providers struct {
	Meter  *metrics.MeterProvider
	Tracer *tracing.TracerProvider
}

// Setup builds the providers of cfg for the service (the OTel service.name;
// OTEL_SERVICE_NAME wins) in namespace, makes them the process's (otel's
// globals, with the W3C trace context and baggage propagator), and hooks
// client-go's request metrics to them.
func Setup(ctx context.Context, cfg *observability.Config, service, namespace string) (*Providers, error) {
	res := Resource(service, namespace)
	mp, err := metrics.NewMeterProvider(ctx, cfg.Metrics, sdkmetric.WithResource(res))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	tp, err := tracing.NewTracerProvider(ctx, cfg.Tracing, sdktrace.WithResource(res))
	if err != nil {
		_ = mp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: %w", err)
	}
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(tracing.DefaultTextMapPropagator())
	if err := RegisterClientMetrics(mp); err != nil {
		return nil, err
	}
	return &Providers{Meter: mp, Tracer: tp}, nil
}

// FromEnv is Setup with the settings of K_OBSERVABILITY_CONFIG (its value).
func FromEnv(value, service, namespace string) (*Providers, *observability.Config, error) {
	cfg, err := ParseConfig(value)
	if err != nil {
		return nil, nil, err
	}
	p, err := Setup(context.Background(), cfg, service, namespace)
	return p, cfg, err
}

// Flush shuts the providers down within timeout, flushing what is pending;
// a failure is logged.
func (p *Providers) Flush(log *zap.SugaredLogger, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warnw("Metrics or traces not flushed", "error", err)
	}
}

// Shutdown flushes what is pending and stops the exporters.
func (p *Providers) Shutdown(ctx context.Context) error {
	return errors.Join(p.Meter.Shutdown(ctx), p.Tracer.Shutdown(ctx))
}

// Resource describes the process: the service, its namespace and pod, and
// the SDK's defaults (OTEL_RESOURCE_ATTRIBUTES included).
func Resource(service, namespace string) *resource.Resource {
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		service = name
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if namespace != "" {
		attrs = append(attrs, attribute.String("k8s.namespace.name", namespace))
	}
	if pod := os.Getenv("POD_NAME"); pod != "" {
		attrs = append(attrs, attribute.String("k8s.pod.name", pod))
	} else if host, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("k8s.pod.name", host))
	}
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return resource.NewSchemaless(attrs...)
	}
	return r
}

// TraceAPI wraps the client configuration's transport so that each request
// to the API server made within a span (a step's, a TES API request's) is a
// client span, its child, and carries the trace context. Requests outside
// any span (the Kubernetes Events recorded in the background) are not
// traced.
func TraceAPI(rc *rest.Config, tp trace.TracerProvider) {
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt,
			otelhttp.WithTracerProvider(tp),
			otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }),
			// client-go's own metrics count these requests.
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "k8s " + r.Method }),
		)
	})
}

// LogFields are the trace and span ids of the context's span, as zap fields
// (none without a valid span context).
func LogFields(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
