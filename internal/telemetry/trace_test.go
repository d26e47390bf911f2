package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
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
