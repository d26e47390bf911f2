package tes

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// sink receives the CloudEvents the API posts.
type sink struct {
	mu     sync.Mutex
	events []cloudevents.Event
	auth   []string // each event's Authorization header
}

func (s *sink) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := cloudevents.NewEventFromHTTPRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.events = append(s.events, *ev)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
}

func (s *sink) got() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.events...)
}

type apiTest struct {
	token  string
	t      *testing.T
	url    string
	client *fake.Clientset
	sink   *sink
	srv    *Server
	root   string // the server's URL, without BasePath
}

var (
	metaListAll = metav1.ListOptions{}
	metaGet     = metav1.GetOptions{}
)

func newAPITest(t *testing.T) *apiTest { return newAPITestWith(t, nil) }

func newAPITestWith(t *testing.T, auth Authenticator) *apiTest {
	t.Helper()
	sk := &sink{}
	hs := httptest.NewServer(sk.handler())
	t.Cleanup(hs.Close)
	ce, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewSimpleClientset()
	cfg := steps.DefaultConfig()
	cfg.Namespace = "tes"
	s := &Server{
		Client: client,
		Events: ce,
		Config: Config{Namespace: "tes", Sink: hs.URL, Steps: cfg,
			Info: tesv1.ServiceInfo{ID: "org.example.tes", Name: "TES", Organization: tesv1.Organization{Name: "Example", URL: "https://example.org"}, Version: "1.0"}},
		Auth: auth,
		Log:  zap.NewNop().Sugar(),
	}
	api := httptest.NewServer(s.Echo())
	t.Cleanup(api.Close)
	return &apiTest{t: t, url: api.URL + BasePath, client: client, sink: sk, srv: s, root: api.URL}
}

func (a *apiTest) do(method, path, body string) (int, map[string]any) {
	a.t.Helper()
	authz := ""
	if a.token != "" {
		authz = "Bearer " + a.token
	}
	code, m, _ := a.withAuthorization(authz, method, path, body)
	return code, m
}

const helloTask = `{"name":"hello","description":"says hello","tags":{"project":"p1"},
 "inputs":[{"path":"/data/in.txt","content":"hello"}],
 "outputs":[{"path":"/data/out.txt","url":"s3://bucket/out.txt"}],
 "executors":[{"image":"alpine","command":["cat","/data/in.txt"],"stdout":"/data/out.txt"}],
 "resources":{"cpu_cores":1,"backend_parameters":{"VmSize":"big"}}}`

func TestCreateWritesTheAnchorAndPostsTheSubmission(t *testing.T) {
	a := newAPITest(t)
	code, body := a.do(http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	id, _ := body["id"].(string)
	if _, ordered := taskmeta.IDTime(id); !ordered || len(body) != 1 {
		t.Fatalf("answer %v: want only an id of taskmeta.NewID", body)
	}
	cm, err := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[taskmeta.LabelTask] != id || cm.Labels[taskmeta.LabelOrderedID] != "true" || cm.Annotations[taskmeta.AnnotationSubmittedBy] != taskmeta.SubmittedByTESAPI ||
		cm.Annotations[taskmeta.AnnotationTaskName] != "hello" || cm.Annotations[taskmeta.AnnotationTags] != `{"project":"p1"}` {
		t.Errorf("anchor metadata %v %v", cm.Labels, cm.Annotations)
	}
	spec, err := taskspec.DecodeGzip(cm.BinaryData[taskspec.ConfigMapKey])
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Executors[0].Spec.Template.Spec.Containers[0].Command; got[0] != "/bin/sh" || got[2] != "cat /data/in.txt > /data/out.txt" {
		t.Errorf("command %q", got)
	}
	stored, ok := StoredTask(cm)
	if !ok || stored.Name != "hello" || stored.Inputs[0].Content != "hello" {
		t.Errorf("stored task %+v", stored)
	}
	if stored.Resources.BackendParameters != nil {
		t.Errorf("an unsupported backend parameter was stored: %v", stored.Resources.BackendParameters)
	}
	evs := a.sink.got()
	if len(evs) != 1 || evs[0].Type() != "task.submitted" {
		t.Fatalf("events %v", evs)
	}
	var data map[string]string
	_ = evs[0].DataAs(&data)
	if data["task"] != id || data["namespace"] != "tes" {
		t.Errorf("event data %v", data)
	}
}

func TestCreateRefusesAndChangesNothing(t *testing.T) {
	a := newAPITest(t)
	code, body := a.do(http.MethodPost, "/tasks", `{"executors":[{"image":"alpine"}]}`)
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), "executors[0].command") {
		t.Fatalf("%d %v", code, body)
	}
	if l, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("a refused task wrote %d ConfigMaps", len(l.Items))
	}
	if len(a.sink.got()) != 0 {
		t.Errorf("a refused task posted events")
	}
}

