package eventserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// notifyServer is a handler of namespace tesk whose operator allows the
// addresses under prefix, with the objects objs (the tasks' anchors).
func notifyServer(prefix string, objs ...runtime.Object) *Server {
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tesk"
	cfg.NotifyURLPrefixes = []string{prefix}
	log := zap.NewNop().Sugar()
	return &Server{Runner: &runner.Runner{Client: fake.NewSimpleClientset(objs...), Config: cfg, Log: log}, Namespace: "tesk", Log: log}
}

// anchorOf is the anchor of task in namespace tesk, its tag
// tesk.notify_url naming addr ("": no such tag).
func anchorOf(task, addr string) *corev1.ConfigMap {
	a := taskmeta.NewAnchor("tesk", task, nil, taskmeta.AnchorInfo{})
	tags := map[string]string{"project": "p1"}
	if addr != "" {
		tags[taskmeta.TagNotifyURL] = addr
	}
	b, _ := json.Marshal(tags)
	a.Annotations[taskmeta.AnnotationTags] = string(b)
	return a
}

// postNotify sends a state change event of task-1 in namespace tesk to
// /notify in binary mode, marked as the handler marks it; hdr are more
// headers (a forged address, say).
func postNotify(t *testing.T, s *Server, typ string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return postNotifyOf(t, s, typ, "tesk", "task-1", hdr...)
}

// postNotifyOf is postNotify for a task of a namespace.
func postNotifyOf(t *testing.T, s *Server, typ, ns, task string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	body, _ := json.Marshal(events.StateChangedData{ID: task, Namespace: ns, Owner: "alice", OldState: "QUEUED", NewState: "RUNNING", Time: "2026-01-02T03:04:05Z"})
	req := httptest.NewRequest(http.MethodPost, "/notify", strings.NewReader(string(body)))
	for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": ns + "/" + task + "/RUNNING", "Ce-Source": events.SourceHandler, "Ce-Type": typ, "Ce-Subject": task,
		"Ce-" + events.ExtensionNotify: events.NotifyMarked, "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	s.Echo().ServeHTTP(rec, req)
	return rec
}

// Behaviour §5.8: /notify posts the event to the address the task's
// anchor names, as it came, without the mark, and answers as the address
// did (a failure 502, which the Trigger retries), naming the address by
// its scheme and host only.
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
			s := notifyServer(hs.URL+"/hooks", anchorOf("task-1", hs.URL+"/hooks/task-1?token=s3cret"))
			res := postNotify(t, s, events.TypeTaskStateChanged)
			if res.Code != c.want {
				t.Fatalf("answer %d (%s), want %d", res.Code, res.Body, c.want)
			}
			if rec.requests() != c.requests {
				t.Fatalf("%d posts, want %d", rec.requests(), c.requests)
			}
			got := rec.got[0]
			if got.URL.Path != "/hooks/task-1" || got.URL.RawQuery != "token=s3cret" || got.Header.Get("Ce-Type") != events.TypeTaskStateChanged || got.Header.Get("Ce-Id") != "tesk/task-1/RUNNING" || got.Header.Get("Ce-Subject") != "task-1" {
				t.Errorf("posted to %s with %v", got.URL, got.Header)
			}
			if m := got.Header.Get("Ce-" + events.ExtensionNotify); m != "" {
				t.Errorf("the mark went with the event: %q", m)
			}
			var d events.StateChangedData
			if err := json.Unmarshal([]byte(rec.bodies[0]), &d); err != nil || d.ID != "task-1" || d.NewState != "RUNNING" || d.Owner != "alice" {
				t.Errorf("data %q (%v)", rec.bodies[0], err)
			}
			if c.want != http.StatusOK && (!strings.Contains(res.Body.String(), hs.URL+"/…") || !strings.Contains(res.Body.String(), fmt.Sprint(c.code)) ||
				strings.Contains(res.Body.String(), "hooks") || strings.Contains(res.Body.String(), "s3cret")) {
				t.Errorf("the failure does not name the address by its host only, with its answer %d: %s", c.code, res.Body)
			}
		})
	}
}

