package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
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

// Unconfigured, the providers are Knative's no-ops: nothing is recorded, no
// exporter runs.
func TestSetupUnconfigured(t *testing.T) {
	cfg, _ := ParseConfig((""))
	p, err := Setup(context.Background(), cfg, "test", "ns")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	if _, ok := p.Meter.MeterProvider.(*sdkmetric.MeterProvider); ok {
		t.Fatal("an SDK meter provider without configuration")
	}
	_, span := p.Tracer.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("a recording span without configuration")
	}
	s, err := NewSteps(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, st := s.StartStep(context.Background(), nil, nil, "sweep")
	st.End(ctx, 200, false, nil)
	if LogFields(ctx) != nil {
		t.Fatalf("log fields without a trace: %v", LogFields(ctx))
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

// metrics-protocol prometheus serves the metrics at /metrics on the
// configured address.
func TestPrometheus(t *testing.T) {
	p, addr := prometheusProvider(t)
	s, err := NewSteps(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, st := s.StartStep(context.Background(), nil, nil, "sweep")
	st.End(ctx, 200, false, nil)
	var body []byte
	for i := 0; i < 50; i++ {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(string(body), `tesk_events_total{cloudevents_event_type="other"`) {
		t.Fatalf("no tesk_events_total at /metrics:\n%s", body)
	}
}

// The gauges report the last sweep's counts, the step ages as of each
// collection, for SweepFresh after the sweep; then nothing.
func TestSweptTasksGauges(t *testing.T) {
	r := sdkmetric.NewManualReader()
	s, err := NewSteps(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), tracenoop.NewTracerProvider())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	s.now = func() time.Time { return now }
	gauges := func() map[string]float64 {
		var rm metricdata.ResourceMetrics
		if err := r.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					for _, dp := range d.DataPoints {
						got[m.Name+"{"+dp.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = float64(dp.Value)
					}
				case metricdata.Gauge[float64]:
					for _, dp := range d.DataPoints {
						got[m.Name+"{"+dp.Attributes.Encoded(attribute.DefaultEncoder())+"}"] = dp.Value
					}
				}
			}
		}
		return got
	}
	if got := gauges(); len(got) != 0 {
		t.Fatalf("before any sweep: %v", got)
	}
	states := map[string]int{"QUEUED": 2, "RUNNING": 1, "COMPLETE": 0}
	s.SweptTasks(states, 2, map[string]time.Time{"QUEUED": t0.Add(-time.Minute), "RUNNING": t0.Add(-time.Hour)})
	states["QUEUED"] = 99 // the gauges hold a copy
	now = t0.Add(2 * time.Minute)
	want := map[string]float64{
		MetricTasks + "{tesk.task.state=QUEUED}":         2,
		MetricTasks + "{tesk.task.state=RUNNING}":        1,
		MetricTasks + "{tesk.task.state=COMPLETE}":       0,
		MetricTasksQueued + "{}":                         2,
		MetricTasksStepAge + "{tesk.task.state=QUEUED}":  180,
		MetricTasksStepAge + "{tesk.task.state=RUNNING}": 3720,
	}
	if got := gauges(); !reflect.DeepEqual(got, want) {
		t.Fatalf("gauges %v, want %v", got, want)
	}
	now = t0.Add(SweepFresh + time.Second)
	if got := gauges(); len(got) != 0 {
		t.Fatalf("%s after the sweep: %v, want nothing", SweepFresh+time.Second, got)
	}
	s.SweptTasks(map[string]int{"QUEUED": 0}, 0, nil)
	if got := gauges(); len(got) != 2 || got[MetricTasksQueued+"{}"] != 0 {
		t.Fatalf("after the next sweep: %v", got)
	}
}

// prometheusProvider sets up the telemetry with metrics-protocol prometheus
// on a free loopback port, shut down at the test's end.
func prometheusProvider(t *testing.T) (*Providers, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg, err := ParseConfig(`{"metrics-protocol":"prometheus","metrics-endpoint":"` + addr + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Setup(context.Background(), cfg, "test", "ns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, addr
}