// file:// URLs need a transfer volume: refused, naming the field, unless
// the operator lists file storage (TES_STORAGE), which service-info shows.
// A task created without disk_gb gets DEFAULT_DISK_GB (the handler's
// setting, which the TES API reads) when it is set, else 0.1 as the TESK
// API; one with its own keeps it.
func TestCreateDefaultDiskSize(t *testing.T) {
	a := newAPITest(t)
	disk := func(task string) float64 {
		t.Helper()
		code, body := a.do(http.MethodPost, "/tasks", task)
		if code != http.StatusOK {
			t.Fatalf("create: %d %v", code, body)
		}
		cm, err := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), body["id"].(string), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := taskspec.DecodeGzip(cm.BinaryData[taskspec.ConfigMapKey])
		if err != nil {
			t.Fatal(err)
		}
		return spec.Resources.DiskGB
	}
	const without = `{"executors":[{"image":"a","command":["x"]}]}`
	if got := disk(without); got != DefaultDiskGB {
		t.Errorf("unset: disk_gb %v, want %v", got, DefaultDiskGB)
	}
	a.srv.Config.Steps.DefaultDiskGB = 4
	if got := disk(without); got != 4 {
		t.Errorf("DEFAULT_DISK_GB 4: disk_gb %v", got)
	}
	if got := disk(`{"executors":[{"image":"a","command":["x"]}],"resources":{"disk_gb":2}}`); got != 2 {
		t.Errorf("the task's own: disk_gb %v, want 2", got)
	}
}

func TestFileURLsNeedFileStorage(t *testing.T) {
	task := `{"executors":[{"image":"a","command":["x"]}],"inputs":[{"path":"/d/a","url":"s3://b/a"}],"outputs":[{"path":"/d/b","url":"FILE:///transfer/b"}]}`
	a := newAPITest(t)
	code, body := a.do(http.MethodPost, "/tasks", task)
	if msg := fmt.Sprint(body["error"]); code != http.StatusBadRequest || !strings.Contains(msg, "outputs[0].url") || !strings.Contains(msg, "s3://") {
		t.Fatalf("without file storage: %d %v", code, body)
	}
	if l, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("a refused task wrote %d ConfigMaps", len(l.Items))
	}
	_, info := a.do(http.MethodGet, "/service-info", "")
	if fmt.Sprint(info["storage"]) != "[http:// https:// ftp:// s3://]" {
		t.Errorf("service-info storage %v", info["storage"])
	}
	a.srv.Config.Info.Storage = []string{"s3://", "file:///transfer"}
	if code, body := a.do(http.MethodPost, "/tasks", task); code != http.StatusOK {
		t.Errorf("with file storage: %d %v", code, body)
	}
	if _, info := a.do(http.MethodGet, "/service-info", ""); fmt.Sprint(info["storage"]) != "[s3:// file:///transfer]" {
		t.Errorf("service-info storage %v", info["storage"])
	}
	// Without TES_STORAGE, a transfer volume (HOST_BASE_PATH) is offered
	// as file:// and its path, which prefixes the URL of a file job store
	// in it (Toil 5.12.0, TESBatchSystem._server_can_mount).
	a.srv.Config.Info.Storage = nil
	a.srv.Config.Steps.HostBasePath = "/transfer"
	if code, body := a.do(http.MethodPost, "/tasks", task); code != http.StatusOK {
		t.Errorf("with a transfer volume: %d %v", code, body)
	}
	_, info = a.do(http.MethodGet, "/service-info", "")
	if fmt.Sprint(info["storage"]) != "[http:// https:// ftp:// s3:// file:///transfer]" {
		t.Errorf("service-info storage %v", info["storage"])
	}
	canMount := false
	for _, base := range info["storage"].([]any) {
		canMount = canMount || strings.HasPrefix("file:///transfer/toil/jobstore", base.(string))
	}
	if !canMount {
		t.Error("no storage entry prefixes the job store's URL")
	}
}

