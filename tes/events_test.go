package tes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// byHeader is an Authenticator for tests: the X-User header is the subject.
type byHeader struct{}

func (byHeader) Authenticate(r *http.Request) (Caller, error) {
	u := r.Header.Get("X-User")
	if u == "" {
		return Caller{}, errors.New("no user")
	}
	return Caller{Subject: u, Label: LabelSafe(u)}, nil
}

func at(sec int) metav1.Time { return metav1.NewTime(time.Unix(1_000_000+int64(sec), 0).UTC()) }

func iso(sec int) string { return at(sec).UTC().Format(time.RFC3339Nano) }

func job(task, part string, created int) batchv1.Job {
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: taskmeta.ObjectName(task, part), Namespace: "tes",
		CreationTimestamp: at(created), Labels: map[string]string{taskmeta.LabelTask: task}}}
}

func podOf(j batchv1.Job, created int, state corev1.ContainerState) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-abcde", Namespace: "tes", CreationTimestamp: at(created),
		Labels: map[string]string{taskmeta.LabelTask: j.Labels[taskmeta.LabelTask], batchv1.JobNameLabel: j.Name}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: state}}}}
}

func terminated(start, end int, code int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: at(start), FinishedAt: at(end), ExitCode: code}}
}

func complete(j batchv1.Job, end int) batchv1.Job {
	t := at(end)
	j.Status.CompletionTime = &t
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t}}
	return j
}

func taskEvent(sec int, reason, msg string) TaskEvent {
	return TaskEvent{Time: iso(sec), Type: corev1.EventTypeNormal, Reason: reason, Message: msg, Object: "ConfigMap/task-1", at: at(sec).Time}
}

// The timeline of a task that ran its volume, inputs filer, two executors
// and outputs filer: each step's bar from its job's creation (the Event's
// time first), waiting until its container started, to its end; the volume
// from the task's start to its end.
func TestTimelineOfACompleteTask(t *testing.T) {
	const id = "task-1"
	parts := []string{"pvc", "inputs-filer", "ex-00", "ex-01", "outputs-filer"}
	prog := taskmeta.Progress{Parts: parts, Started: parts, Done: parts[1:]}
	anchor := metav1.ObjectMeta{Name: id, Annotations: map[string]string{
		taskmeta.AnnotationProgress: prog.String(), taskmeta.AnnotationEnded: iso(60), taskmeta.AnnotationState: tesv1.StateComplete}}
	var jobs []batchv1.Job
	var pods []corev1.Pod
	for i, part := range parts[1:] {
		j := complete(job(id, part, 10*i+1), 10*i+9)
		jobs = append(jobs, j)
		pods = append(pods, podOf(j, 10*i+1, terminated(10*i+4, 10*i+9, 0)))
	}
	events := []TaskEvent{taskEvent(1, steps.EventStarted, "Task started: pvc, inputs-filer, ex-00, ex-01, outputs-filer")}
	events = append(events, taskEvent(1, steps.EventJobCreate, "Created job task-1-inputs-filer"))
	got := Timeline(anchor, jobs, pods, events)
	if len(got) != 5 {
		t.Fatalf("%d steps, want 5: %+v", len(got), got)
	}
	want := []struct {
		kind, status, created, started, ended string
	}{
		{StepVolume, StepSucceeded, iso(1), iso(1), iso(60)},
		{StepInputs, StepSucceeded, iso(1), iso(4), iso(9)},
		{StepExecutor, StepSucceeded, iso(11), iso(14), iso(19)},
		{StepExecutor, StepSucceeded, iso(21), iso(24), iso(29)},
		{StepOutputs, StepSucceeded, iso(31), iso(34), iso(39)},
	}
	for i, w := range want {
		g := got[i]
		if g.Part != parts[i] || g.Kind != w.kind || g.Status != w.status || g.Created != w.created || g.Started != w.started || g.Ended != w.ended {
			t.Errorf("step %d: %+v, want %+v", i, g, w)
		}
	}
	if got[3].Executor == nil || *got[3].Executor != 1 || got[3].ExitCode == nil || *got[3].ExitCode != 0 || got[3].Name != "task-1-ex-01" {
		t.Errorf("ex-01: %+v", got[3])
	}
}

