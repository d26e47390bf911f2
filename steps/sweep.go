package steps

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// SweepResult says what a sweep did.
type SweepResult struct {
	Namespace string   `json:"namespace"`
	Tasks     int      `json:"tasks"`
	Active    int      `json:"active"`
	Stepped   []Result `json:"stepped"`
	Failed    int      `json:"failed"`
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// taskLabelExists selects every object of every task.
const taskLabelExists = LabelTask

// Sweep looks at every task of a namespace at once and acts on what is due:
// pods that cannot start or be scheduled in time, jobs failed but not yet
// marked, cancellations and finished jobs whose events were lost, and tasks
// past their TTL. It costs three LIST calls whatever the number of tasks (the
// anchors' metadata, the jobs, the pending pods), then steps only the tasks
// that are due.
// event is the sweep's event id: a redelivery of it may finish what its first
// attempt started.
func (r *Runner) Sweep(ctx context.Context, ns, event string, md metadata.Interface) (SweepResult, error) {
	res := SweepResult{Namespace: ns, Stepped: []Result{}}
	sel := metav1.ListOptions{LabelSelector: taskLabelExists}
	var anchors *metav1.PartialObjectMetadataList
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		anchors, err = md.Resource(configMapsResource).Namespace(ns).List(ctx, sel)
		return err
	}); err != nil {
		return res, err
	}
	var jobs *batchv1.JobList
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		jobs, err = r.Client.BatchV1().Jobs(ns).List(ctx, sel)
		return err
	}); err != nil {
		return res, err
	}
	// Only pending pods can be due (they cannot start, or are not
	// scheduled); a task found due is stepped from a fresh read of all its
	// pods.
	pending := metav1.ListOptions{LabelSelector: taskLabelExists, FieldSelector: "status.phase=" + string(corev1.PodPending)}
	var pods *corev1.PodList
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		pods, err = r.Client.CoreV1().Pods(ns).List(ctx, pending)
		return err
	}); err != nil {
		return res, err
	}

	jobsOf := map[string][]batchv1.Job{}
	for _, j := range jobs.Items {
		t := j.Labels[LabelTask]
		jobsOf[t] = append(jobsOf[t], j)
	}
	podsOf := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		t := p.Labels[LabelTask]
		podsOf[t] = append(podsOf[t], p)
	}

	now := r.now()
	var errs []error
	for i := range anchors.Items {
		meta := anchors.Items[i].ObjectMeta
		if meta.Labels[LabelTask] != meta.Name {
			continue // a ConfigMap that is not a task's anchor
		}
		res.Tasks++
		if meta.Annotations[AnnotationState] == "" {
			res.Active++
		}
		if AwaitsAPIStart(meta, now) && meta.Labels[LabelStatus] != StatusCancelled {
			// Its task.submitted event was lost: submit it now.
			step, err := r.Submit(ctx, ns, meta.Name, nil, event)
			if err != nil {
				res.Failed++
				errs = append(errs, fmt.Errorf("task %s: %w", meta.Name, err))
				r.log(ctx).Errorw("Sweep could not start a task", "task", meta.Name, "error", err)
				continue
			}
			res.Stepped = append(res.Stepped, step)
			continue
		}
		if _, ok := meta.Annotations[AnnotationProgress]; !ok && meta.Labels[LabelStatus] != StatusCancelled && meta.Annotations[AnnotationState] == "" {
			continue // not submitted yet: its task.submitted event decides
		}
		obs := Observed{
			Event:  event,
			Anchor: meta,
			Jobs:   jobsByPart(meta.Name, jobsOf[meta.Name]),
			Pods:   podsOf[meta.Name],
		}
		if obs.Pods == nil {
			obs.Pods = []*corev1.Pod{}
		}
		plan := Decide(obs, r.Config, now)
		if plan.Progress == nil && len(plan.Actions) == 0 && plan.Final == nil {
			continue
		}
		// Something is due: take the task's step as an event would, from a
		// fresh read, so that a write never rests on the list's snapshot.
		step, err := r.Reconcile(ctx, ns, meta.Name, Options{Event: event, Pods: true})
		if err != nil && !errors.Is(err, ErrUnknownTask) {
			res.Failed++
			errs = append(errs, fmt.Errorf("task %s: %w", meta.Name, err))
			r.log(ctx).Errorw("Sweep step failed", "task", meta.Name, "error", err)
			continue
		}
		res.Stepped = append(res.Stepped, step)
	}
	return res, errors.Join(errs...)
}
