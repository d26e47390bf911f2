package eventserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + parentSpan + "-01"
)

type recorded struct {
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
	logs    *observer.ObservedLogs
}

func newObservedServer(t *testing.T) (*Server, recorded) {
	t.Helper()
	s := newTestServer()
	rec := recorded{spans: tracetest.NewSpanRecorder(), metrics: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rec.metrics))
	var err error
	if s.Telemetry, err = NewTelemetry(mp, tp); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.DebugLevel)
	rec.logs = logs
	s.Log = zap.New(core).Sugar()
	s.Runner.Log = s.Log
	return s, rec
}

func (r recorded) step(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var steps []sdktrace.ReadOnlySpan
	for _, sp := range r.spans.Ended() {
		if strings.HasPrefix(sp.Name(), "step ") {
			steps = append(steps, sp)
		}
	}
	if len(steps) != 1 {
		t.Fatalf("%d step spans, want 1", len(steps))
	}
	return steps[0]
}

func checkParent(t *testing.T, sp sdktrace.ReadOnlySpan) {
	t.Helper()
	if sp.SpanContext().TraceID().String() != traceID || sp.Parent().SpanID().String() != parentSpan || !sp.Parent().IsRemote() {
		t.Fatalf("span %q: trace %s parent %s, want trace %s parent %s (remote)", sp.Name(),
			sp.SpanContext().TraceID(), sp.Parent().SpanID(), traceID, parentSpan)
	}
}

// The step's span is a child of the traceparent header of a binary-mode
// event (the HTTP trace context).
func TestStepSpanFromTraceparentHeader(t *testing.T) {
	s, rec := newObservedServer(t)
	res := post(t, s, "task.submitted", submitted, map[string]string{"traceparent": traceparent})
	if res.Code != http.StatusOK {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	sp := rec.step(t)
	checkParent(t, sp)
	if sp.Name() != "step submit" {
		t.Errorf("name %q", sp.Name())
	}
	attrs := attribute.NewSet(sp.Attributes()...)
	if v, _ := attrs.Value(AttrTask); v.AsString() != "task-1" {
		t.Errorf("the span names task %q", v.AsString())
	}
	if v, _ := attrs.Value(AttrOutcome); v.AsString() != OutcomeDone {
		t.Errorf("outcome %q", v.AsString())
	}
}

// The distributed tracing extension: ce-traceparent in binary mode.
func TestStepSpanFromExtensionHeader(t *testing.T) {
	s, rec := newObservedServer(t)
	res := post(t, s, "task.submitted", submitted, map[string]string{"ce-traceparent": traceparent})
	if res.Code != http.StatusOK {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	checkParent(t, rec.step(t))
}

// The distributed tracing extension of a structured-mode event.
func TestStepSpanFromStructuredEvent(t *testing.T) {
	s, rec := newObservedServer(t)
	body := `{"specversion":"1.0","id":"s-1","source":"test","type":"task.submitted","datacontenttype":"application/json","traceparent":"` + traceparent + `","data":` + submitted + `}`
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	res := httptest.NewRecorder()
	s.Echo().ServeHTTP(res, req)
	if res.Code != http.StatusOK {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	checkParent(t, rec.step(t))
}

// Without a trace context, a step starts a trace of its own.
func TestStepSpanWithoutParent(t *testing.T) {
	s, rec := newObservedServer(t)
	post(t, s, "task.submitted", submitted, nil)
	sp := rec.step(t)
	if sp.Parent().IsValid() || !sp.SpanContext().IsValid() {
		t.Fatalf("parent %v, span %v: want a root span", sp.Parent(), sp.SpanContext())
	}
}

// Every line a step logs carries its trace and span ids.
func TestTraceIDInLogLines(t *testing.T) {
	s, rec := newObservedServer(t)
	// Input that can never run: the task ends SYSTEM_ERROR, logged by the
	// steps, and the server logs the refusal.
	res := post(t, s, "task.submitted", `{"task":"task-2","input":{"executors":"no"}}`, map[string]string{"traceparent": traceparent})
	if res.Code != http.StatusBadRequest {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	span := rec.step(t).SpanContext().SpanID().String()
	lines := rec.logs.All()
	if len(lines) < 2 {
		t.Fatalf("%d log lines, want the steps' and the server's", len(lines))
	}
	for _, l := range lines {
		f := l.ContextMap()
		if f["trace_id"] != traceID || f["span_id"] != span {
			t.Errorf("line %q: trace_id %v span_id %v, want %s %s", l.Message, f["trace_id"], f["span_id"], traceID, span)
		}
	}
}

type point struct {
	metric string
	attrs  attribute.Set
	value  int64
}

func collect(t *testing.T, r *sdkmetric.ManualReader) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, int64(dp.Count)})
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, dp.Value})
				}
			case metricdata.Gauge[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{m.Name, dp.Attributes, int64(dp.Value)})
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func value(points []point, metric string, kv ...attribute.KeyValue) int64 {
	want := attribute.NewSet(kv...)
	var n int64
	for _, p := range points {
		if p.metric == metric && p.attrs.Equals(&want) {
			n += p.value
		}
	}
	return n
}