// What /notify does not post: to an address the event carries (only the
// anchor's counts), to an address the operator does not allow, an event
// that is not a state change or is of a task of another namespace, a
// redirect; an event of a task without an address, or gone, is taken and
// nothing is posted.
func TestNotifyPostsNowhereElse(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	redirect := httptest.NewServer(http.RedirectHandler(hs.URL+"/elsewhere", http.StatusTemporaryRedirect))
	defer redirect.Close()
	notAnAnchor := anchorOf("task-1", hs.URL+"/hooks/x")
	notAnAnchor.Labels = nil
	forged := []string{"Ce-Notifyurl", hs.URL + "/hooks/forged", "Ce-Url", hs.URL + "/hooks/forged"}
	for _, c := range []struct {
		name, typ, ns, prefix string
		anchor                *corev1.ConfigMap
		hdr                   []string
		want                  int
		says                  string
	}{
		{"an address not allowed", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", anchorOf("task-1", hs.URL+"/admin"), nil, http.StatusBadRequest, "not among"},
		{"an address with a dot segment", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", anchorOf("task-1", hs.URL+"/hooks/../admin"), nil, http.StatusBadRequest, "plain form"},
		{"not a state change", "task.submitted", "tesk", hs.URL + "/hooks", anchorOf("task-1", hs.URL+"/hooks/x"), nil, http.StatusBadRequest, "only org.ga4gh.tes.task.state_changed"},
		{"a task of another namespace", events.TypeTaskStateChanged, "other", hs.URL + "/hooks", anchorOf("task-1", hs.URL+"/hooks/x"), nil, http.StatusBadRequest, "this handler's tasks are in"},
		{"no address", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", anchorOf("task-1", ""), nil, http.StatusOK, "no address"},
		{"no address, one forged on the event", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", anchorOf("task-1", ""), forged, http.StatusOK, "no address"},
		{"an address not allowed, an allowed one forged on the event", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", anchorOf("task-1", hs.URL+"/admin"), forged, http.StatusBadRequest, "not among"},
		{"the task is gone", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", nil, forged, http.StatusOK, "no such task"},
		{"a ConfigMap that is not an anchor", events.TypeTaskStateChanged, "tesk", hs.URL + "/hooks", notAnAnchor, nil, http.StatusOK, "no such task"},
		{"a redirect", events.TypeTaskStateChanged, "tesk", redirect.URL + "/hooks", anchorOf("task-1", redirect.URL+"/hooks/x"), nil, http.StatusBadGateway, "307"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var objs []runtime.Object
			if c.anchor != nil {
				objs = append(objs, c.anchor)
			}
			res := postNotifyOf(t, notifyServer(c.prefix, objs...), c.typ, c.ns, "task-1", c.hdr...)
			if res.Code != c.want || !strings.Contains(res.Body.String(), c.says) {
				t.Errorf("answer %d %s, want %d saying %q", res.Code, res.Body, c.want, c.says)
			}
			if strings.Contains(res.Body.String(), "/admin") || strings.Contains(res.Body.String(), "/hooks/") {
				t.Errorf("the answer names the address beyond its host: %s", res.Body)
			}
		})
	}
	if rec.requests() != 0 {
		t.Errorf("%d posts to the server, want none", rec.requests())
	}
}

// When the anchor cannot be read, /notify answers as the steps do (503 for
// what may pass, which the Trigger retries; 500 for a refusal) and posts
// nothing.
func TestNotifyWhenTheAnchorCannotBeRead(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"the API server is unavailable", apierrors.NewServiceUnavailable("etcd is down"), http.StatusServiceUnavailable},
		{"the handler may not read it", apierrors.NewForbidden(gr, "task-1", errors.New("no role")), http.StatusInternalServerError},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := notifyServer(hs.URL+"/hooks", anchorOf("task-1", hs.URL+"/hooks/task-1"))
			s.Runner.Client.(*fake.Clientset).PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, c.err
			})
			if res := postNotify(t, s, events.TypeTaskStateChanged); res.Code != c.want || !strings.Contains(res.Body.String(), "reading task task-1's address") {
				t.Errorf("answer %d %s, want %d saying the address could not be read", res.Code, res.Body, c.want)
			}
		})
	}
	if rec.requests() != 0 {
		t.Errorf("%d posts, want none", rec.requests())
	}
}

