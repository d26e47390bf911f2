//go:build e2e

// Package otel runs a task on the local cluster with the handler binary
// configured by K_OBSERVABILITY_CONFIG to push its metrics and traces over
// OTLP/HTTP to a receiver of the test's own, and checks what arrives.
package otel

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// receiver is an OTLP/HTTP (protobuf) collector: it keeps every span and
// metric data point it is sent.
type receiver struct {
	mu      sync.Mutex
	spans   []*tracepb.Span
	metrics []*metricspb.Metric
	posts   map[string]int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var resp proto.Message
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.posts == nil {
		r.posts = map[string]int{}
	}
	r.posts[req.URL.Path]++
	switch req.URL.Path {
	case "/v1/traces":
		var m colltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range m.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		resp = &colltrace.ExportTraceServiceResponse{}
	case "/v1/metrics":
		var m collmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range m.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				r.metrics = append(r.metrics, sm.Metrics...)
			}
		}
		resp = &collmetrics.ExportMetricsServiceResponse{}
	default:
		http.NotFound(w, req)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *receiver) snapshot() ([]*tracepb.Span, []*metricspb.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...), append([]*metricspb.Metric(nil), r.metrics...)
}

func attr(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func str(kvs []*commonpb.KeyValue, key string) string {
	if v := attr(kvs, key); v != nil {
		return v.GetStringValue()
	}
	return ""
}

// sum adds the points of a counter whose attributes include want.
func sum(ms []*metricspb.Metric, name string, want map[string]string) int64 {
	var n int64
	for _, m := range ms {
		if m.Name != name || m.GetSum() == nil {
			continue
		}
	points:
		for _, dp := range m.GetSum().DataPoints {
			for k, v := range want {
				if str(dp.Attributes, k) != v {
					continue points
				}
			}
			n += dp.GetAsInt()
		}
	}
	return n
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

const task = "task-07e1c0de"

const submitted = `{"task":"` + task + `","input":{"executors":[{"apiVersion":"batch/v1","kind":"Job",
 "metadata":{"name":"` + task + `-ex-00","labels":{"taskmaster-name":"` + task + `","job-type":"executor","executor-no":"0"}},
 "spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"` + task + `-ex-00","image":"ubuntu:24.04",
 "command":["true"],"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}}}]}}`

// The trace context the test sends with task.submitted.
const (
	traceID     = "0af7651916cd43dd8448eb211c80319c"
	parentSpan  = "b7ad6b7169203331"
	traceparent = "00-" + traceID + "-" + parentSpan + "-01"
)

// stack is the handler (and the TES API, if asked for) on the local
// cluster, configured to push to rec.
type stack struct {
	*devstack.Stack
	rec     *receiver
	logPath string
	stopped bool
}

func (s *stack) stop() {
	if !s.stopped {
		s.Stop() // SIGTERM: the processes flush what is pending
		s.stopped = true
	}
}

func startStack(t *testing.T, withTES bool) *stack {
	t.Helper()
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_METRIC_EXPORT_INTERVAL"} {
		t.Setenv(v, "")
	}
	root, _ := filepath.Abs("../..")
	ctx := context.Background()
	rec := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	otlp := &http.Server{Handler: rec, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = otlp.Serve(ln) }()
	t.Cleanup(func() { _ = otlp.Close() })
	base := "http://" + ln.Addr().String()

	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	dir := t.TempDir()
	cmds := []string{"handler"}
	if withTES {
		cmds = append(cmds, "tes")
	}
	for _, cmd := range cmds {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), filepath.Join(root, "cmd", cmd)).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	// Metrics every hour: those that arrive come from the flush at SIGTERM.
	cfg, _ := json.Marshal(map[string]string{
		"metrics-protocol": "http/protobuf", "metrics-endpoint": base + "/v1/metrics", "metrics-export-interval": "1h",
		"tracing-protocol": "http/protobuf", "tracing-endpoint": base + "/v1/traces", "tracing-sampling-rate": "1",
	})
	logPath := filepath.Join(dir, "stack.log")
	logs, _ := os.Create(logPath)
	o := devstack.Options{Root: root, Namespace: "otel", Port: freePort(t), Handler: filepath.Join(dir, "handler"),
		Env: []string{"K_OBSERVABILITY_CONFIG=" + string(cfg)}, Stdout: logs, Stderr: logs}
	if withTES {
		o.TES, o.TESPort = filepath.Join(dir, "tes"), freePort(t)
	}
	ds, err := devstack.Start(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{Stack: ds, rec: rec, logPath: logPath}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("logs:\n%s", out)
		}
	})
	return s
}

