package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// The actions on a part's job once it runs: failing it, deleting it, and
// counting the pods the cluster took from it.

// failJob sets the job's activeDeadlineSeconds to 1, so that Kubernetes stops
// its pods and marks it Failed (behaviour §1.12). Only a rejection falls back
// to deleting it; after any other error nothing is deleted and the step is
// tried again (behaviour §8.2).
func (st *step) failJob(ctx context.Context, act steps.Action) (stepOutcome, error) {
	name := taskmeta.ObjectName(st.a.Name, act.Part)
	err := st.patchFailed(ctx, name, act.Reason, act.State)
	switch kubeapi.Classify(err) {
	case kubeapi.Done:
		st.r.log(ctx).Infow("Failed job (activeDeadlineSeconds: 1)", "task", st.a.Name, "job", name, "reason", act.Reason)
		st.r.kubeEvent(st.anchor, true, taskmeta.ReasonJobFailed, "%s", taskmeta.JobFailedNote(name, act.Reason))
		return finished, nil
	case kubeapi.Missing:
		return again, nil
	case kubeapi.Rejected:
		reason := fmt.Sprintf("%s; failing job '%s' was rejected (%v), so it is deleted instead", act.Reason, name, err)
		st.r.log(ctx).Warnw("Failing a job was rejected; deleting it", "task", st.a.Name, "job", name, "error", err)
		return st.endPart(ctx, act.Part, reason, true)
	}
	return finished, err
}

func (st *step) patchFailed(ctx context.Context, name, reason, state string) error {
	ann := map[string]string{taskmeta.AnnotationFailed: reason, taskmeta.AnnotationFailedAt: st.r.now().UTC().Format(time.RFC3339)}
	if state != "" {
		ann[taskmeta.AnnotationFailedState] = state
	}
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": ann},
		"spec":     map[string]any{"activeDeadlineSeconds": 1},
	})
	return st.r.call(ctx, func(ctx context.Context) error {
		_, err := st.r.Client.BatchV1().Jobs(st.a.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// deleteJob deletes a part's job (foreground: it is gone once its pods are).
// A job that is already gone counts as deleted. A rejected delete (a role
// without delete on jobs, an admission policy) fails the job instead, so that
// its pods stop, and records it as kept, so that no step tries to delete it
// again; the task stops all the same (behaviour §8.3, §8.4). Other errors are
// tried again.
func (st *step) deleteJob(ctx context.Context, part, why string) (stepOutcome, error) {
	name := taskmeta.ObjectName(st.a.Name, part)
	fg := metav1.DeletePropagationForeground
	err := st.r.call(ctx, func(ctx context.Context) error {
		return st.r.Client.BatchV1().Jobs(st.a.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	})
	switch kubeapi.Classify(err) {
	case kubeapi.Done, kubeapi.Missing:
		st.r.log(ctx).Infow("Deleted job", "task", st.a.Name, "job", name, "reason", why)
		st.r.kubeEvent(st.anchor, true, taskmeta.ReasonJobDeleted, "%s", taskmeta.JobDeletedNote(name, why))
		return finished, nil
	case kubeapi.Retry:
		return finished, err
	}
	st.r.log(ctx).Errorw("Deleting a job was rejected; failing it and keeping it instead", "task", st.a.Name, "job", name, "error", err)
	kept := fmt.Sprintf("Deleting job '%s' was rejected (%v); it is kept", name, err)
	ferr := st.patchFailed(ctx, name, why, "")
	switch kubeapi.Classify(ferr) {
	case kubeapi.Retry:
		return finished, ferr
	case kubeapi.Rejected:
		st.r.log(ctx).Errorw("Failing the job was rejected too; it runs until it ends", "task", st.a.Name, "job", name, "error", ferr)
		kept = fmt.Sprintf("Deleting job '%s' was rejected (%v), and so was failing it (%v); it is kept", name, err, ferr)
	}
	return st.record(ctx, func(p taskmeta.Progress) taskmeta.Progress { return p.WithKept(part, kept) })
}

// recordPreemption adds the pods the cluster took from an executor's job to
// the job's count, on the condition that the job is as the step read it
// (else the step decides again); a job gone is decided on again too.
func (st *step) recordPreemption(ctx context.Context, act steps.Action) (stepOutcome, error) {
	job := st.jobs[act.Part]
	if job == nil {
		return again, nil
	}
	pods := append(taskmeta.PreemptedPods(job), strings.Split(act.Pods, ",")...)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": job.ResourceVersion,
		"annotations":     map[string]string{taskmeta.AnnotationPreempted: strings.Join(pods, ",")},
	}})
	err := st.r.call(ctx, func(ctx context.Context) error {
		_, err := st.r.Client.BatchV1().Jobs(st.a.Namespace).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case apierrors.IsConflict(err):
		return conflicted, nil
	case apierrors.IsNotFound(err):
		return again, nil
	case err != nil:
		return finished, err
	}
	st.r.log(ctx).Warnw("The cluster took an executor's pod; Kubernetes runs it again", "task", st.a.Name, "job", job.Name,
		"pods", act.Pods, "preemptions", len(pods), "max", st.r.Config.MaxPreemptions, "reason", act.Reason)
	st.r.kubeEvent(st.anchor, true, taskmeta.ReasonPreempted, "Job %s lost its pod to the cluster (%s); run again (%d of %d)",
		job.Name, act.Reason, len(pods), st.r.Config.MaxPreemptions)
	return finished, nil
}
