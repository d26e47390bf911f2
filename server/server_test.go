package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

func newTestServer() *Server {
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tesk"
	log := zap.NewNop().Sugar()
	return &Server{
		Runner:    &steps.Runner{Client: fake.NewSimpleClientset(), Config: cfg, Log: log},
		Namespace: "tesk",
		Log:       log,
	}
}

func post(t *testing.T, s *Server, typ, data string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(data))
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", "1")
	req.Header.Set("Ce-Source", "test")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	s.Echo().ServeHTTP(rec, req)
	return rec
}

const submitted = `{"task":"task-1","input":{"executors":[{"metadata":{"name":"task-1-ex-00"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"ubuntu"}]}}}}]}}`

// A Knative dispatcher ("Prefer: reply") gets an empty 2xx body, as it
// refuses any other reply than a CloudEvent; others get the step's summary.
func TestReplyBodies(t *testing.T) {
	s := newTestServer()
	rec := post(t, s, "task.submitted", submitted, map[string]string{"Prefer": "reply"})
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("with Prefer: reply: %d %q, want 200 and no body", rec.Code, rec.Body.String())
	}
	rec = post(t, s, "job.finished", `{"task":"task-1","job":"task-1-ex-00"}`, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"task":"task-1"`) {
		t.Errorf("without: %d %q, want 200 and the summary", rec.Code, rec.Body.String())
	}
	// Errors keep their JSON body (a dead letter sink receives it).
	rec = post(t, s, "task.exploded", `{}`, map[string]string{"Prefer": "reply"})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"error"`) {
		t.Errorf("bad event: %d %q", rec.Code, rec.Body.String())
	}
}

// Cancelling an unknown task is a 400, not a 404 that Knative would retry.
func TestCancelUnknownTask(t *testing.T) {
	s := newTestServer()
	rec := post(t, s, "task.cancelled", `{"task":"task-none"}`, nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "no such task") {
		t.Errorf("%d %s", rec.Code, rec.Body.String())
	}
}

// The view of an unknown task is a 404; of another namespace too.
func TestViewUnknown(t *testing.T) {
	s := newTestServer()
	for _, path := range []string{"/tasks/tesk/task-none", "/tasks/other/task-1"} {
		rec := httptest.NewRecorder()
		s.Echo().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, rec.Code)
		}
	}
}