func TestGetViews(t *testing.T) {
	a := newAPITest(t)
	_, body := a.do(http.MethodPost, "/tasks", helloTask)
	id := body["id"].(string)

	code, min := a.do(http.MethodGet, "/tasks/"+id, "")
	if code != http.StatusOK || len(min) != 2 || min["id"] != id || min["state"] != tesv1.StateQueued {
		t.Errorf("MINIMAL: %d %v", code, min)
	}
	_, basic := a.do(http.MethodGet, "/tasks/"+id+"?view=BASIC", "")
	if basic["name"] != "hello" || basic["description"] != "says hello" {
		t.Errorf("BASIC: %v", basic)
	}
	in := basic["inputs"].([]any)[0].(map[string]any)
	if _, ok := in["content"]; ok {
		t.Errorf("BASIC has the input's content: %v", in)
	}
	logs := basic["logs"].([]any)[0].(map[string]any)
	if _, ok := logs["logs"].([]any); !ok {
		t.Errorf("BASIC logs[0].logs is not a list: %v", logs)
	}
	if _, ok := logs["outputs"].([]any); !ok {
		t.Errorf("BASIC logs[0].outputs is not a list: %v", logs)
	}
	_, full := a.do(http.MethodGet, "/tasks/"+id+"?view=FULL", "")
	if full["inputs"].([]any)[0].(map[string]any)["content"] != "hello" {
		t.Errorf("FULL lacks the input's content: %v", full["inputs"])
	}
	for _, path := range []string{"/tasks/task-ffffffff", "/tasks/Not_A_Name"} {
		if code, body := a.do(http.MethodGet, path, ""); code != http.StatusNotFound || body["error"] == nil {
			t.Errorf("GET %s: %d %v", path, code, body)
		}
	}
	if code, _ := a.do(http.MethodGet, "/tasks/"+id+"?view=ALL", ""); code != http.StatusBadRequest {
		t.Errorf("unknown view: %d", code)
	}
}

func TestCancel(t *testing.T) {
	a := newAPITest(t)
	_, body := a.do(http.MethodPost, "/tasks", helloTask)
	id := body["id"].(string)
	if code, body := a.do(http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusOK || len(body) != 0 {
		t.Fatalf("cancel: %d %v", code, body)
	}
	cm, _ := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metav1.GetOptions{})
	if cm.Labels[taskmeta.LabelStatus] != taskmeta.StatusCancelled {
		t.Errorf("labels %v", cm.Labels)
	}
	evs := a.sink.got()
	if len(evs) != 2 || evs[1].Type() != "task.cancelled" {
		t.Errorf("events %v", evs)
	}
	// Ended: 200, nothing changes, no event.
	cm.Annotations[taskmeta.AnnotationState] = tesv1.StateComplete
	delete(cm.Labels, taskmeta.LabelStatus)
	if _, err := a.client.CoreV1().ConfigMaps("tes").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, _ := a.do(http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusOK {
		t.Errorf("cancel of an ended task: %d", code)
	}
	cm, _ = a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metav1.GetOptions{})
	if _, ok := cm.Labels[taskmeta.LabelStatus]; ok || len(a.sink.got()) != 2 {
		t.Errorf("cancelling an ended task changed it: %v, %d events", cm.Labels, len(a.sink.got()))
	}
	if code, _ := a.do(http.MethodPost, "/tasks/task-ffffffff:cancel", ""); code != http.StatusNotFound {
		t.Errorf("cancel of an unknown task: %d", code)
	}
	if code, _ := a.do(http.MethodPost, "/tasks/"+id+":stop", ""); code != http.StatusNotFound {
		t.Errorf("unknown action: %d", code)
	}
}

