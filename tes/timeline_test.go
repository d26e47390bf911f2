package tes

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// at is the time sec seconds after a fixed instant, in UTC.
func at(sec int) metav1.Time { return metav1.NewTime(time.Unix(1_000_000+int64(sec), 0).UTC()) }

// iso is at(sec) in RFC 3339, as the answers write it.
func iso(sec int) string { return at(sec).UTC().Format(time.RFC3339Nano) }

// job is the job of a task's part, created at second created.
func job(task, part string, created int) batchv1.Job {
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: taskmeta.ObjectName(task, part), Namespace: "tes",
		CreationTimestamp: at(created), Labels: map[string]string{taskmeta.LabelTask: task}}}
}

// podOf is a pod of job j with one container in state.
func podOf(j batchv1.Job, created int, state corev1.ContainerState) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-abcde", Namespace: "tes", CreationTimestamp: at(created),
		Labels: map[string]string{taskmeta.LabelTask: j.Labels[taskmeta.LabelTask], batchv1.JobNameLabel: j.Name}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: state}}}}
}

// terminated is a container state that ran from start to end with code.
func terminated(start, end int, code int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: at(start), FinishedAt: at(end), ExitCode: code}}
}

// complete is job j, completed at second end.
func complete(j batchv1.Job, end int) batchv1.Job {
	t := at(end)
	j.Status.CompletionTime = &t
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t}}
	return j
}

// kubeEvent is an Event of task-1's anchor at second sec.
func kubeEvent(sec int, reason, msg string) TaskKubeEvent {
	return TaskKubeEvent{Time: iso(sec), Type: corev1.EventTypeNormal, Reason: reason, Message: msg, Object: "ConfigMap/task-1", at: at(sec).Time}
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
	events := []TaskKubeEvent{kubeEvent(1, taskmeta.ReasonStarted, "Task started: pvc, inputs-filer, ex-00, ex-01, outputs-filer")}
	events = append(events, kubeEvent(1, taskmeta.ReasonJobCreated, "Created job task-1-inputs-filer"))
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
	events := []TaskKubeEvent{
		kubeEvent(6, taskmeta.ReasonJobCreated, "Created job task-1-ex-01"),
		kubeEvent(12, taskmeta.ReasonJobDeleted, "Deleted job task-1-ex-01: the task was cancelled"),
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
	ev := kubeEvent(0, taskmeta.ReasonJobCreated, "Created job task-1-ex-00")
	ev.at = ev.at.Add(700 * time.Millisecond)
	ev.Time = ev.at.Format(time.RFC3339Nano)
	got := Timeline(anchor, []batchv1.Job{j}, []corev1.Pod{podOf(j, 0, terminated(0, 3, 3))}, []TaskKubeEvent{ev})
	s := got[0]
	if s.Status != StepFailed || s.ExitCode == nil || *s.ExitCode != 3 || s.Ended != iso(3) || s.Created != ev.Time || s.Started != ev.Time {
		t.Errorf("%+v", s)
	}
}
