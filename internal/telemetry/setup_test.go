package telemetry_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
	"github.com/elixir-cloud-aai/tesk-knative/server"
)

// Unconfigured, the providers are Knative's no-ops: nothing is recorded, no
// exporter runs.
func TestSetupUnconfigured(t *testing.T) {
	cfg, _ := telemetry.ParseConfig((""))
	p, err := telemetry.Setup(context.Background(), cfg, "test", "ns")
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
	s, err := server.NewTelemetry(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, st := s.StartStep(context.Background(), nil, nil, "sweep")
	st.End(ctx, 200, false, nil)
	if telemetry.LogFields(ctx) != nil {
		t.Fatalf("log fields without a trace: %v", telemetry.LogFields(ctx))
	}
}

// metrics-protocol prometheus serves the metrics at /metrics on the
// configured address.
func TestPrometheus(t *testing.T) {
	p, addr := prometheusProvider(t)
	s, err := server.NewTelemetry(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, st := s.StartStep(context.Background(), nil, nil, "sweep")
	st.End(ctx, 200, false, nil)
	body := scrape(addr)
	if !strings.Contains(string(body), `tesk_events_total{cloudevents_event_type="other"`) {
		t.Fatalf("no tesk_events_total at /metrics:\n%s", body)
	}
}

// prometheusProvider sets up the telemetry with metrics-protocol prometheus
// on a free loopback port, shut down at the test's end.
func prometheusProvider(t *testing.T) (*telemetry.Providers, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg, err := telemetry.ParseConfig(`{"metrics-protocol":"prometheus","metrics-endpoint":"` + addr + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := telemetry.Setup(context.Background(), cfg, "test", "ns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, addr
}

// scrape reads the Prometheus exposition at addr's /metrics, once the
// exporter's server answers (nothing if it never does).
func scrape(addr string) []byte {
	for i := 0; i < 50; i++ {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return body
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