func TestServiceInfo(t *testing.T) {
	a := newAPITest(t)
	code, info := a.do(http.MethodGet, "/service-info", "")
	typ, _ := info["type"].(map[string]any)
	if code != http.StatusOK || typ["group"] != "org.ga4gh" || typ["artifact"] != "tes" || typ["version"] != "1.1.0" {
		t.Errorf("%d %v", code, info)
	}
	if _, ok := info["tesResources_backend_parameters"].([]any); !ok {
		t.Errorf("tesResources_backend_parameters is not a list: %v", info)
	}
	// storage names what POST accepts in inputs and outputs.
	storage, _ := info["storage"].([]any)
	if len(storage) == 0 {
		t.Fatalf("storage: %v, want the URL schemes the filer speaks", info["storage"])
	}
	for _, s := range storage {
		scheme := strings.TrimSuffix(s.(string), "://")
		if err := checkURL(scheme + "://example.org/x"); err != nil {
			t.Errorf("service-info lists %q but a URL of it is refused: %v", s, err)
		}
	}
}

func TestListQueryErrors(t *testing.T) {
	for q, want := range map[string]string{
		"page_size=0":    "page_size",
		"page_size=x":    "page_size",
		"state=DONE":     "state",
		"page_token=%%%": "page_token",
		"page_token=abc": "page_token",
		// A token of the version that ordered by creation time.
		"page_token=eyJjIjoxNzAwMDAwMDAwLCJuIjoidGFzay0xMjM0YWJjZCJ9": "page_token",
		"view=SOME":   "view",
		"tag_value=a": "tag_value",
	} {
		v, err := url.ParseQuery(q)
		if err != nil {
			v = url.Values{"page_token": {"%%%"}}
		}
		if _, err := ParseListQuery(v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", q, err, want)
		}
	}
	v, _ := url.ParseQuery("page_size=100000")
	if q, err := ParseListQuery(v); err != nil || q.PageSize != MaxPageSize {
		t.Errorf("page_size above the maximum: %v %v", q.PageSize, err)
	}
}

func TestLabelSafe(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"alice", "alice@example.org", "Alice@Example.org", "https://issuer/|123", "@@@", strings.Repeat("x", 80)} {
		l := LabelSafe(s)
		if !labelValueRE.MatchString(l) || len(l) > 63 {
			t.Errorf("%q: %q is not a label value", s, l)
		}
		if o, ok := seen[l]; ok {
			t.Errorf("%q and %q share %q", s, o, l)
		}
		seen[l] = s
	}
	if LabelSafe("alice") != "alice" {
		t.Errorf("a valid label value is not kept")
	}
}

func FuzzParseListQuery(f *testing.F) {
	for _, s := range []string{"", "page_size=10&page_token=" + (pageToken{Continue: "k", After: "task-1"}).String(), "page_token=" + (pageToken{Unordered: true}).String(), "tag_key=a&tag_value=b&tag_key=c", "state=RUNNING&view=FULL", "page_token=%00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseListQuery(v)
		if err != nil {
			if !invalid.Is(err) {
				t.Fatalf("error %T is not a bad request", err)
			}
			return
		}
		if q.PageSize < 1 || q.PageSize > MaxPageSize {
			t.Fatalf("page size %d", q.PageSize)
		}
		if q.Token != nil && *q.Token == (pageToken{}) {
			t.Fatalf("a token without a position")
		}
	})
}

