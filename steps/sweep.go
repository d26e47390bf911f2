package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// SweepResult says what a sweep did.
type SweepResult struct {
	Namespace string   `json:"namespace"`
	Tasks     int      `json:"tasks"`
	Active    int      `json:"active"`
	Stepped   []Result `json:"stepped"`
	Failed    int      `json:"failed"`
	// Counts are the tasks as the sweep found them; nil when a LIST
	// failed.
	Counts *TaskCounts `json:"counts,omitempty"`
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// taskLabelExists selects every object of every task.
const taskLabelExists = taskmeta.LabelTask

// DefaultPageSize is how many objects one LIST request of a sweep returns
// (Runner.PageSize): the sweep holds one page at a time, whatever the number
// of tasks.
const DefaultPageSize = 500

// Sweep looks at every task of a namespace at once and acts on what is due:
// pods that cannot start or be scheduled in time, jobs failed but not yet
// marked, cancellations and finished jobs whose events were lost, and tasks
// past their TTL (behaviour §7). It lists the jobs, the pending pods and the
// anchors' metadata, a page at a time (the API server serves them from its
// watch cache), keeping of the jobs only what a decision reads; then it steps
// the tasks that are due, each from a fresh read. It counts the tasks by
// state from what it listed (SweepResult.Counts).
// event is the sweep's event id: a redelivery of it may finish what its first
// attempt started.
func (r *Runner) Sweep(ctx context.Context, ns, event string, md metadata.Interface) (SweepResult, error) {
	res := SweepResult{Namespace: ns, Stepped: []Result{}}
	jobsOf, err := r.listSweptJobs(ctx, ns)
	if err != nil {
		return res, err
	}
	podsOf, err := r.listPendingPods(ctx, ns)
	if err != nil {
		return res, err
	}
	// The owners' shares, listed before the anchors (settleShares).
	var shares *shareSweep
	if r.Config.Quota.On() {
		if shares, err = r.listShares(ctx, ns); err != nil {
			return res, err
		}
	}
	found, err := r.sweepAnchors(ctx, ns, event, md, jobsOf, podsOf, shares)
	if err != nil {
		return res, err
	}
	res.Counts = found.counts
	res.Tasks, res.Active = found.counts.Tasks(), found.counts.Active()

	r.labelEnded(ctx, found.unlabelled)
	r.payOwed(ctx, found.owing)

	errs := r.stepDue(ctx, ns, event, found, &res)
	if shares != nil {
		stepped, failed := r.settleShares(ctx, ns, event, shares)
		res.Stepped = append(res.Stepped, stepped...)
		res.Failed += len(failed)
		errs = append(errs, failed...)
	}
	return res, errors.Join(errs...)
}

// listSweptJobs lists the jobs of the namespace's tasks, by task, each kept
// as much as a decision reads (sweptJob).
func (r *Runner) listSweptJobs(ctx context.Context, ns string) (map[string][]sweptJob, error) {
	jobsOf := map[string][]sweptJob{}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = taskLabelExists
		list, err := r.Client.BatchV1().Jobs(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			j := sweep(&list.Items[i])
			if t, _, ok := taskmeta.SplitJobName(j.name); ok && t == j.task {
				jobsOf[j.task] = append(jobsOf[j.task], j)
			}
		}
		return list.Continue, nil
	})
	return jobsOf, err
}

// listPendingPods lists the pending pods of the namespace's tasks, by task.
// Only pending pods can be due (they cannot start, or are not scheduled); a
// task found due is stepped from a fresh read of all its pods.
func (r *Runner) listPendingPods(ctx context.Context, ns string) (map[string][]*corev1.Pod, error) {
	podsOf := map[string][]*corev1.Pod{}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector, o.FieldSelector = taskLabelExists, "status.phase="+string(corev1.PodPending)
		list, err := r.Client.CoreV1().Pods(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			p := compactPod(&list.Items[i])
			t := p.Labels[taskmeta.LabelTask]
			podsOf[t] = append(podsOf[t], p)
		}
		return list.Continue, nil
	})
	return podsOf, err
}

