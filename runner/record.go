package runner

import (
	"context"
	"encoding/json"
	"errors"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// What a step records on a part's job once the part ended, so that it
// outlives the job's pods: the files the outputs filer uploaded, and an
// executor's exit code, times and log.

// recordOutputFileLogs stores the uploaded files on the outputs filer's job
// (behaviour §1.7). Any error is a warning: the task completes without the
// annotation.
func (st *step) recordOutputFileLogs(ctx context.Context, job string) {
	r, ns := st.r, st.a.Namespace
	warn := func(msg string, err error) {
		r.log(ctx).Warnw(msg+"; the task completes without the output file logs", "task", st.a.Name, "job", job, "error", err)
	}
	spec := st.spec
	if spec == nil {
		var err error
		if spec, err = st.r.anchorSpec(st.anchor); err != nil {
			warn("Reading the task failed", err)
			return
		}
	}
	pods, err := st.listPodsOfJob(ctx, job)
	if err != nil {
		warn("Listing the outputs filer's pods failed", err)
		return
	}
	var pod *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded && (pod == nil || p.CreationTimestamp.After(pod.CreationTimestamp.Time)) {
			pod = p
		}
	}
	if pod == nil {
		warn("The outputs filer has no succeeded pod", errors.New("no pod"))
		return
	}
	tail := int64(steps.OutputLogTailLines)
	var log []byte
	err = r.call(ctx, func(ctx context.Context) (err error) {
		log, err = r.Client.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		return err
	})
	if err != nil {
		warn("Reading the outputs filer's log failed", err)
		return
	}
	value, notes, err := steps.OutputFileLogs(spec, string(log))
	r.logNotes(ctx, st.a.Name, notes)
	if err != nil {
		warn("The outputs filer's log has no valid file list", err)
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{taskmeta.AnnotationOutputFileLogs: value}}})
	err = r.call(ctx, func(ctx context.Context) error {
		_, err := r.Client.BatchV1().Jobs(ns).Patch(ctx, job, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		warn("Annotating the outputs filer's job failed", err)
	}
}

// recordExecutorLog copies an ended executor's log onto its job: the exit
// code and times of its last pod's container, and the ends of its stdout
// and stderr (at most Config.LogTailBytes each, the record at most
// MaxRecordedLogBytes). Any error is a warning: the view reads the pod for
// as long as it exists.
func (st *step) recordExecutorLog(ctx context.Context, part string) {
	r, ns := st.r, st.a.Namespace
	job := taskmeta.ObjectName(st.a.Name, part)
	warn := func(msg string, err error) {
		r.log(ctx).Warnw(msg+"; the executor's log is read from its pod while the pod exists", "task", st.a.Name, "job", job, "error", err)
	}
	pods, err := st.listPodsOfJob(ctx, job)
	if err != nil {
		warn("Listing the executor's pods failed", err)
		return
	}
	j := st.jobs[part]
	if j == nil {
		return
	}
	ptrs := podPointers(pods.Items)
	rec := steps.ObservedLog(j, ptrs)
	if pod := steps.LastPod(ptrs, job); pod != nil && len(pod.Spec.Containers) > 0 {
		limit := min(r.Config.LogTailLimit(), steps.MaxRecordedLogBytes/2)
		stdout, stderr, _, err := ExecutorLog(ctx, r.Client, ns, pod.Name, pod.Spec.Containers[0].Name, limit)
		if err != nil {
			r.log(ctx).Warnw("Reading the executor's log failed; its exit code and times are recorded without it", "task", st.a.Name, "job", job, "error", err)
		}
		rec.Stdout, rec.Stderr = stdout, stderr
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		taskmeta.AnnotationExecutorLog: steps.EncodeRecord(rec, steps.MaxRecordedLogBytes),
	}}})
	if err := r.call(ctx, func(ctx context.Context) error {
		_, err := r.Client.BatchV1().Jobs(ns).Patch(ctx, job, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}); err != nil {
		warn("Recording the executor's log on its job failed", err)
		return
	}
	r.log(ctx).Debugw("Executor log recorded", "task", st.a.Name, "job", job, "log", steps.DescribeLog(rec))
}

// listPodsOfJob lists from the API server the pods the Job controller created
// for a job.
func (st *step) listPodsOfJob(ctx context.Context, job string) (*corev1.PodList, error) {
	var pods *corev1.PodList
	err := st.r.call(ctx, func(ctx context.Context) (err error) {
		pods, err = st.r.Client.CoreV1().Pods(st.a.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: labels.Set{batchv1.JobNameLabel: job}.String(),
		})
		return err
	})
	return pods, err
}