// The task log from the jobs and pods: one executor log per executor whose
// job was created, in order: one that ended and was recorded (its pod gone)
// from the record, one that ended without a record and one that runs from
// their pods (the running one with exit code 0 and no end time). FULL adds
// the recorded streams, or the pod's log's ends; BASIC leaves them out.
func TestTaskLogFromJobsAndPods(t *testing.T) {
	a := newAPITest(t)
	_, body := a.do(http.MethodPost, "/tasks", `{"executors":[{"image":"a","command":["x"]},{"image":"b","command":["y"]},{"image":"c","command":["z"]}]}`)
	id := body["id"].(string)
	ctx := context.Background()
	cm, _ := a.client.CoreV1().ConfigMaps("tes").Get(ctx, id, metaGet)
	prog := taskmeta.Progress{Parts: []string{"ex-00", "ex-01", "ex-02"}, Started: []string{"ex-00", "ex-01", "ex-02"}, Done: []string{"ex-00", "ex-01"}}
	cm.Annotations[taskmeta.AnnotationProgress] = prog.String()
	if _, err := a.client.CoreV1().ConfigMaps("tes").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start, end := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(1060, 0))
	record := `{"start_time":"1970-01-01T00:10:00Z","end_time":"1970-01-01T00:11:00Z","stdout":"out\n","stderr":"err\n","exit_code":2}`
	for i, kind := range []string{"recorded", "ended", "running"} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-ex-%02d", id, i), Namespace: "tes",
			Labels: map[string]string{taskmeta.LabelTask: id}, OwnerReferences: []metav1.OwnerReference{{UID: cm.UID, Kind: "ConfigMap", Name: id}}}}
		job.Status.StartTime = &start
		cs := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}
		switch kind {
		case "recorded":
			job.Annotations = map[string]string{taskmeta.AnnotationExecutorLog: record, taskmeta.AnnotationIgnoreError: "true"}
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
		case "ended":
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			job.Status.Succeeded = 1
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: start, FinishedAt: end}}
		}
		if _, err := a.client.BatchV1().Jobs("tes").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if kind == "recorded" {
			continue // its pod is gone
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-abcde", Namespace: "tes",
			Labels: map[string]string{taskmeta.LabelTask: id, batchv1.JobNameLabel: job.Name}},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "executor"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{cs}}}
		if _, err := a.client.CoreV1().Pods("tes").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	executorLogs := func(task map[string]any) []map[string]any {
		var out []map[string]any
		for _, l := range task["logs"].([]any)[0].(map[string]any)["logs"].([]any) {
			out = append(out, l.(map[string]any))
		}
		return out
	}
	_, basic := a.do(http.MethodGet, "/tasks/"+id+"?view=BASIC", "")
	if basic["state"] != tesv1.StateRunning {
		t.Errorf("state %v", basic["state"])
	}
	logs := executorLogs(basic)
	if len(logs) != 3 {
		t.Fatalf("executor logs %v: want one per executor started", logs)
	}
	want := []map[string]any{
		{"exit_code": 2.0, "start_time": "1970-01-01T00:10:00Z", "end_time": "1970-01-01T00:11:00Z"},
		{"exit_code": 0.0, "start_time": "1970-01-01T00:16:40Z", "end_time": "1970-01-01T00:17:40Z"},
		{"exit_code": 0.0, "start_time": "1970-01-01T00:16:40Z"},
	}
	for i, l := range logs {
		if !reflect.DeepEqual(l, want[i]) {
			t.Errorf("BASIC executor log %d %v, want %v", i, l, want[i])
		}
	}
	_, full := a.do(http.MethodGet, "/tasks/"+id+"?view=FULL", "")
	logs = executorLogs(full)
	// The fake clientset answers every request for a pod's log with "fake
	// logs", as a node that does not serve the streams apart: stdout holds
	// the log, stderr is left out.
	for i, w := range [][2]any{{"out\n", "err\n"}, {"fake logs", nil}, {"fake logs", nil}} {
		if logs[i]["stdout"] != w[0] || logs[i]["stderr"] != w[1] {
			t.Errorf("FULL executor log %d stdout %q stderr %q, want %q %q", i, logs[i]["stdout"], logs[i]["stderr"], w[0], w[1])
		}
	}
}