// Events by type and outcome, step latency, actions by kind, tasks ended by
// state; no attribute of any metric names a task.
func TestStepMetrics(t *testing.T) {
	s, rec := newObservedServer(t)
	post(t, s, "task.submitted", submitted, nil)
	post(t, s, "task.submitted", `{"task":"task-2","input":{"executors":"no"}}`, nil)
	post(t, s, "job.finished", `{"task":"task-9","job":"task-9-ex-00"}`, nil) // unknown task
	post(t, s, "no.such.type", `{}`, nil)
	points := collect(t, rec.metrics)

	typ := func(v string) attribute.KeyValue { return attribute.String(AttrEventType, v) }
	out := func(v string) attribute.KeyValue { return attribute.String(AttrOutcome, v) }
	for _, c := range []struct {
		metric string
		kv     []attribute.KeyValue
		want   int64
	}{
		{MetricEvents, []attribute.KeyValue{typ("task.submitted"), out(OutcomeDone)}, 1},
		{MetricEvents, []attribute.KeyValue{typ("task.submitted"), out(OutcomeRefused)}, 1},
		{MetricEvents, []attribute.KeyValue{typ("job.finished"), out(OutcomeIgnored)}, 1},
		{MetricEvents, []attribute.KeyValue{typ("other"), out(OutcomeRefused)}, 1},
		{MetricStepDuration, []attribute.KeyValue{typ("task.submitted"), out(OutcomeDone)}, 1},
		{MetricActions, []attribute.KeyValue{attribute.String(AttrActionKind, "create-job")}, 1},
		{MetricTasksEnded, []attribute.KeyValue{attribute.String(AttrState, "SYSTEM_ERROR")}, 1},
	} {
		if got := value(points, c.metric, c.kv...); got != c.want {
			t.Errorf("%s %v = %d, want %d", c.metric, c.kv, got, c.want)
		}
	}
	for _, p := range points {
		for _, kv := range p.attrs.ToSlice() {
			if v := kv.Value.Emit(); strings.Contains(v, "task-") || v == "no.such.type" {
				t.Errorf("%s: attribute %s=%q names a task or an unbounded value", p.metric, kv.Key, v)
			}
		}
	}
}

// A sweep's steps count as the steps of events do.
func TestSweepMetrics(t *testing.T) {
	s, rec := newObservedServer(t)
	if res := post(t, s, "task.submitted", submitted, nil); res.Code != http.StatusOK {
		t.Fatalf("%d %s", res.Code, res.Body)
	}
	ctx := context.Background()
	cms := s.Runner.Client.CoreV1().ConfigMaps("tesk")
	anchor, err := cms.Get(ctx, "task-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	anchor.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	if _, err = cms.Update(ctx, anchor, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The first sweep deletes the job, the second ends the task.
	var bodies []string
	for i := 0; i < 2; i++ {
		// The sweep lists the anchors' metadata.
		anchor, err := cms.Get(ctx, "task-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sc := metadatafake.NewTestScheme()
		sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, &metav1.PartialObjectMetadata{})
		sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}, &metav1.PartialObjectMetadataList{})
		s.Metadata = metadatafake.NewSimpleMetadataClient(sc,
			&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: anchor.ObjectMeta})
		res := post(t, s, "dev.knative.sources.ping", `{}`, nil)
		if res.Code != http.StatusOK {
			t.Fatalf("sweep: %d %s", res.Code, res.Body)
		}
		bodies = append(bodies, res.Body.String())
	}
	points := collect(t, rec.metrics)
	if n := value(points, MetricActions, attribute.String(AttrActionKind, "delete-job")); n != 1 {
		t.Errorf("delete-job actions: %d, want 1 (sweeps: %s)", n, bodies)
	}
	if n := value(points, MetricTasksEnded, attribute.String(AttrState, "CANCELED")); n != 1 {
		t.Errorf("tasks ended CANCELED: %d, want 1 (sweeps: %s)", n, bodies)
	}
	if n := value(points, MetricEvents, attribute.String(AttrEventType, "dev.knative.sources.ping"), attribute.String(AttrOutcome, OutcomeDone)); n != 2 {
		t.Errorf("sweep events: %d, want 2", n)
	}
	// The gauges hold the last sweep's counts: it found the task CANCELING
	// (its job gone, its end not yet written), and every other state empty.
	states := 0
	for _, p := range points {
		if p.metric == MetricTasks {
			states++
		}
	}
	if states != len(steps.ServiceStates) {
		t.Errorf("%d states in %s, want %d", states, MetricTasks, len(steps.ServiceStates))
	}
	for _, c := range []struct {
		metric string
		kv     []attribute.KeyValue
		want   int64
	}{
		{MetricTasks, []attribute.KeyValue{attribute.String(AttrState, tesv1.StateCanceling)}, 1},
		{MetricTasks, []attribute.KeyValue{attribute.String(AttrState, tesv1.StateQueued)}, 0},
		{MetricTasksQueued, nil, 0},
	} {
		if got := value(points, c.metric, c.kv...); got != c.want {
			t.Errorf("%s %v = %d, want %d (sweeps: %s)", c.metric, c.kv, got, c.want, bodies)
		}
	}
	for _, p := range points {
		if p.metric == MetricTasksStepAge {
			t.Errorf("%s %v: no task QUEUED, INITIALIZING or RUNNING was found", p.metric, p.attrs)
		}
	}
}
