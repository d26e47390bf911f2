package eventserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"knative.dev/pkg/observability"
	"knative.dev/pkg/observability/metrics"
	"knative.dev/pkg/observability/tracing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/telemetry"
)

// BenchmarkStepTelemetry is the handler's time for one task.submitted (the
// step on a fake clientset: the anchor, the PVC or job created), without
// telemetry configured and with OTLP/HTTP metrics and traces pushed to a
// local receiver (every span sampled, metrics every second).
func BenchmarkStepTelemetry(b *testing.B) {
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	configured := observability.DefaultConfig()
	configured.Metrics = metrics.Config{Protocol: metrics.ProtocolHTTPProtobuf, Endpoint: otlp.URL + "/v1/metrics", ExportInterval: 1e9}
	configured.Tracing = tracing.Config{Protocol: tracing.ProtocolHTTPProtobuf, Endpoint: otlp.URL + "/v1/traces", SamplingRate: 1}
	for _, c := range []struct {
		name string
		cfg  *observability.Config
	}{{"unconfigured", observability.DefaultConfig()}, {"otlp", configured}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := telemetry.Setup(context.Background(), c.cfg, "bench", "tesk")
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = p.Shutdown(context.Background()) }()
			s := newTestServer()
			if s.Telemetry, err = NewTelemetry(p.Meter, p.Tracer); err != nil {
				b.Fatal(err)
			}
			e := s.Echo()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				task := fmt.Sprintf("task-%08x", i)
				data := strings.ReplaceAll(submitted, "task-1", task)
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(data))
				req.Header.Set("Ce-Specversion", "1.0")
				req.Header.Set("Ce-Id", task)
				req.Header.Set("Ce-Source", "bench")
				req.Header.Set("Ce-Type", "task.submitted")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("traceparent", traceparent)
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
