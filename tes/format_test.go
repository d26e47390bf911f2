package tes

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/fixture"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

const format1Task = "task-0f1e2d3c"

// loadFormat1 puts testdata/anchor-format-1.yaml (a task's anchor and jobs
// as the record format 1 writes them, frozen) into the API's namespace,
// with the anchor changed by edit.
func (a *apiTest) loadFormat1(edit func(*corev1.ConfigMap)) {
	a.t.Helper()
	a.load("../testdata/anchor-format-1.yaml", edit)
	// The second executor's pod, which Kubernetes writes: its container
	// started at 10:00:45.
	job := format1Task + "-ex-01"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job + "-x7k2q", Namespace: "tes", Labels: map[string]string{taskmeta.LabelTask: format1Task, "batch.kubernetes.io/job-name": job}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: job,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 45, 0, time.UTC))}}}}},
	}
	if err := a.client.Tracker().Add(pod); err != nil {
		a.t.Fatal(err)
	}
}

// load puts a fixture's objects (internal/fixture) into the API's
// namespace, each anchor changed by edit, and gives the server a metadata
// client holding them.
func (a *apiTest) load(path string, edit func(*corev1.ConfigMap)) {
	a.t.Helper()
	objs, err := fixture.Objects(path, "tes")
	if err != nil {
		a.t.Fatal(err)
	}
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			edit(cm)
		}
		if err := a.client.Tracker().Add(o); err != nil {
			a.t.Fatal(err)
		}
	}
	a.withMetadata()
}

// A task the record format 1 wrote (without the format annotation) is
// served as it was: GET in each view and the list. A change that cannot
// read it fails here.
func TestServesRecordFormat1(t *testing.T) {
	a := newAPITest(t)
	a.loadFormat1(func(*corev1.ConfigMap) {})
	code, min := a.do(http.MethodGet, "/tasks/"+format1Task, "")
	if code != http.StatusOK || min["id"] != format1Task || min["state"] != tesv1.StateRunning {
		t.Fatalf("GET MINIMAL: %d %v, want RUNNING", code, min)
	}
	code, basic := a.do(http.MethodGet, "/tasks/"+format1Task+"?view=BASIC", "")
	if code != http.StatusOK || basic["name"] != "two steps" || basic["state"] != tesv1.StateRunning {
		t.Fatalf("GET BASIC: %d %v", code, basic)
	}
	if ex, _ := basic["executors"].([]any); len(ex) != 2 {
		t.Errorf("BASIC executors %v, want the two submitted", basic["executors"])
	}
	if in, _ := basic["inputs"].([]any); len(in) != 1 || in[0].(map[string]any)["path"] != "/data/in.txt" {
		t.Errorf("BASIC inputs %v", basic["inputs"])
	}
	logs := basic["logs"].([]any)[0].(map[string]any)["logs"].([]any)
	if len(logs) != 2 {
		t.Fatalf("executor logs %v, want two", logs)
	}
	if first := logs[0].(map[string]any); first["exit_code"] != float64(0) || first["end_time"] != "2026-01-05T10:00:40Z" {
		t.Errorf("first executor's log %v, want exit 0 ended 10:00:40", first)
	}
	code, list := a.do(http.MethodGet, "/tasks", "")
	tasks, _ := list["tasks"].([]any)
	if code != http.StatusOK || len(tasks) != 1 || tasks[0].(map[string]any)["id"] != format1Task || tasks[0].(map[string]any)["state"] != tesv1.StateRunning {
		t.Errorf("list: %d %v, want the task RUNNING", code, list)
	}
}

// A task of a record format newer than this version reads is not served:
// GET, its events and cancel answer 501 naming the format, the list leaves it out, and
// nothing is written.
func TestNewerRecordFormatIsNotServed(t *testing.T) {
	a := newAPITest(t)
	a.loadFormat1(func(cm *corev1.ConfigMap) { cm.Annotations[taskmeta.AnnotationFormat] = "2" })
	writes := len(a.client.Actions())
	for _, req := range [][2]string{{http.MethodGet, "/tasks/" + format1Task}, {http.MethodGet, "/tasks/" + format1Task + "?view=FULL"}, {http.MethodGet, "/tasks/" + format1Task + "/events"}, {http.MethodPost, "/tasks/" + format1Task + ":cancel"}} {
		code, body := a.do(req[0], req[1], "")
		if msg, _ := body["error"].(string); code != http.StatusNotImplemented || !strings.Contains(msg, "format 2") {
			t.Errorf("%s %s: %d %v, want 501 naming format 2", req[0], req[1], code, body)
		}
	}
	code, list := a.do(http.MethodGet, "/tasks", "")
	if tasks, _ := list["tasks"].([]any); code != http.StatusOK || len(tasks) != 0 {
		t.Errorf("list: %d %v, want no task", code, list)
	}
	for _, act := range a.client.Actions()[writes:] {
		if v := act.GetVerb(); v != "get" && v != "list" {
			t.Errorf("wrote: %s %s", v, act.GetResource().Resource)
		}
	}
	if n := len(a.sink.got()); n != 0 {
		t.Errorf("%d events posted", n)
	}
}

// The TES API writes its anchors in the current record format.
func TestCreateWritesTheRecordFormat(t *testing.T) {
	a := newAPITest(t)
	code, body := a.do(http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	cm, err := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), body["id"].(string), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := taskmeta.FormatOf(cm.ObjectMeta); err != nil || f != taskmeta.Format || cm.Annotations[taskmeta.AnnotationFormat] != "1" {
		t.Errorf("anchor format %q (%d, %v), want 1", cm.Annotations[taskmeta.AnnotationFormat], f, err)
	}
}