// noTaskAttribute checks that no attribute of any metric names task.
func noTaskAttribute(t *testing.T, ms []*metricspb.Metric, task string) {
	t.Helper()
	for _, m := range ms {
		var attrs [][]*commonpb.KeyValue
		if m.GetSum() != nil {
			for _, dp := range m.GetSum().DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		}
		if m.GetHistogram() != nil {
			for _, dp := range m.GetHistogram().DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		}
		for _, kvs := range attrs {
			for _, kv := range kvs {
				if strings.Contains(kv.Value.String(), task) {
					t.Errorf("%s: attribute %s names the task", m.Name, kv.Key)
				}
			}
		}
	}
}

func TestTaskTelemetryOverOTLP(t *testing.T) {
	s := startStack(t, false)
	rec := s.rec
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/", strings.NewReader(submitted))
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "otel-1", "Ce-Source": "test", "Ce-Type": "task.submitted",
		"Content-Type": "application/json", "traceparent": traceparent} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("task.submitted: %d %s", resp.StatusCode, b)
	}
	waitState(t, s.URL+"/tasks/otel/"+task, tesv1.StateComplete, 90*time.Second)

	spansBefore, metricsBefore := rec.snapshot()
	if len(metricsBefore) != 0 {
		t.Fatalf("%d metrics before SIGTERM with an export interval of an hour", len(metricsBefore))
	}
	s.stop()
	spans, ms := rec.snapshot()
	t.Logf("spans: %d before SIGTERM, %d after; metrics: %d after; posts %v", len(spansBefore), len(spans), len(ms), rec.posts)

	// The submission's step: a child of the test's traceparent, with the
	// API requests it made as its children.
	var submit *tracepb.Span
	stepsOfTask, ended := 0, false
	for _, sp := range spans {
		if !strings.HasPrefix(sp.Name, "step ") || str(sp.Attributes, "tesk.task") != task {
			continue
		}
		stepsOfTask++
		if sp.Name == "step submit" {
			submit = sp
		}
		if str(sp.Attributes, "tesk.task.state") == tesv1.StateComplete {
			ended = true
		}
	}
	if submit == nil {
		t.Fatalf("no span of the submission among %d spans", len(spans))
	}
	if fmt.Sprintf("%x", submit.TraceId) != traceID || fmt.Sprintf("%x", submit.ParentSpanId) != parentSpan {
		t.Errorf("the submission's span: trace %x parent %x, want %s %s", submit.TraceId, submit.ParentSpanId, traceID, parentSpan)
	}
	children := map[string]int{}
	for _, sp := range spans {
		if bytes.Equal(sp.ParentSpanId, submit.SpanId) && strings.HasPrefix(sp.Name, "k8s ") {
			children[sp.Name]++
		}
	}
	if children["k8s POST"] == 0 || children["k8s GET"] == 0 {
		t.Errorf("the submission's API requests as child spans: %v, want creates and reads", children)
	}
	if stepsOfTask < 2 || !ended {
		t.Errorf("%d step spans of the task, one of them COMPLETE: %v; want the submission and the steps after", stepsOfTask, ended)
	}

	// The metrics, flushed at SIGTERM.
	for _, c := range []struct {
		name string
		want map[string]string
	}{
		{"tesk.events", map[string]string{"cloudevents.event_type": "task.submitted", "tesk.outcome": "done"}},
		{"tesk.events", map[string]string{"cloudevents.event_type": "dev.knative.apiserver.resource.update"}},
		{"tesk.actions", map[string]string{"tesk.action.kind": "create-job"}},
		{"tesk.tasks.ended", map[string]string{"tesk.task.state": tesv1.StateComplete}},
		{"tesk.k8s.requests", map[string]string{"http.request.method": "POST"}},
	} {
		if n := sum(ms, c.name, c.want); n < 1 {
			t.Errorf("%s %v = %d, want at least 1", c.name, c.want, n)
		}
	}
	if n := sum(ms, "tesk.tasks.ended", map[string]string{"tesk.task.state": tesv1.StateComplete}); n != 1 {
		t.Errorf("tasks ended COMPLETE: %d, want 1", n)
	}
	noTaskAttribute(t, ms, task)

	// The submission's log lines carry its span's trace and span ids.
	out, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range strings.Split(string(out), "\n") {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) != nil || line["event"] != "otel-1" {
			continue
		}
		lines++
		if line["trace_id"] != traceID || line["span_id"] != spanID(submit) {
			t.Errorf("log line %q: trace_id %v span_id %v, want %s %s", line["msg"], line["trace_id"], line["span_id"], traceID, spanID(submit))
		}
	}
	if lines == 0 {
		t.Error("no log line of the submission")
	}
}

