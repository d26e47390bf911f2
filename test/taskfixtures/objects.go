package taskfixtures

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// A task's objects as the cluster would show them: its anchor, jobs and
// pods, at the tests' "now".

// The task the objects are of.
const (
	TaskName  = "task-1234abcd"
	Namespace = "tesk"
	AnchorUID = types.UID("0b5c2f7e-anchor")
)

// TestAnchor is the task's anchor, as the owner of its objects.
var TestAnchor = taskmeta.Anchor{Name: TaskName, Namespace: Namespace, UID: AnchorUID}

// Now is the tests' "now".
var Now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func Ago(d time.Duration) time.Time { return Now.Add(-d) }

// FullParts is the sequence of a task with inputs, two executors and outputs.
var FullParts = []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01", taskmeta.PartOutputsFiler}

// ProgressOf is a progress record with the given parts started, the last of
// them recorded by event ev at time at.
func ProgressOf(parts []string, ev string, at time.Time, started ...string) taskmeta.Progress {
	p := taskmeta.Progress{Parts: parts, Started: started}
	if len(started) > 0 {
		p.Last = &taskmeta.Batch{Event: ev, At: at, Parts: started[len(started)-1:]}
	}
	return p
}

// AnchorWith is the task's anchor with the given progress and extra
// annotations (key, value pairs).
func AnchorWith(p *taskmeta.Progress, kv ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:              TaskName,
		Namespace:         Namespace,
		UID:               AnchorUID,
		CreationTimestamp: metav1.NewTime(Ago(time.Hour)),
		Labels:            map[string]string{taskmeta.LabelTask: TaskName},
		Annotations:       map[string]string{},
	}
	if p != nil {
		m.Annotations[taskmeta.AnnotationProgress] = p.String()
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Annotations[kv[i]] = kv[i+1]
	}
	return m
}

func Cancelled(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	return m
}

// Cond is a true job condition that began at the given time.
func Cond(t batchv1.JobConditionType, at time.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "Test", Message: string(t), LastTransitionTime: metav1.NewTime(at)}
}

// JobOf is the task's job of a part, owned by the anchor, with conditions.
func JobOf(part string, conds ...batchv1.JobCondition) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.ObjectName(TaskName, part),
			Namespace:       Namespace,
			Labels:          map[string]string{taskmeta.LabelTask: TaskName},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: TaskName, UID: AnchorUID}},
		},
		Status: batchv1.JobStatus{Conditions: conds, StartTime: &metav1.Time{Time: Ago(30 * time.Minute)}},
	}
	return j
}

func Completed(part string) *batchv1.Job {
	j := JobOf(part, Cond(batchv1.JobSuccessCriteriaMet, Ago(20*time.Minute)), Cond(batchv1.JobComplete, Ago(20*time.Minute)))
	j.Status.Succeeded = 1
	return j
}

func Failed(part string) *batchv1.Job {
	j := JobOf(part, Cond(batchv1.JobFailureTarget, Ago(20*time.Minute)), Cond(batchv1.JobFailed, Ago(20*time.Minute)))
	j.Status.Failed = 1
	return j
}

// Running is a running job with its pod: one active.
func Running(part string) *batchv1.Job {
	j := JobOf(part)
	j.Status.Active = 1
	return j
}

// Annotate sets annotations (key, value pairs) on a job.
func Annotate(j *batchv1.Job, kv ...string) *batchv1.Job {
	for i := 0; i+1 < len(kv); i += 2 {
		j.Annotations[kv[i]] = kv[i+1]
	}
	return j
}

func Ignoring(j *batchv1.Job) *batchv1.Job {
	return Annotate(j, taskmeta.AnnotationIgnoreError, "true")
}

func Deleting(j *batchv1.Job) *batchv1.Job {
	ts := metav1.NewTime(Ago(time.Second))
	j.DeletionTimestamp = &ts
	return j
}

// FailedByService is a job the service failed at the given time.
func FailedByService(j *batchv1.Job, at time.Time) *batchv1.Job {
	one := int64(1)
	j.Spec.ActiveDeadlineSeconds = &one
	return Annotate(j, taskmeta.AnnotationFailed, "Pod couldn't start", taskmeta.AnnotationFailedAt, at.Format(time.RFC3339))
}

func JobsOf(js ...*batchv1.Job) map[string]*batchv1.Job {
	m := map[string]*batchv1.Job{}
	for _, j := range js {
		_, part, ok := taskmeta.SplitJobName(j.Name)
		if !ok {
			panic("not a task's job: " + j.Name)
		}
		m[part] = j
	}
	return m
}

// PodOf is a pod of the part's job, created at the given time.
func PodOf(part string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
	job := taskmeta.ObjectName(TaskName, part)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              job + "-x7k2q",
			Namespace:         Namespace,
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{taskmeta.LabelTask: TaskName, batchv1.JobNameLabel: job, "job-name": job},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// Waiting is a pending pod, started at the given time, whose container (or
// init container) waits for the reason.
func Waiting(part string, created, started time.Time, reason string, init bool) *corev1.Pod {
	p := PodOf(part, corev1.PodPending, created)
	if !started.IsZero() {
		p.Status.StartTime = &metav1.Time{Time: started}
	}
	cs := []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details of " + reason}}}}
	if init {
		p.Status.InitContainerStatuses = cs
	} else {
		p.Status.ContainerStatuses = cs
	}
	return p
}

// UnschedulablePod is a pending pod that the scheduler can't place.
func UnschedulablePod(part string, created time.Time) *corev1.Pod {
	p := PodOf(part, corev1.PodPending, created)
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient cpu.",
	}}
	return p
}

func Pods(ps ...*corev1.Pod) []*corev1.Pod {
	if ps == nil {
		return []*corev1.Pod{}
	}
	return ps
}

func Quantity(s string) resource.Quantity { return resource.MustParse(s) }

func TerminatedPod(part string, created, startedAt, finishedAt time.Time, code int32) *corev1.Pod {
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	p := PodOf(part, phase, created)
	p.Name = fmt.Sprintf("%s-%05d", taskmeta.ObjectName(TaskName, part), created.Unix()%100000)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, StartedAt: metav1.NewTime(startedAt), FinishedAt: metav1.NewTime(finishedAt),
	}}}}
	return p
}

func RunningPod(part string, created, startedAt time.Time) *corev1.Pod {
	p := PodOf(part, corev1.PodRunning, created)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(startedAt)}}}}
	return p
}

func RFC3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func ShowLogs(ls []tesv1.ExecutorLog) string {
	s := ""
	for _, l := range ls {
		s += fmt.Sprintf("{%s %s %d out %q err %q} ", l.StartTime, l.EndTime, l.ExitCode, l.Stdout, l.Stderr)
	}
	return s
}

// DisruptedPod is a pod of the part's job that the cluster took away: its
// DisruptionTarget condition set, then failed (its container stopped).
func DisruptedPod(part, suffix string, reason string) *corev1.Pod {
	p := PodOf(part, corev1.PodFailed, Ago(time.Minute))
	p.Name = taskmeta.ObjectName(TaskName, part) + "-" + suffix
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason, Message: "details of " + reason}}
	return p
}
