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

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
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
// the tasks that are due, each from a fresh read.
// event is the sweep's event id: a redelivery of it may finish what its first
// attempt started.
func (r *Runner) Sweep(ctx context.Context, ns, event string, md metadata.Interface) (SweepResult, error) {
	res := SweepResult{Namespace: ns, Stepped: []Result{}}
	jobsOf := map[string]map[string]*batchv1.Job{}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = taskLabelExists
		list, err := r.Client.BatchV1().Jobs(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			j := compactJob(&list.Items[i])
			task := j.Labels[taskmeta.LabelTask]
			if t, part, ok := taskmeta.SplitJobName(j.Name); ok && t == task {
				if jobsOf[task] == nil {
					jobsOf[task] = map[string]*batchv1.Job{}
				}
				jobsOf[task][part] = j
			}
		}
		return list.Continue, nil
	})
	if err != nil {
		return res, err
	}
	// Only pending pods can be due (they cannot start, or are not
	// scheduled); a task found due is stepped from a fresh read of all its
	// pods.
	podsOf := map[string][]*corev1.Pod{}
	err = listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
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
	if err != nil {
		return res, err
	}

	now := r.now()
	var due []string
	err = listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = taskLabelExists
		list, err := md.Resource(configMapsResource).Namespace(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			meta := list.Items[i].ObjectMeta
			if meta.Labels[taskmeta.LabelTask] != meta.Name {
				continue // a ConfigMap that is not a task's anchor
			}
			res.Tasks++
			if meta.Annotations[taskmeta.AnnotationState] == "" {
				res.Active++
			}
			if _, ok := meta.Annotations[taskmeta.AnnotationProgress]; !ok && meta.Labels[taskmeta.LabelStatus] != taskmeta.StatusCancelled && meta.Annotations[taskmeta.AnnotationState] == "" {
				continue // not submitted yet: its task.submitted event decides
			}
			obs := Observed{Event: event, Anchor: meta, Jobs: jobsOf[meta.Name], Pods: podsOf[meta.Name]}
			if obs.Jobs == nil {
				obs.Jobs = map[string]*batchv1.Job{}
			}
			if obs.Pods == nil {
				obs.Pods = []*corev1.Pod{}
			}
			if plan := Decide(obs, r.Config, now); plan.Progress != nil || len(plan.Actions) > 0 || plan.Final != nil {
				due = append(due, meta.Name)
			}
		}
		return list.Continue, nil
	})
	if err != nil {
		return res, err
	}

	// Something is due: take the task's step as an event would, from a
	// fresh read, so that a write never rests on the lists' snapshot.
	var errs []error
	for _, task := range due {
		step, err := r.Reconcile(ctx, ns, task, Options{Event: event, Pods: true})
		if err != nil && !errors.Is(err, ErrUnknownTask) {
			res.Failed++
			errs = append(errs, fmt.Errorf("task %s: %w", task, err))
			r.log(ctx).Errorw("Sweep step failed", "task", task, "error", err)
			continue
		}
		res.Stepped = append(res.Stepped, step)
	}
	return res, errors.Join(errs...)
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

// compactJob keeps of a job what a decision reads: its name, labels,
// annotations (the uploaded files' list only as present or not), owners,
// deletion, activeDeadlineSeconds and status; not its pod template.
func compactJob(j *batchv1.Job) *batchv1.Job {
	ann := j.Annotations
	if v := ann[taskmeta.AnnotationOutputFileLogs]; v != "" {
		ann = make(map[string]string, len(j.Annotations))
		for k, v := range j.Annotations {
			ann[k] = v
		}
		ann[taskmeta.AnnotationOutputFileLogs] = "(recorded)"
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: j.Name, Namespace: j.Namespace, UID: j.UID, Labels: j.Labels, Annotations: ann,
			OwnerReferences: j.OwnerReferences, DeletionTimestamp: j.DeletionTimestamp, CreationTimestamp: j.CreationTimestamp,
		},
		Spec:   batchv1.JobSpec{ActiveDeadlineSeconds: j.Spec.ActiveDeadlineSeconds},
		Status: j.Status,
	}
}

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