// A running task: the executor waiting for its container, the ones not yet
// created pending; once the task ended, those never created are skipped
// and a job the service deleted is deleted at its Event's time.
func TestTimelineWaitingPendingDeletedSkipped(t *testing.T) {
	const id = "task-1"
	parts := []string{"ex-00", "ex-01", "ex-02"}
	prog := taskmeta.Progress{Parts: parts, Started: parts[:2], Done: parts[:1]}
	anchor := metav1.ObjectMeta{Name: id, Annotations: map[string]string{taskmeta.AnnotationProgress: prog.String()}}
	j0 := complete(job(id, "ex-00", 0), 5)
	j1 := job(id, "ex-01", 6)
	pods := []corev1.Pod{podOf(j0, 0, terminated(1, 5, 0)), podOf(j1, 6, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}})}
	got := Timeline(anchor, []batchv1.Job{j0, j1}, pods, nil)
	if s := []string{got[0].Status, got[1].Status, got[2].Status}; fmt.Sprint(s) != "[succeeded waiting pending]" {
		t.Errorf("statuses %v", s)
	}
	if got[1].Created != iso(6) || got[1].Started != "" || got[1].Ended != "" || got[2].Created != "" {
		t.Errorf("waiting %+v, pending %+v", got[1], got[2])
	}
	// Running, then cancelled: the job deleted, the task ended.
	pods[1] = podOf(j1, 6, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(8)}})
	if got := Timeline(anchor, []batchv1.Job{j0, j1}, pods, nil); got[1].Status != StepRunning || got[1].Started != iso(8) {
		t.Errorf("running: %+v", got[1])
	}
	prog.Ended = []taskmeta.EndedRecord{{Part: "ex-01", Reason: "the task was cancelled"}}
	anchor.Annotations[taskmeta.AnnotationProgress] = prog.String()
	anchor.Annotations[taskmeta.AnnotationEnded] = iso(20)
	anchor.Annotations[taskmeta.AnnotationState] = tesv1.StateCanceled
	events := []TaskEvent{
		taskEvent(6, steps.EventJobCreate, "Created job task-1-ex-01"),
		taskEvent(12, steps.EventJobDelete, "Deleted job task-1-ex-01: the task was cancelled"),
	}
	got = Timeline(anchor, []batchv1.Job{j0}, pods[:1], events)
	if got[1].Status != StepDeleted || got[1].Created != iso(6) || got[1].Ended != iso(12) || got[1].Reason != "the task was cancelled" {
		t.Errorf("deleted: %+v", got[1])
	}
	if got[2].Status != StepSkipped {
		t.Errorf("never created: %+v", got[2])
	}
}

// A failed executor: its exit code and end; the Event's microseconds do not
// put its start before its creation.
func TestTimelineFailedExecutor(t *testing.T) {
	const id = "task-1"
	prog := taskmeta.Progress{Parts: []string{"ex-00"}, Started: []string{"ex-00"}}
	anchor := metav1.ObjectMeta{Name: id, Annotations: map[string]string{taskmeta.AnnotationProgress: prog.String()}}
	j := job(id, "ex-00", 0)
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: at(9)}}
	ev := taskEvent(0, steps.EventJobCreate, "Created job task-1-ex-00")
	ev.at = ev.at.Add(700 * time.Millisecond)
	ev.Time = ev.at.Format(time.RFC3339Nano)
	got := Timeline(anchor, []batchv1.Job{j}, []corev1.Pod{podOf(j, 0, terminated(0, 3, 3))}, []TaskEvent{ev})
	s := got[0]
	if s.Status != StepFailed || s.ExitCode == nil || *s.ExitCode != 3 || s.Ended != iso(3) || s.Created != ev.Time || s.Started != ev.Time {
		t.Errorf("%+v", s)
	}
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
	get := func(user, id string) (int, TaskEvents, string) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+BasePath+"/tasks/"+id+"/events", nil)
		req.Header.Set("X-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		var te TaskEvents
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
