package telemetry_test

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
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
	s, err := eventserver.NewTelemetry(p.Meter, p.Tracer)
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
	s, err := eventserver.NewTelemetry(p.Meter, p.Tracer)
	if err != nil {
		t.Fatal(err)
	}
	ctx, st := s.StartStep(context.Background(), nil, nil, "sweep")
	st.End(ctx, 200, false, nil)
	body := scrape(t, addr)
	if !strings.Contains(string(body), `tesk_events_total{cloudevents_event_type="other"`) {
		t.Fatalf("no tesk_events_total at /metrics:\n%s", body)
	}
}

// prometheusProvider sets up the telemetry with metrics-protocol prometheus
// on a free loopback port, shut down at the test's end. The exporter's
// server binds the port itself, after it was found free, so another
// process may take it first: then the setup is made again on another port,
// until the server at the port serves this setup's metrics (its resource's
// namespace, drawn for each setup, in target_info).
func prometheusProvider(t *testing.T) (*telemetry.Providers, string) {
	t.Helper()
	for range 5 {
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
		ns := "ns-" + strings.ToLower(rand.Text())
		p, err := telemetry.Setup(context.Background(), cfg, "test", ns)
		if err != nil {
			t.Fatal(err)
		}
		if servesOwn(addr, ns) {
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			return p, addr
		}
		_ = p.Shutdown(context.Background())
	}
	t.Fatal("no setup's exporter served on the port picked for it")
	return nil, ""
}

// servesOwn reports whether the server at addr serves the metrics of the
// setup of namespace ns: it waits for a server to answer at addr, and
// reports false if one answers without them (another process's), or if
// none answers within 10 seconds (the exporter's server could not bind).
func servesOwn(addr, ns string) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := c.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return err == nil && resp.StatusCode == http.StatusOK && strings.Contains(string(body), `k8s_namespace_name="`+ns+`"`)
	}
	return false
}

// scrape reads the Prometheus exposition at addr's /metrics.
func scrape(t *testing.T, addr string) []byte {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return body
}
