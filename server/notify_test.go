package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
)

// notifyServer is a handler whose operator allows the addresses under
// prefix.
func notifyServer(prefix string) *Server {
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tesk"
	cfg.NotifyURLPrefixes = []string{prefix}
	log := zap.NewNop().Sugar()
	return &Server{Runner: &steps.Runner{Client: fake.NewSimpleClientset(), Config: cfg, Log: log}, Namespace: "tesk", Log: log}
}

// postNotify sends a state change event to /notify in binary mode, with
// the address addr ("": none); hdr are more headers.
func postNotify(t *testing.T, s *Server, typ, addr string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	body, _ := json.Marshal(events.StateChangedData{ID: "task-1", Namespace: "tesk", Owner: "alice", OldState: "QUEUED", NewState: "RUNNING", Time: "2026-01-02T03:04:05Z"})
	req := httptest.NewRequest(http.MethodPost, "/notify", strings.NewReader(string(body)))
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "tesk/task-1/RUNNING", "Ce-Source": events.SourceHandler, "Ce-Type": typ, "Ce-Subject": "task-1", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	if addr != "" {
		req.Header.Set("Ce-Notifyurl", addr)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	s.Echo().ServeHTTP(rec, req)
	return rec
}

// Behaviour §5.8: /notify posts the event to the task's address as it
// came, without the address, and answers as the address did (a failure
// 502, which the Trigger retries).
func TestNotifyPostsToTheTasksAddress(t *testing.T) {
	for _, c := range []struct {
		name     string
		code     int // the address's answer
		want     int
		requests int
	}{
		{"the address takes it", http.StatusAccepted, http.StatusOK, 1},
		{"the address fails", http.StatusInternalServerError, http.StatusBadGateway, 1},
		{"the address refuses it", http.StatusNotFound, http.StatusBadGateway, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &sinkRecorder{codes: []int{c.code}}
			hs := httptest.NewServer(rec)
			defer hs.Close()
			s := notifyServer(hs.URL + "/hooks")
			res := postNotify(t, s, events.TypeTaskStateChanged, hs.URL+"/hooks/task-1")
			if res.Code != c.want {
				t.Fatalf("answer %d (%s), want %d", res.Code, res.Body, c.want)
			}
			if rec.requests() != c.requests {
				t.Fatalf("%d posts, want %d", rec.requests(), c.requests)
			}
			got := rec.got[0]
			if got.URL.Path != "/hooks/task-1" || got.Header.Get("Ce-Type") != events.TypeTaskStateChanged || got.Header.Get("Ce-Id") != "tesk/task-1/RUNNING" || got.Header.Get("Ce-Subject") != "task-1" {
				t.Errorf("posted to %s with %v", got.URL.Path, got.Header)
			}
			if got.Header.Get("Ce-Notifyurl") != "" {
				t.Errorf("the address went with the event: %q", got.Header.Get("Ce-Notifyurl"))
			}
			var d events.StateChangedData
			if err := json.Unmarshal([]byte(rec.bodies[0]), &d); err != nil || d.ID != "task-1" || d.NewState != "RUNNING" || d.Owner != "alice" {
				t.Errorf("data %q (%v)", rec.bodies[0], err)
			}
			if c.want != http.StatusOK && !strings.Contains(res.Body.String(), hs.URL+"/hooks/task-1") {
				t.Errorf("the failure does not name the address: %s", res.Body)
			}
		})
	}
}

// What /notify does not post: an address the operator does not allow, an
// event that is not a state change, a redirect; an event without an
// address is taken and nothing is posted.
func TestNotifyPostsNowhereElse(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	redirect := httptest.NewServer(http.RedirectHandler(hs.URL+"/elsewhere", http.StatusTemporaryRedirect))
	defer redirect.Close()
	for _, c := range []struct {
		name, typ, addr, prefix string
		want                    int
		says                    string
	}{
		{"an address not allowed", events.TypeTaskStateChanged, hs.URL + "/admin", hs.URL + "/hooks", http.StatusBadRequest, "not among"},
		{"an address with a dot segment", events.TypeTaskStateChanged, hs.URL + "/hooks/../admin", hs.URL + "/hooks", http.StatusBadRequest, "plain form"},
		{"not a state change", "task.submitted", hs.URL + "/hooks/x", hs.URL + "/hooks", http.StatusBadRequest, "only org.ga4gh.tes.task.state_changed"},
		{"no address", events.TypeTaskStateChanged, "", hs.URL + "/hooks", http.StatusOK, "no address"},
		{"a redirect", events.TypeTaskStateChanged, redirect.URL + "/hooks/x", redirect.URL + "/hooks", http.StatusBadGateway, "307"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := postNotify(t, notifyServer(c.prefix), c.typ, c.addr)
			if res.Code != c.want || !strings.Contains(res.Body.String(), c.says) {
				t.Errorf("answer %d %s, want %d saying %q", res.Code, res.Body, c.want, c.says)
			}
		})
	}
	if rec.requests() != 0 {
		t.Errorf("%d posts to the server, want none", rec.requests())
	}
}

// Without NOTIFY_URL_PREFIXES there is no /notify.
func TestNoNotifyWithoutPrefixes(t *testing.T) {
	if res := postNotify(t, newTestServer(), events.TypeTaskStateChanged, "http://127.0.0.1:1/x"); res.Code != http.StatusNotFound && res.Code != http.StatusMethodNotAllowed {
		t.Errorf("answer %d %s, want no such route", res.Code, res.Body)
	}
}

// The event of a change of a task whose tag names an allowed address
// carries it; one not allowed is left out (the TES API refuses such a task,
// but an anchor may be written by other means).
func TestStateEventNamesTheAllowedAddress(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"https://hooks.example.org/tes/task-1", "https://hooks.example.org/tes/task-1"},
		{"https://elsewhere.example.org/task-1", ""},
		{"", ""},
	} {
		rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
		hs := httptest.NewServer(rec)
		s, _ := testSink(t, hs.URL)
		s.NotifyPrefixes = []string{"https://hooks.example.org/tes"}
		ch := change
		ch.NotifyURL = c.addr
		if err := s.PublishState(context.Background(), ch); err != nil {
			t.Fatal(err)
		}
		if got := rec.got[0].Header.Get("Ce-Notifyurl"); got != c.want {
			t.Errorf("tag %q: the event names %q, want %q", c.addr, got, c.want)
		}
		hs.Close()
	}
}

// A Knative dispatcher (the Trigger tesk-state-notify) asks with "Prefer:
// reply" and takes a 2xx only with an empty body or a CloudEvent: /notify
// answers it with an empty one, or the Trigger would deliver the change
// again.
func TestNotifyAnswersADispatcherEmpty(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	for _, addr := range []string{hs.URL + "/hooks/task-1", ""} {
		res := postNotify(t, notifyServer(hs.URL+"/hooks"), events.TypeTaskStateChanged, addr, "Prefer", "reply")
		if res.Code != http.StatusOK || res.Body.Len() != 0 {
			t.Errorf("address %q: answer %d %q, want 200 with no body", addr, res.Code, res.Body)
		}
	}
	if rec.requests() != 1 {
		t.Errorf("%d posts, want 1", rec.requests())
	}
}
