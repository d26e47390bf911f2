package tes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// byHeader is an Authenticator for tests: the X-User header is the subject.
type byHeader struct{}

// Authenticate takes the X-User header for the caller; none is refused.
func (byHeader) Authenticate(r *http.Request) (Caller, error) {
	u := r.Header.Get("X-User")
	if u == "" {
		return Caller{}, errors.New("no user")
	}
	return Caller{Subject: u, Label: LabelSafe(u)}, nil
}

// GET /tasks/{id}/events: the task's Events oldest first and its steps, for
// its owner only; 404 for an unknown task.
func TestTaskEventsEndpoint(t *testing.T) {
	client := fake.NewSimpleClientset()
	s := &Server{Client: client, Config: Config{Namespace: "tes", Steps: steps.DefaultConfig()}, Auth: byHeader{}, Log: zap.NewNop().Sugar(),
		Now: func() time.Time { return at(100).Time }}
	hs := httptest.NewServer(s.Echo())
	defer hs.Close()
	ctx := context.Background()
	prog := taskmeta.Progress{Parts: []string{"ex-00"}, Started: []string{"ex-00"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "task-1", Namespace: "tes", CreationTimestamp: at(0),
		Labels:      map[string]string{taskmeta.LabelTask: "task-1", taskmeta.LabelCreator: "alice"},
		Annotations: map[string]string{taskmeta.AnnotationCreator: "alice", taskmeta.AnnotationProgress: prog.String()}}}
	if _, err := client.CoreV1().ConfigMaps("tes").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	j := job("task-1", "ex-00", 1)
	if _, err := client.BatchV1().Jobs("tes").Create(ctx, &j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := podOf(j, 1, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(2)}})
	if _, err := client.CoreV1().Pods("tes").Create(ctx, &p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, e := range []struct {
		reason, note, kind, name string
		sec                      int
	}{
		{"JobCreated", "Created job task-1-ex-00", "ConfigMap", "task-1", 1},
		{"Started", "Task started: ex-00", "ConfigMap", "task-1", 0},
		{"Pulled", "Pulled the image", "Pod", p.Name, 2},
	} {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ev-%d", i), Namespace: "tes", UID: types.UID(fmt.Sprintf("uid-%d", i))},
			InvolvedObject: corev1.ObjectReference{Kind: e.kind, Name: e.name, Namespace: "tes"},
			Reason:         e.reason, Message: e.note, Type: corev1.EventTypeNormal,
			EventTime: metav1.NewMicroTime(at(e.sec).Time), ReportingController: "tesk-knative.ga4gh.org/handler"}
		if _, err := client.CoreV1().Events("tes").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(user, id string) (int, TaskKubeEvents, string) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+BasePath+"/tasks/"+id+"/events", nil)
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		var te TaskKubeEvents
		_ = json.Unmarshal(raw, &te)
		return resp.StatusCode, te, string(raw)
	}
	code, te, raw := get("alice", "task-1")
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, raw)
	}
	var reasons []string
	for _, e := range te.Events {
		reasons = append(reasons, e.Reason+"@"+e.Object)
	}
	if fmt.Sprint(reasons) != "[Started@ConfigMap/task-1 JobCreated@ConfigMap/task-1 Pulled@Pod/task-1-ex-00-abcde]" {
		t.Errorf("events %v", reasons)
	}
	if te.ID != "task-1" || te.State != tesv1.StateRunning || te.ServerTime != iso(100) || len(te.Steps) != 1 ||
		te.Steps[0].Status != StepRunning || te.Steps[0].Created != iso(1) || te.Steps[0].Started != iso(2) {
		t.Errorf("answer %s", raw)
	}
	if !strings.Contains(raw, `"source":"tesk-knative.ga4gh.org/handler"`) {
		t.Errorf("no source: %s", raw)
	}
	if code, _, raw := get("bob", "task-1"); code != http.StatusForbidden {
		t.Errorf("another user: %d %s", code, raw)
	}
	if code, _, raw := get("alice", "task-ffffffff"); code != http.StatusNotFound || !strings.Contains(raw, `"error"`) {
		t.Errorf("unknown task: %d %s", code, raw)
	}
	if code, _, _ := get("", "task-1"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
}

// TestStoryObjectsAreBounded: a task's story reads the Events of its
// anchor, its volume claim and, of its jobs and pods, the maxStoryObjects
// created last, however many it holds.
func TestStoryObjectsAreBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var jobs []batchv1.Job
	var pods []corev1.Pod
	for i := 0; i < 100; i++ {
		at := metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		jobs = append(jobs, batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("task-x-ex-%03d", i), CreationTimestamp: at}})
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("task-x-ex-%03d-pod", i), CreationTimestamp: at}})
	}
	names := storyObjects("task-x", jobs, pods)
	if len(names) != 2+maxStoryObjects || names[0] != "task-x" || names[1] != taskmeta.PVCName("task-x") {
		t.Fatalf("%d names, first %v", len(names), names[:2])
	}
	if !slices.Contains(names, "task-x-ex-099") || !slices.Contains(names, "task-x-ex-099-pod") || slices.Contains(names, "task-x-ex-000") {
		t.Errorf("not the newest: %v", names)
	}
	if got := storyObjects("task-y", jobs[:3], nil); len(got) != 5 {
		t.Errorf("a small task: %v", got)
	}
}

// TestStoryEventsPerObjectAreBounded: each object's Events are one LIST of
// at most maxObjectEvents.
func TestStoryEventsPerObjectAreBounded(t *testing.T) {
	client := fake.NewSimpleClientset()
	var limits []int64
	client.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
		limits = append(limits, a.(k8stesting.ListActionImpl).ListOptions.Limit)
		return false, nil, nil
	})
	if _, err := (Store{Client: client, Namespace: "tes"}).KubeEventsAbout(context.Background(), "task-x"); err != nil {
		t.Fatal(err)
	}
	if len(limits) != 1 || limits[0] != maxObjectEvents {
		t.Errorf("LIST limits %v, want one of %d", limits, maxObjectEvents)
	}
}
