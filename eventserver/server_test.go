package eventserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func newTestServer() *Server {
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tesk"
	cfg.TrustEvents = true // the tests send the task JSON in the events
	log := zap.NewNop().Sugar()
	return &Server{
		Runner:    &runner.Runner{Client: fake.NewSimpleClientset(), Config: cfg, Log: log},
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

// Only a submission starts a task: another event of a task whose ConfigMap
// the TESK API wrote, but whose submission has not come, creates nothing
// (the ConfigMap is not the service's task until it is submitted).
func TestOnlySubmissionStartsATask(t *testing.T) {
	s := newTestServer()
	client := s.Runner.Client
	raw := `{"executors":[{"metadata":{"name":"task-2-ex-00"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"ubuntu"}]}}}}]}`
	_, err := client.CoreV1().ConfigMaps("tesk").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "task-2"},
		BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip([]byte(raw))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := post(t, s, "job.finished", `{"task":"task-2","job":"task-2-ex-00"}`, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ignored":"unknown task task-2"`) {
		t.Errorf("job.finished of an unsubmitted task: %d %s, want 200 ignored", rec.Code, rec.Body.String())
	}
	if jobs, _ := client.BatchV1().Jobs("tesk").List(context.Background(), metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("an event other than the submission created %d jobs", len(jobs.Items))
	}
	rec = post(t, s, "task.submitted", `{"task":"task-2"}`, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "create-job") {
		t.Errorf("task.submitted: %d %s, want the first job created", rec.Code, rec.Body.String())
	}
}

// The handler's view, served to whoever reaches the handler, shows no
// URL's query string or user info: an output's URL may be presigned.
func TestViewRedactsURLs(t *testing.T) {
	s := newTestServer()
	withOutputs := `{"task":"task-1","input":{"outputs":[{"url":"s3://b/out.txt","path":"/data/out.txt"}],` +
		`"executors":[{"metadata":{"name":"task-1-ex-00"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"ubuntu"}]}}}}]}}`
	if rec := post(t, s, "task.submitted", withOutputs, nil); rec.Code != http.StatusOK {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	secret := "X-Amz-Signature=0123456789abcdef"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: "task-1-outputs-filer", Namespace: "tesk", Labels: map[string]string{taskmeta.LabelTask: "task-1"},
		Annotations: map[string]string{taskmeta.AnnotationOutputFileLogs: `[{"url":"https://user:pw@bucket.example.org/out.txt?` + secret + `","path":"/data/out.txt","size_bytes":"3"}]`},
	}}
	if _, err := s.Runner.Client.BatchV1().Jobs("tesk").Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Echo().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/tasks/tesk/task-1", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, `"url":"https://bucket.example.org/out.txt"`) {
		t.Fatalf("view: %d %s, want the output's URL without its query", rec.Code, body)
	}
	if strings.Contains(body, secret) || strings.Contains(body, "pw@") {
		t.Errorf("the view shows a credential: %s", body)
	}
}

// The deployed handler (TRUST_EVENTS off) serves no view of a task: it
// would answer whoever reaches the handler.
func TestNoViewWithoutTrustEvents(t *testing.T) {
	s := newTestServer()
	if rec := post(t, s, "task.submitted", submitted, nil); rec.Code != http.StatusOK {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	for trust, want := range map[bool]int{true: http.StatusOK, false: http.StatusNotFound} {
		s.Runner.Config.TrustEvents = trust
		rec := httptest.NewRecorder()
		s.Echo().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/tasks/tesk/task-1", nil))
		if rec.Code != want {
			t.Errorf("TRUST_EVENTS %v: view %d %s, want %d", trust, rec.Code, rec.Body, want)
		}
	}
}