// sweptAnchors is what a sweep found in the anchors: the tasks to submit
// (unstarted) and to step (due), the ended tasks to label with their state
// (unlabelled), those whose owners owe their share (owing), and the counts.
type sweptAnchors struct {
	unstarted, due    []string
	unlabelled, owing []metav1.ObjectMeta
	counts            *TaskCounts
}

// sweepAnchors lists the anchors' metadata a page at a time and decides on
// each task (sweepPage) from it and its jobs and pods; the owners' shares,
// when not nil, see each page.
func (r *Runner) sweepAnchors(ctx context.Context, ns, event string, md metadata.Interface, jobsOf map[string][]sweptJob, podsOf map[string][]*corev1.Pod, shares *shareSweep) (sweptAnchors, error) {
	now := r.now()
	found := sweptAnchors{counts: NewTaskCounts()}
	if r.Config.MetricsUsers > 0 {
		found.counts.Users = map[string]UserCounts{}
	}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = taskLabelExists
		list, err := md.Resource(configMapsResource).Namespace(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		anchors := make([]metav1.ObjectMeta, len(list.Items))
		for i := range list.Items {
			anchors[i] = list.Items[i].ObjectMeta
		}
		u, d, skipped := sweepPage(anchors, jobsOf, podsOf, r.Config, now, event, found.counts)
		found.unstarted, found.due = append(found.unstarted, u...), append(found.due, d...)
		found.unlabelled = append(found.unlabelled, endedUnlabelled(anchors)...)
		found.owing = append(found.owing, owingAnchors(anchors)...)
		if shares != nil {
			shares.see(anchors)
		}
		for _, err := range skipped {
			r.log(ctx).Warnw("Sweep skips a task it cannot read", "error", err)
		}
		return list.Continue, nil
	})
	return found, err
}

// stepDue submits the unstarted tasks and steps the due ones, as an event
// would, each from a fresh read, so that a write never rests on the lists'
// snapshot; it adds each step to res, and counts and returns the failures.
func (r *Runner) stepDue(ctx context.Context, ns, event string, found sweptAnchors, res *SweepResult) []error {
	var errs []error
	for _, task := range found.unstarted {
		// A task the TES API wrote whose task.submitted was lost: submit it.
		step, err := r.Submit(ctx, ns, task, nil, event)
		if err != nil {
			res.Failed++
			errs = append(errs, fmt.Errorf("task %s: %w", task, err))
			r.log(ctx).Errorw("Sweep could not start a task", "task", task, "error", err)
			continue
		}
		res.Stepped = append(res.Stepped, step)
	}
	for _, task := range found.due {
		step, err := r.Reconcile(ctx, ns, task, Options{Event: event, Pods: true})
		if err != nil && !errors.Is(err, ErrUnknownTask) {
			res.Failed++
			errs = append(errs, fmt.Errorf("task %s: %w", task, err))
			r.log(ctx).Errorw("Sweep step failed", "task", task, "error", err)
			continue
		}
		res.Stepped = append(res.Stepped, step)
	}
	return errs
}

// labelBatch bounds how many anchors one sweep labels with their final
// state (labelEnded).
const labelBatch = 1000