// withMetadata gives the server a metadata client holding the anchors the
// typed fake holds now (list reads anchors' metadata through it).
func (a *apiTest) withMetadata() {
	a.t.Helper()
	cms, err := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metaListAll)
	if err != nil {
		a.t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		a.t.Fatal(err)
	}
	var objs []runtime.Object
	for _, cm := range cms.Items {
		objs = append(objs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: cm.ObjectMeta})
	}
	a.srv.Metadata = metadatafake.NewSimpleMetadataClient(scheme, objs...)
}

// startExecutor records the task's executor 0 as started, with its job
// running and its pod as given.
func (a *apiTest) startExecutor(id string, pod corev1.PodStatus) {
	a.t.Helper()
	ctx := context.Background()
	cm, err := a.client.CoreV1().ConfigMaps("tes").Get(ctx, id, metaGet)
	if err != nil {
		a.t.Fatal(err)
	}
	prog := taskmeta.Progress{Parts: []string{"ex-00"}, Started: []string{"ex-00"}}
	cm.Annotations[taskmeta.AnnotationProgress] = prog.String()
	if _, err := a.client.CoreV1().ConfigMaps("tes").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: id + "-ex-00", Namespace: "tes",
		Labels: map[string]string{taskmeta.LabelTask: id}, OwnerReferences: []metav1.OwnerReference{{UID: cm.UID, Kind: "ConfigMap", Name: id}}}}
	if _, err := a.client.BatchV1().Jobs("tes").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-abcde", Namespace: "tes", CreationTimestamp: metav1.Now(),
		Labels: map[string]string{taskmeta.LabelTask: id, batchv1.JobNameLabel: job.Name}}, Status: pod}
	if _, err := a.client.CoreV1().Pods("tes").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
}

// ?state= keeps the tasks GET /tasks/{id} gives that state, not those the
// anchor's metadata suggests: a task whose executor's pod cannot be
// scheduled is QUEUED in both, though its executor was started.
func TestListStateFilterAgreesWithGet(t *testing.T) {
	a := newAPITest(t)
	create := func() string {
		code, body := a.do(http.MethodPost, "/tasks", `{"executors":[{"image":"a","command":["x"]}]}`)
		if code != http.StatusOK {
			t.Fatalf("create: %d %v", code, body)
		}
		return body["id"].(string)
	}
	waiting, running, fresh := create(), create(), create()
	a.startExecutor(waiting, corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu.",
	}}})
	a.startExecutor(running, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}})
	a.withMetadata()
	want := map[string][]string{
		tesv1.StateQueued:  {fresh, waiting},
		tesv1.StateRunning: {running},
	}
	for _, id := range []string{waiting, running, fresh} {
		if _, got := a.do(http.MethodGet, "/tasks/"+id, ""); !slices.Contains(want[got["state"].(string)], id) {
			t.Fatalf("GET %s: %v, not the state the test expects", id, got["state"])
		}
	}
	for state, ids := range want {
		for _, view := range []string{"MINIMAL", "BASIC"} {
			code, body := a.do(http.MethodGet, "/tasks?state="+state+"&view="+view, "")
			if code != http.StatusOK {
				t.Fatalf("list %s: %d %v", state, code, body)
			}
			var got []string
			for _, tk := range body["tasks"].([]any) {
				m := tk.(map[string]any)
				if m["state"] != state {
					t.Errorf("?state=%s&view=%s returns %v in state %v", state, view, m["id"], m["state"])
				}
				got = append(got, m["id"].(string))
			}
			slices.Sort(got)
			wantIDs := slices.Sorted(slices.Values(ids))
			if !slices.Equal(got, wantIDs) {
				t.Errorf("?state=%s&view=%s: %v, want %v", state, view, got, wantIDs)
			}
		}
	}
	// Without a filter, each task is listed in the state GET gives it, in
	// every view.
	for _, view := range []string{"MINIMAL", "BASIC"} {
		_, body := a.do(http.MethodGet, "/tasks?view="+view, "")
		for _, tk := range body["tasks"].([]any) {
			m := tk.(map[string]any)
			if !slices.Contains(want[m["state"].(string)], m["id"].(string)) {
				t.Errorf("list view=%s: %v in state %v, not the state GET gives", view, m["id"], m["state"])
			}
		}
	}
	// Paging through a derived state: one task a page, each once.
	seen := map[string]bool{}
	token := ""
	for pages := 0; pages < 5; pages++ {
		_, body := a.do(http.MethodGet, "/tasks?state=QUEUED&page_size=1"+token, "")
		for _, tk := range body["tasks"].([]any) {
			id := tk.(map[string]any)["id"].(string)
			if seen[id] {
				t.Errorf("%s on two pages", id)
			}
			seen[id] = true
		}
		next, _ := body["next_page_token"].(string)
		if next == "" {
			break
		}
		token = "&page_token=" + next
	}
	if len(seen) != 2 || !seen[fresh] || !seen[waiting] {
		t.Errorf("pages of QUEUED: %v, want %s and %s", seen, fresh, waiting)
	}
}