// No line /notify logs, and no answer it gives, names more of a task's
// address than its scheme, host and port: its path and query may hold a
// token, and the Trigger's dead letter sink logs the answer.
func TestNotifyLogsTheAddressRedacted(t *testing.T) {
	rec := &sinkRecorder{codes: []int{http.StatusServiceUnavailable, http.StatusAccepted}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	closed := httptest.NewServer(rec)
	closed.Close()
	core, logs := observer.New(zap.DebugLevel)
	for _, c := range []struct {
		prefix, addr string
		want         int
	}{
		{hs.URL + "/hooks", hs.URL + "/hooks/SECRET?token=SECRET", http.StatusBadGateway},                      // the address answers 503
		{hs.URL + "/hooks", hs.URL + "/hooks/SECRET?token=SECRET", http.StatusOK},                              // then takes it
		{closed.URL + "/hooks", closed.URL + "/hooks/SECRET?token=SECRET", http.StatusBadGateway},              // no answer
		{hs.URL + "/hooks", hs.URL + "/SECRET?token=SECRET", http.StatusBadRequest},                            // not allowed
		{hs.URL + "/hooks", strings.Replace(hs.URL, "//", "//SECRET@", 1) + "/hooks/x", http.StatusBadRequest}, // a user
	} {
		s := notifyServer(c.prefix, anchorOf("task-1", c.addr))
		s.Log = zap.New(core).Sugar()
		res := postNotify(t, s, events.TypeTaskStateChanged)
		if res.Code != c.want || strings.Contains(res.Body.String(), "SECRET") {
			t.Errorf("%s: answer %d %s, want %d without the address's path, query or user", c.addr, res.Code, res.Body, c.want)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing logged")
	}
	for _, e := range logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		if strings.Contains(line, "SECRET") {
			t.Errorf("a log line names the address beyond its host: %s", line)
		}
		if u, ok := e.ContextMap()["url"]; ok && !strings.HasSuffix(fmt.Sprint(u), "/…") {
			t.Errorf("a log line names the address as %q, want its scheme and host only", u)
		}
	}
}

// Without NOTIFY_URL_PREFIXES there is no /notify.
func TestNoNotifyWithoutPrefixes(t *testing.T) {
	if res := postNotify(t, newTestServer(), events.TypeTaskStateChanged); res.Code != http.StatusNotFound && res.Code != http.StatusMethodNotAllowed {
		t.Errorf("answer %d %s, want no such route", res.Code, res.Body)
	}
}

// The event of a change of a task whose tag names an allowed address is
// marked, one not allowed is not (the TES API refuses such a task, but an
// anchor may be written by other means); the address itself never goes
// with the event, which every subscriber of the Broker gets.
func TestStateEventMarksTheAllowedAddress(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"https://hooks.example.org/tes/task-1?token=SECRET", events.NotifyMarked},
		{"https://elsewhere.example.org/task-1?token=SECRET", ""},
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
		if got := rec.got[0].Header.Get("Ce-" + events.ExtensionNotify); got != c.want {
			t.Errorf("tag %q: the event is marked %q, want %q", c.addr, got, c.want)
		}
		if sent := fmt.Sprint(rec.got[0].Header, rec.bodies[0]); strings.Contains(sent, "task-1?") || strings.Contains(sent, "SECRET") {
			t.Errorf("tag %q: the event names the address: %s", c.addr, sent)
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
		res := postNotify(t, notifyServer(hs.URL+"/hooks", anchorOf("task-1", addr)), events.TypeTaskStateChanged, "Prefer", "reply")
		if res.Code != http.StatusOK || res.Body.Len() != 0 {
			t.Errorf("address %q: answer %d %q, want 200 with no body", addr, res.Code, res.Body)
		}
	}
	if rec.requests() != 1 {
		t.Errorf("%d posts, want 1", rec.requests())
	}
}