// endedUnlabelled are the anchors of tasks that ended without the label of
// their final state (those ended by a version that did not write it), of a
// record format this version reads.
func endedUnlabelled(anchors []metav1.ObjectMeta) []metav1.ObjectMeta {
	var out []metav1.ObjectMeta
	for _, m := range anchors {
		state := m.Annotations[taskmeta.AnnotationState]
		if state != "" && m.Labels[taskmeta.LabelState] != state && taskmeta.IsAnchor(m) && taskmeta.CheckFormat(m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// labelEnded labels anchors with their final state, labelBatch at most, so
// that the TES API's list can select a final state on the API server: a
// patch on the condition that the anchor is as the sweep listed it. A
// failure is a warning: the next sweep tries again.
func (r *Runner) labelEnded(ctx context.Context, anchors []metav1.ObjectMeta) {
	for _, m := range anchors[:min(len(anchors), labelBatch)] {
		_, err := r.patchAnchor(ctx, &corev1.ConfigMap{ObjectMeta: m}, m.ResourceVersion, map[string]any{
			"labels": map[string]string{taskmeta.LabelState: m.Annotations[taskmeta.AnnotationState]},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			r.log(ctx).Warnw("Sweep could not label an ended task with its state", "task", m.Name, "error", err)
		}
	}
}

// sweepPage decides on a page of anchors from the jobs and the pending pods
// of the namespace's tasks, and counts the anchors' tasks by state. It
// returns the tasks to submit (the TES API wrote them and their
// task.submitted event was lost) and those with a step due; and why it
// left out the anchors of a record format it cannot read (neither counted
// nor stepped).
func sweepPage(anchors []metav1.ObjectMeta, jobsOf map[string][]sweptJob, podsOf map[string][]*corev1.Pod, cfg Config, now time.Time, event string, counts *TaskCounts) (unstarted, due []string, skipped []error) {
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

func sweepTask(meta metav1.ObjectMeta, jobs []sweptJob, pods []*corev1.Pod, cfg Config, now time.Time, event string) sweptTask {
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
		_, part, _ := taskmeta.SplitJobName(j.name)
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

// listPages runs a LIST a page at a time, each page retried as any read;
// page returns the continue token of the page it read.
func listPages(ctx context.Context, r *Runner, page func(context.Context, metav1.ListOptions) (string, error)) error {
	cont := ""
	for {
		var next string
		if err := r.call(ctx, func(ctx context.Context) (err error) {
			next, err = page(ctx, metav1.ListOptions{Limit: r.pageSize(), Continue: cont})
			return err
		}); err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		cont = next
	}
}

// sweptJob is what a sweep keeps of a job until it decides on its task: what
// a decision reads (its name, the annotations a decision reads, with the
// uploaded files' list only as present, owners, deletion,
// activeDeadlineSeconds, counts and conditions), in a few hundred bytes
// rather than a whole Job, pod template included.
type sweptJob struct {
	name, task                string
	annotations               map[string]string
	owners                    []types.UID
	deletion                  *metav1.Time
	activeDeadline            *int64
	conditions                []batchv1.JobCondition
	active, succeeded, failed int32
}

func sweep(j *batchv1.Job) sweptJob {
	s := sweptJob{
		name: j.Name, task: j.Labels[taskmeta.LabelTask], deletion: j.DeletionTimestamp, activeDeadline: j.Spec.ActiveDeadlineSeconds,
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
func (s *sweptJob) job() *batchv1.Job {
	owners := make([]metav1.OwnerReference, len(s.owners))
	for i, uid := range s.owners {
		owners[i] = metav1.OwnerReference{UID: uid}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.name, Labels: map[string]string{taskmeta.LabelTask: s.task}, Annotations: s.annotations,
			OwnerReferences: owners, DeletionTimestamp: s.deletion,
		},
		Spec:   batchv1.JobSpec{ActiveDeadlineSeconds: s.activeDeadline},
		Status: batchv1.JobStatus{Conditions: s.conditions, Active: s.active, Succeeded: s.succeeded, Failed: s.failed},
	}
}

// compactJob is a job as the sweep decides on it.
func compactJob(j *batchv1.Job) *batchv1.Job {
	s := sweep(j)
	return s.job()
}

// decidedAnnotations are the job annotations a decision reads.
var decidedAnnotations = []string{taskmeta.AnnotationIgnoreError, taskmeta.AnnotationFailed, taskmeta.AnnotationFailedAt, taskmeta.AnnotationOutputFileLogs}

// compactPod keeps of a pod what a decision reads: its name, labels,
// creation, deletion and status.
func compactPod(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: p.Status,
	}
}

func (r *Runner) pageSize() int64 {
	if r.PageSize > 0 {
		return int64(r.PageSize)
	}
	return DefaultPageSize
}