func waitState(t *testing.T, url, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	state := ""
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			var v tesv1.Task
			_ = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if state = v.State; state == want {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("the task is %q after %s, want %s", state, timeout, want)
}

func spanID(sp *tracepb.Span) string   { return fmt.Sprintf("%x", sp.SpanId) }
func parentID(sp *tracepb.Span) string { return fmt.Sprintf("%x", sp.ParentSpanId) }

// A task created through the TES API is one trace: the API's request span
// (a child of the caller's traceparent), its API request and the post of
// task.submitted as its children, and the handler's submission step a
// child of that post.
func TestTESTraceGoesOnInTheHandler(t *testing.T) {
	s := startStack(t, true)
	req, _ := http.NewRequest(http.MethodPost, s.TESURL+"/ga4gh/tes/v1/tasks",
		strings.NewReader(`{"name":"otel","executors":[{"image":"ubuntu:24.04","command":["true"]}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || created.ID == "" {
		t.Fatalf("create: %d, id %q", resp.StatusCode, created.ID)
	}
	waitState(t, s.URL+"/tasks/otel/"+created.ID, tesv1.StateComplete, 90*time.Second)
	s.stop()
	spans, ms := s.rec.snapshot()

	var api, post, submit *tracepb.Span
	for _, sp := range spans {
		switch {
		case sp.Name == "POST /ga4gh/tes/v1/tasks":
			api = sp
		case sp.Name == "event POST":
			post = sp
		case sp.Name == "step submit" && str(sp.Attributes, "tesk.task") == created.ID:
			submit = sp
		}
	}
	if api == nil || post == nil || submit == nil {
		t.Fatalf("spans of the API request %v, of the post %v, of the submission %v (of %d)", api != nil, post != nil, submit != nil, len(spans))
	}
	for _, sp := range []*tracepb.Span{api, post, submit} {
		if fmt.Sprintf("%x", sp.TraceId) != traceID {
			t.Errorf("span %q is in trace %x, want %s", sp.Name, sp.TraceId, traceID)
		}
	}
	if parentID(api) != parentSpan || parentID(post) != spanID(api) || parentID(submit) != spanID(post) {
		t.Errorf("parents: API request %s (want %s), post %s (want %s), submission %s (want %s)",
			parentID(api), parentSpan, parentID(post), spanID(api), parentID(submit), spanID(post))
	}
	creates := 0
	for _, sp := range spans {
		if sp.Name == "k8s POST" && parentID(sp) == spanID(api) {
			creates++
		}
	}
	if creates != 1 {
		t.Errorf("%d API requests k8s POST under the TES API's request, want the anchor's create", creates)
	}
	if n := sum(ms, "tesk.tes.tasks.created", nil); n != 1 {
		t.Errorf("tasks created: %d, want 1", n)
	}
	found := false
	for _, m := range ms {
		if m.Name != "tesk.tes.requests" {
			continue
		}
		for _, dp := range m.GetSum().DataPoints {
			if str(dp.Attributes, "http.route") == "/ga4gh/tes/v1/tasks" && str(dp.Attributes, "http.request.method") == "POST" &&
				attr(dp.Attributes, "http.response.status_code").GetIntValue() == 200 && dp.GetAsInt() == 1 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("tesk.tes.requests has no count of POST /ga4gh/tes/v1/tasks answered 200")
	}
	noTaskAttribute(t, ms, created.ID)
}
