package runner

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
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
	Counts *steps.TaskCounts `json:"counts,omitempty"`
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
// as much as a decision reads (SweptJob).
func (r *Runner) listSweptJobs(ctx context.Context, ns string) (map[string][]steps.SweptJob, error) {
	jobsOf := map[string][]steps.SweptJob{}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = taskLabelExists
		list, err := r.Client.BatchV1().Jobs(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			j := steps.Swept(&list.Items[i])
			if t, _, ok := taskmeta.SplitJobName(j.Name); ok && t == j.Task {
				jobsOf[j.Task] = append(jobsOf[j.Task], j)
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
			p := steps.CompactPod(&list.Items[i])
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
	counts            *steps.TaskCounts
}

// sweepAnchors lists the anchors' metadata a page at a time and decides on
// each task (SweepPage) from it and its jobs and pods; the owners' shares,
// when not nil, see each page.
func (r *Runner) sweepAnchors(ctx context.Context, ns, event string, md metadata.Interface, jobsOf map[string][]steps.SweptJob, podsOf map[string][]*corev1.Pod, shares *shareSweep) (sweptAnchors, error) {
	now := r.now()
	found := sweptAnchors{counts: steps.NewTaskCounts()}
	if r.Config.MetricsUsers > 0 {
		found.counts.Users = map[string]steps.UserCounts{}
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
		u, d, skipped := steps.SweepPage(anchors, jobsOf, podsOf, r.Config, now, event, found.counts)
		found.unstarted, found.due = append(found.unstarted, u...), append(found.due, d...)
		found.unlabelled = append(found.unlabelled, steps.EndedUnlabelled(anchors)...)
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

func (r *Runner) pageSize() int64 {
	if r.PageSize > 0 {
		return int64(r.PageSize)
	}
	return DefaultPageSize
}
