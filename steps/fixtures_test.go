package steps

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// Fixtures shared by the tests of the package: a task as the TESK API passes
// it, its anchor, jobs and pods as the cluster would show them.

const (
	testTask = "task-1234abcd"
	testNS   = "tesk"
	testUID  = types.UID("0b5c2f7e-anchor")
)

var testAnchor = Anchor{Name: testTask, Namespace: testNS, UID: testUID}

// t0 is the tests' "now".
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return t0.Add(-d) }

// The tasks shared with package jobspec's tests (test/taskfixtures).
var (
	executorSpec = taskfixtures.ExecutorSpec
	taskWith     = taskfixtures.TaskWith
	withInput    = taskfixtures.WithInput
	withOutput   = taskfixtures.WithOutput
	withVolume   = taskfixtures.WithVolume
)

// fullParts is the sequence of a task with inputs, two executors and outputs.
var fullParts = []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01", taskmeta.PartOutputsFiler}

// progressOf is a progress record with the given parts started, the last of
// them recorded by event ev at time at.
func progressOf(parts []string, ev string, at time.Time, started ...string) taskmeta.Progress {
	p := taskmeta.Progress{Parts: parts, Started: started}
	if len(started) > 0 {
		p.Last = &taskmeta.Batch{Event: ev, At: at, Parts: started[len(started)-1:]}
	}
	return p
}

// anchorWith is the task's anchor with the given progress and extra
// annotations (key, value pairs).
func anchorWith(p *taskmeta.Progress, kv ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:              testTask,
		Namespace:         testNS,
		UID:               testUID,
		CreationTimestamp: metav1.NewTime(ago(time.Hour)),
		Labels:            map[string]string{taskmeta.LabelTask: testTask},
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

func cancelled(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	return m
}

// cond is a true job condition that began at the given time.
func cond(t batchv1.JobConditionType, at time.Time) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "Test", Message: string(t), LastTransitionTime: metav1.NewTime(at)}
}

// jobOf is the task's job of a part, owned by the anchor, with conditions.
func jobOf(part string, conds ...batchv1.JobCondition) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.ObjectName(testTask, part),
			Namespace:       testNS,
			Labels:          map[string]string{taskmeta.LabelTask: testTask},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: testTask, UID: testUID}},
		},
		Status: batchv1.JobStatus{Conditions: conds, StartTime: &metav1.Time{Time: ago(30 * time.Minute)}},
	}
	return j
}

func completed(part string) *batchv1.Job {
	j := jobOf(part, cond(batchv1.JobSuccessCriteriaMet, ago(20*time.Minute)), cond(batchv1.JobComplete, ago(20*time.Minute)))
	j.Status.Succeeded = 1
	return j
}

func failed(part string) *batchv1.Job {
	j := jobOf(part, cond(batchv1.JobFailureTarget, ago(20*time.Minute)), cond(batchv1.JobFailed, ago(20*time.Minute)))
	j.Status.Failed = 1
	return j
}

func running(part string) *batchv1.Job { return jobOf(part) }

// annotate sets annotations (key, value pairs) on a job.
func annotate(j *batchv1.Job, kv ...string) *batchv1.Job {
	for i := 0; i+1 < len(kv); i += 2 {
		j.Annotations[kv[i]] = kv[i+1]
	}
	return j
}

func ignoring(j *batchv1.Job) *batchv1.Job {
	return annotate(j, taskmeta.AnnotationIgnoreError, "true")
}

func deleting(j *batchv1.Job) *batchv1.Job {
	ts := metav1.NewTime(ago(time.Second))
	j.DeletionTimestamp = &ts
	return j
}

// failedByService is a job the service failed at the given time.
func failedByService(j *batchv1.Job, at time.Time) *batchv1.Job {
	one := int64(1)
	j.Spec.ActiveDeadlineSeconds = &one
	return annotate(j, taskmeta.AnnotationFailed, "Pod couldn't start", taskmeta.AnnotationFailedAt, at.Format(time.RFC3339))
}

func jobsOf(js ...*batchv1.Job) map[string]*batchv1.Job {
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

// podOf is a pod of the part's job, created at the given time.
func podOf(part string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
	job := taskmeta.ObjectName(testTask, part)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              job + "-x7k2q",
			Namespace:         testNS,
			CreationTimestamp: metav1.NewTime(created),
			Labels:            map[string]string{taskmeta.LabelTask: testTask, batchv1.JobNameLabel: job, "job-name": job},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// waiting is a pending pod, started at the given time, whose container (or
// init container) waits for the reason.
func waiting(part string, created, started time.Time, reason string, init bool) *corev1.Pod {
	p := podOf(part, corev1.PodPending, created)
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

// unschedulablePod is a pending pod that the scheduler can't place.
func unschedulablePod(part string, created time.Time) *corev1.Pod {
	p := podOf(part, corev1.PodPending, created)
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient cpu.",
	}}
	return p
}

func pods(ps ...*corev1.Pod) []*corev1.Pod {
	if ps == nil {
		return []*corev1.Pod{}
	}
	return ps
}

func quantity(s string) resource.Quantity { return resource.MustParse(s) }

func ptr[T any](v T) *T { return &v }
