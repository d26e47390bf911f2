package runner

import (
	"context"
	"errors"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// View reads a task and returns its TES view.
func (r *Runner) View(ctx context.Context, ns, task string) (tesv1.Task, error) {
	anchor, err := r.getAnchor(ctx, ns, task)
	if err != nil {
		return tesv1.Task{}, err
	}
	if err := r.checkAnchor(ctx, anchor, false); err != nil {
		return tesv1.Task{}, err
	}
	jobs, pods, err := ListJobsAndPods(ctx, r.Client, ns, taskSelector(task), r.backoff())
	if err != nil {
		return tesv1.Task{}, err
	}
	return steps.BuildView(anchor.ObjectMeta, jobsByPart(task, jobs), podPointers(pods), r.Config, r.now()), nil
}

// ListJobsAndPods lists the jobs and the pods of a label selector in a
// namespace, both at once, each LIST tried again with backoff b while its
// error is transient (kubeapi.CallWith). The error joins those of the LISTs
// that failed. The handler's view and the TES API read a task's objects
// with it.
func ListJobsAndPods(ctx context.Context, client kubernetes.Interface, ns, selector string, b wait.Backoff) ([]batchv1.Job, []corev1.Pod, error) {
	sel := metav1.ListOptions{LabelSelector: selector}
	var jobs *batchv1.JobList
	var pods *corev1.PodList
	var jerr, perr error
	var wg sync.WaitGroup
	wg.Go(func() {
		jerr = kubeapi.CallWith(ctx, b, func(ctx context.Context) (err error) {
			jobs, err = client.BatchV1().Jobs(ns).List(ctx, sel)
			return err
		})
	})
	wg.Go(func() {
		perr = kubeapi.CallWith(ctx, b, func(ctx context.Context) (err error) {
			pods, err = client.CoreV1().Pods(ns).List(ctx, sel)
			return err
		})
	})
	wg.Wait()
	if err := errors.Join(jerr, perr); err != nil {
		return nil, nil, err
	}
	return jobs.Items, pods.Items, nil
}
