package eventserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// sinkRecorder is a sink that answers each request with the next of codes
// (the last one once they run out) and records what it received.
type sinkRecorder struct {
	mu     sync.Mutex
	codes  []int
	got    []*http.Request
	bodies []string
}

func (s *sinkRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, r)
	s.bodies = append(s.bodies, string(b))
	code := s.codes[min(len(s.got), len(s.codes))-1]
	s.mu.Unlock()
	w.WriteHeader(code)
}

func (s *sinkRecorder) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

var change = steps.StateChange{Namespace: "tesk", Task: "task-1", Owner: "alice", Old: "RUNNING", New: "SYSTEM_ERROR",
	Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Reason: "Job 'task-1-outputs-filer' failed"}

// testSink is a StateSink to url that records its waits instead of waiting.
func testSink(t *testing.T, url string) (*StateSink, *[]time.Duration) {
	t.Helper()
	s, err := NewStateSink(url)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	s.Sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	return s, &waits
}

// Behaviour §5.8: the event as the sink gets it (binary mode).
func TestStateSinkSendsTheEvent(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	s, _ := testSink(t, hs.URL)
	if err := s.PublishState(context.Background(), change); err != nil {
		t.Fatal(err)
	}
	if rec.requests() != 1 {
		t.Fatalf("%d requests, want 1", rec.requests())
	}
	h := rec.got[0].Header
	for k, want := range map[string]string{
		"Ce-Type": "org.ga4gh.tes.task.state_changed", "Ce-Id": "tesk/task-1/SYSTEM_ERROR", "Ce-Source": "tesk-knative/handler",
		"Ce-Subject": "task-1", "Ce-Time": "2026-01-02T03:04:05Z", "Ce-Specversion": "1.0", "Content-Type": "application/json",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s %q, want %q", k, got, want)
		}
	}
	var data map[string]string
	if err := json.Unmarshal([]byte(rec.bodies[0]), &data); err != nil {
		t.Fatal(err)
	}
	if data["id"] != "task-1" || data["owner"] != "alice" || data["old_state"] != "RUNNING" || data["new_state"] != "SYSTEM_ERROR" ||
		data["time"] != "2026-01-02T03:04:05Z" || data["reason"] != change.Reason || data["namespace"] != "tesk" {
		t.Errorf("data %v", data)
	}
}

// Behaviour §5.8: a sink that fails is tried again, with a doubling
// backoff, up to Attempts times; an answer that refuses the event for what
// it is is not tried again.
func TestStateSinkRetries(t *testing.T) {
	for _, c := range []struct {
		name     string
		codes    []int
		requests int
		ok       bool
	}{
		{"delivered at once", []int{200}, 1, true},
		{"503, 503, then taken", []int{503, 503, 202}, 3, true},
		{"429 then taken", []int{429, 200}, 2, true},
		{"404 (a Broker not ready yet) then taken", []int{404, 200}, 2, true},
		{"500 every time", []int{500}, DefaultStateAttempts, false},
		{"400: never taken", []int{400}, 1, false},
		{"403: never taken", []int{403}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &sinkRecorder{codes: c.codes}
			hs := httptest.NewServer(rec)
			defer hs.Close()
			s, waits := testSink(t, hs.URL)
			err := s.PublishState(context.Background(), change)
			if (err == nil) != c.ok || rec.requests() != c.requests {
				t.Fatalf("error %v after %d requests; want ok=%v after %d", err, rec.requests(), c.ok, c.requests)
			}
			if err != nil && !strings.Contains(err.Error(), "tesk/task-1/SYSTEM_ERROR") {
				t.Errorf("error %q does not name the event", err)
			}
			for i, w := range *waits {
				if want := DefaultStateBackoff << i; w != want {
					t.Errorf("wait %d: %v, want %v", i, w, want)
				}
			}
			if len(*waits) != c.requests-1 {
				t.Errorf("%d waits for %d requests", len(*waits), c.requests)
			}
		})
	}
}

// A sink that is down, or that hangs, fails the publication within bounds.
func TestStateSinkDownOrHanging(t *testing.T) {
	hs := httptest.NewServer(http.NotFoundHandler())
	url := hs.URL
	hs.Close()
	s, waits := testSink(t, url)
	if err := s.PublishState(context.Background(), change); err == nil || len(*waits) != DefaultStateAttempts-1 {
		t.Errorf("a sink that is down: %v after %d waits; want an error after %d attempts", err, len(*waits), DefaultStateAttempts)
	}

	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release)
	s, _ = testSink(t, hang.URL)
	s.Timeout = 300 * time.Millisecond
	start := time.Now()
	err := s.PublishState(context.Background(), change)
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Errorf("a sink that hangs: %v after %v; want an error within the timeout", err, took)
	}
}

// The step's end (its context cancelled) does not cut a publication short.
func TestStateSinkOutlivesTheStep(t *testing.T) {
	rec := &sinkRecorder{codes: []int{200}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	s, _ := testSink(t, hs.URL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PublishState(ctx, change); err != nil || rec.requests() != 1 {
		t.Errorf("after the step's context ended: %v, %d requests; want delivered", err, rec.requests())
	}
}

// The server's sink counts what it delivered and what failed after its
// retries (MetricStateEvents).
func TestStateEventsCounted(t *testing.T) {
	s, rec := newObservedServer(t)
	sink := &sinkRecorder{codes: []int{200, 400}}
	hs := httptest.NewServer(sink)
	defer hs.Close()
	if err := s.TellStates(hs.URL, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.States.PublishState(context.Background(), change); err != nil {
		t.Fatal(err)
	}
	if err := s.Runner.States.PublishState(context.Background(), change); err == nil {
		t.Fatal("a refused event counted as delivered")
	}
	points := collect(t, rec.metrics)
	for outcome, want := range map[string]int64{OutcomeDelivered: 1, OutcomeFailed: 1} {
		if got := value(points, MetricStateEvents, attribute.String(AttrOutcome, outcome)); got != want {
			t.Errorf("%s %s: %d, want %d", MetricStateEvents, outcome, got, want)
		}
	}
}

// With Knative Eventing's authentication-oidc, each event carries the token
// the SinkBinding mounts, read anew for each (it is renewed); without the
// file, none.
func TestStateSinkSendsTheToken(t *testing.T) {
	rec := &sinkRecorder{codes: []int{200}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	s, _ := testSink(t, hs.URL)
	s.TokenFile = filepath.Join(t.TempDir(), "token")
	publish := func() {
		t.Helper()
		if err := s.PublishState(context.Background(), change); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	if err := os.WriteFile(s.TokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	publish()
	if err := os.WriteFile(s.TokenFile, []byte("renewed-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	publish()
	var got []string
	for _, r := range rec.got {
		got = append(got, r.Header.Get("Authorization"))
	}
	if want := []string{"", "Bearer first-token", "Bearer renewed-token"}; !slices.Equal(got, want) {
		t.Errorf("Authorization %q, want %q", got, want)
	}
}
