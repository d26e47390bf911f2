package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/tracing"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig((""))
	if err != nil || cfg.Metrics.Protocol != metrics.ProtocolNone || cfg.Tracing.Protocol != tracing.ProtocolNone {
		t.Fatalf("unset: %+v %v, want none and none", cfg, err)
	}
	// The config-observability keys.
	cfg, err = ParseConfig((`{"metrics-protocol":"http/protobuf","metrics-endpoint":"http://127.0.0.1:4318/v1/metrics","metrics-export-interval":"5s","tracing-protocol":"grpc","tracing-endpoint":"http://127.0.0.1:4317","tracing-sampling-rate":"0.5"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Protocol != "http/protobuf" || cfg.Metrics.Endpoint != "http://127.0.0.1:4318/v1/metrics" || cfg.Metrics.ExportInterval.String() != "5s" ||
		cfg.Tracing.Protocol != "grpc" || cfg.Tracing.SamplingRate != 0.5 {
		t.Fatalf("flat keys: %+v", cfg)
	}
	// observability.Config's JSON, as Knative eventing passes it.
	cfg, err = ParseConfig((`{"tracing":{"protocol":"http/protobuf","endpoint":"http://h:4318/v1/traces","samplingRate":1}}`))
	if err != nil || cfg.Tracing.Endpoint != "http://h:4318/v1/traces" || cfg.Metrics.Protocol != metrics.ProtocolNone {
		t.Fatalf("nested: %+v %v", cfg, err)
	}
	// Prometheus on 9092 unless told otherwise.
	cfg, err = ParseConfig((`{"metrics-protocol":"prometheus"}`))
	if err != nil || cfg.Metrics.Endpoint != ":9092" {
		t.Fatalf("prometheus: %+v %v, want :9092", cfg.Metrics, err)
	}
	cfg, err = ParseConfig((`{"metrics-protocol":"prometheus","metrics-endpoint":"127.0.0.1:9200"}`))
	if err != nil || cfg.Metrics.Endpoint != "127.0.0.1:9200" {
		t.Fatalf("prometheus with an endpoint: %+v %v", cfg.Metrics, err)
	}
	for _, bad := range []string{
		`not json`,
		`{"metrics-protocol":"carrier-pigeon"}`,
		`{"metrics-protocol":"grpc"}`, // no endpoint
		`{"tracing-sampling-rate":"2","tracing-protocol":"grpc","tracing-endpoint":"http://h"}`,
		`{"metrics":{"protocol":"none"},"extra":1}`,
		`{"metrics-export-interval":5}`,
	} {
		if cfg, err := ParseConfig((bad)); err == nil {
			t.Errorf("%s: no error, got %+v", bad, cfg)
		}
	}
}

// The client-go hooks count requests by method and status code.
func TestClientMetrics(t *testing.T) {
	r := sdkmetric.NewManualReader()
	if err := RegisterClientMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clientResult{}.Increment(ctx, "201", "post", "h")
	clientResult{}.Increment(ctx, "<error>", "get", "h")
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != MetricAPIRequests {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				got[dp.Attributes.Encoded(attribute.DefaultEncoder())] += dp.Value
			}
		}
	}
	if len(got) != 2 || got["http.request.method=POST,http.response.status_code=201"] != 1 || got["error.type=no_response,http.request.method=GET"] != 1 {
		t.Fatalf("requests: %v", got)
	}
}
