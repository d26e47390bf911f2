package steps

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// EndedUnlabelled are the anchors of tasks that ended without the label of
// their final state (those ended by a version that did not write it), of a
// record format this version reads.
func EndedUnlabelled(anchors []metav1.ObjectMeta) []metav1.ObjectMeta {
	var out []metav1.ObjectMeta
	for _, m := range anchors {
		state := m.Annotations[taskmeta.AnnotationState]
		if state != "" && m.Labels[taskmeta.LabelState] != state && taskmeta.IsAnchor(m) && taskmeta.CheckFormat(m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// SweepPage decides on a page of anchors from the jobs and the pending pods
// of the namespace's tasks, and counts the anchors' tasks by state. It
// returns the tasks to submit (the TES API wrote them and their
// task.submitted event was lost) and those with a step due; and why it
// left out the anchors of a record format it cannot read (neither counted
// nor stepped).
func SweepPage(anchors []metav1.ObjectMeta, jobsOf map[string][]SweptJob, podsOf map[string][]*corev1.Pod, cfg Config, now time.Time, event string, counts *TaskCounts) (unstarted, due []string, skipped []error) {
	for _, meta := range anchors {
		if !taskmeta.IsAnchor(meta) {
			continue // a ConfigMap that is not a task's anchor
		}
		if err := taskmeta.CheckFormat(meta); err != nil {
			skipped = append(skipped, err)
			continue
		}
		t := sweepTask(meta, jobsOf[meta.Name], podsOf[meta.Name], cfg, now, event)
		counts.add(t.state, t.step)
		counts.addUser(meta, t.state)
		switch {
		case t.unstarted:
			unstarted = append(unstarted, meta.Name)
		case t.due:
			due = append(due, meta.Name)
		}
	}
	return unstarted, due, skipped
}

// sweptTask is what a sweep makes of a task: its state, when it took its
// last step, and whether it is to be submitted or has a step due.
type sweptTask struct {
	state          string
	step           time.Time
	unstarted, due bool
}

func sweepTask(meta metav1.ObjectMeta, jobs []SweptJob, pods []*corev1.Pod, cfg Config, now time.Time, event string) sweptTask {
	cancelled := meta.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled
	created := meta.CreationTimestamp.Time
	// A task that waits for its owner's share is started by the shares'
	// settling (settleShares), in fair order; without shares it waits no
	// more.
	waits := cfg.Quota.On() && meta.Labels[taskmeta.LabelWaiting] == "true"
	if AwaitsStart(meta, now) && !cancelled && !waits {
		return sweptTask{state: tesv1.StateQueued, step: created, unstarted: true} // its task.submitted event was lost
	}
	if _, ok := meta.Annotations[taskmeta.AnnotationProgress]; !ok && !cancelled && meta.Annotations[taskmeta.AnnotationState] == "" {
		return sweptTask{state: tesv1.StateQueued, step: created} // not submitted yet: its task.submitted event decides
	}
	obs := Observed{Event: event, Anchor: meta, Jobs: map[string]*batchv1.Job{}, Pods: pods}
	for _, j := range jobs {
		_, part, _ := taskmeta.SplitJobName(j.Name)
		obs.Jobs[part] = j.job()
	}
	if obs.Pods == nil {
		obs.Pods = []*corev1.Pod{}
	}
	plan := Decide(obs, cfg, now)
	t := sweptTask{state: viewState(plan), step: created, due: plan.Progress != nil || len(plan.Actions) > 0 || plan.Final != nil}
	if !tesv1.IsFinal(t.state) {
		if prog, err := taskmeta.ParseProgress(meta.Annotations[taskmeta.AnnotationProgress]); err == nil && prog.Last != nil {
			t.step = prog.Last.At
		}
	}
	return t
}

// SweptJob is what a sweep keeps of a job until it decides on its task: what
// a decision reads (its name, the annotations a decision reads, with the
// uploaded files' list only as present, owners, deletion,
// activeDeadlineSeconds, counts and conditions), in a few hundred bytes
// rather than a whole Job, pod template included.
type SweptJob struct {
	Name, Task                string
	annotations               map[string]string
	owners                    []types.UID
	deletion                  *metav1.Time
	activeDeadline            *int64
	conditions                []batchv1.JobCondition
	active, succeeded, failed int32
}

// Swept is what a sweep keeps of a job.
func Swept(j *batchv1.Job) SweptJob {
	s := SweptJob{
		Name: j.Name, Task: j.Labels[taskmeta.LabelTask], deletion: j.DeletionTimestamp, activeDeadline: j.Spec.ActiveDeadlineSeconds,
		conditions: j.Status.Conditions, active: j.Status.Active, succeeded: j.Status.Succeeded, failed: j.Status.Failed,
	}
	for _, k := range decidedAnnotations {
		if v, ok := j.Annotations[k]; ok {
			if k == taskmeta.AnnotationOutputFileLogs && v != "" {
				v = "(recorded)"
			}
			if s.annotations == nil {
				s.annotations = map[string]string{}
			}
			s.annotations[k] = v
		}
	}
	for _, o := range j.OwnerReferences {
		s.owners = append(s.owners, o.UID)
	}
	return s
}

// job is the job as a decision reads it.
func (s *SweptJob) job() *batchv1.Job {
	owners := make([]metav1.OwnerReference, len(s.owners))
	for i, uid := range s.owners {
		owners[i] = metav1.OwnerReference{UID: uid}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Labels: map[string]string{taskmeta.LabelTask: s.Task}, Annotations: s.annotations,
			OwnerReferences: owners, DeletionTimestamp: s.deletion,
		},
		Spec:   batchv1.JobSpec{ActiveDeadlineSeconds: s.activeDeadline},
		Status: batchv1.JobStatus{Conditions: s.conditions, Active: s.active, Succeeded: s.succeeded, Failed: s.failed},
	}
}

// compactJob is a job as the sweep decides on it.
func compactJob(j *batchv1.Job) *batchv1.Job {
	s := Swept(j)
	return s.job()
}

// decidedAnnotations are the job annotations a decision reads.
var decidedAnnotations = []string{taskmeta.AnnotationIgnoreError, taskmeta.AnnotationFailed, taskmeta.AnnotationFailedAt, taskmeta.AnnotationOutputFileLogs}

// CompactPod keeps of a pod what a decision reads: its name, labels,
// creation, deletion and status.
func CompactPod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: p.Status,
	}
}