// A page that keeps no task lists none: "tasks" is an empty array, never
// null or missing, in every view and whether or not the state is derived.
func TestEmptyPageListsNoTasks(t *testing.T) {
	a := newAPITest(t)
	if code, body := a.do(http.MethodPost, "/tasks", `{"executors":[{"image":"a","command":["x"]}]}`); code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	a.withMetadata()
	for _, q := range []string{"state=RUNNING", "state=RUNNING&view=BASIC", "state=COMPLETE", "name_prefix=none", "name_prefix=none&view=FULL"} {
		code, body := a.do(http.MethodGet, "/tasks?"+q, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", q, code, body)
		}
		if tasks, ok := body["tasks"].([]any); !ok || len(tasks) != 0 {
			t.Errorf("%s: tasks %#v, want []", q, body["tasks"])
		}
	}
}

// fixedCaller authenticates every request as one caller.
type fixedCaller Caller

func (f fixedCaller) Authenticate(*http.Request) (Caller, error) { return Caller(f), nil }

// With credentials per user (FILER_USER_SECRET_PREFIX) a user's task may
// not name file:// URLs: the transfer volume is one for all users.
// Without a known user, or without the prefix, file storage is offered as
// service-info says.
func TestFileURLsWithCredentialsPerUser(t *testing.T) {
	task := `{"executors":[{"image":"a","command":["x"]}],"inputs":[{"path":"/d/a","url":"file:///transfer/a"}]}`
	a := newAPITestWith(t, fixedCaller{Subject: "alice", Label: "alice"})
	a.srv.Config.Info.Storage = []string{"s3://", "file:///transfer"}
	if code, body := a.do(http.MethodPost, "/tasks", task); code != http.StatusOK {
		t.Fatalf("without per-user credentials: %d %v", code, body)
	}
	a.srv.Config.Steps.UserSecretPrefix = "tesk-user-"
	code, body := a.do(http.MethodPost, "/tasks", task)
	if msg := fmt.Sprint(body["error"]); code != http.StatusBadRequest || !strings.Contains(msg, "inputs[0].url") || !strings.Contains(msg, "FILER_USER_SECRET_PREFIX") {
		t.Fatalf("with per-user credentials: %d %v", code, body)
	}
	if l, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{}); len(l.Items) != 1 {
		t.Errorf("%d ConfigMaps, want the first task's only", len(l.Items))
	}
}
