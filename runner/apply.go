package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// stepOutcome says how the application of a plan ended.
type stepOutcome int

const (
	// finished: the plan is applied (or an error is returned).
	finished stepOutcome = iota
	// again: an action changed what the step decides on (it ended a part
	// itself): decide again at once.
	again
	// conflicted: the anchor changed under the step: decide again from a
	// fresh read, after a backoff.
	conflicted
)

// step is the application of one plan to one task.
type step struct {
	r      *Runner
	anchor *corev1.ConfigMap
	a      steps.Anchor
	// spec is the task, decoded on first use.
	spec *taskspec.Task
	// jobs are the jobs the plan was decided on.
	jobs map[string]*batchv1.Job
	// deadline, when set, is when the task's time limit ends.
	deadline time.Time
	// pvcLeft is why a DeletePVC of the step failed; pvcGone that one
	// succeeded (or found the PVC gone).
	pvcLeft string
	pvcGone bool
	// owed are the state changes the anchor records as not yet told.
	owed []owedChange
}

// apply carries out a plan: the owner's share first (takeShare), the
// progress (recordStart), the actions in order, the final state last (end)
// or, on a task that ended, the PVC it left forgotten once it is gone
// (behaviour §6).
func (r *Runner) apply(ctx context.Context, anchor *corev1.ConfigMap, obs steps.Observed, plan steps.Plan, res *Result) (stepOutcome, error) {
	st := &step{r: r, anchor: anchor, a: taskmeta.AnchorOf(anchor.ObjectMeta), spec: obs.Spec, jobs: obs.Jobs, deadline: plan.Deadline, owed: owedChanges(anchor.ObjectMeta)}
	rv := anchor.ResourceVersion
	started, ended := steps.StateChanges(anchor.ObjectMeta, plan)
	if plan.Claim != nil {
		next, held, out, err := r.takeShare(ctx, anchor, rv, *plan.Claim, res)
		if !held {
			return out, err
		}
		rv = next
	}
	if plan.Progress != nil {
		next, out, err := st.recordStart(ctx, rv, plan, started)
		if out != finished || err != nil {
			return out, err
		}
		rv = next
	}
	for _, act := range plan.Actions {
		res.Actions = append(res.Actions, act)
		if next, err := st.do(ctx, act); err != nil || next != finished {
			return next, err
		}
	}
	if plan.Final != nil {
		return st.end(ctx, rv, plan, ended, obs.Event, res)
	}
	if st.pvcGone && anchor.Annotations[taskmeta.AnnotationPVCLeft] != "" {
		return st.forgetPVCLeft(ctx, rv)
	}
	return finished, nil
}

// takeShare holds the task's place in its owner's share of the cluster
// (holdShare) before it starts. held: the task goes on, from the anchor's
// version next; otherwise the step ends with out and err, and a task that
// waits for its share says so in res.
func (r *Runner) takeShare(ctx context.Context, anchor *corev1.ConfigMap, rv string, claim steps.Claim, res *Result) (next string, held bool, out stepOutcome, err error) {
	held, next, err = r.holdShare(ctx, anchor, rv, claim)
	if apierrors.IsConflict(err) {
		return "", false, conflicted, nil
	}
	if err != nil {
		return "", false, finished, err
	}
	if !held {
		res.State, res.Waiting = tesv1.StateQueued, true
		res.Message = "the task waits for its owner's share of the cluster (" + r.Config.Quota.String() + ")"
		r.log(ctx).Infow("Task waits for its owner's share", "task", anchor.Name, "owner", claim.Owner, "quota", r.Config.Quota.String())
		return "", false, finished, nil
	}
	return next, true, finished, nil
}

// recordStart records the task's progress on its anchor (and that it waits
// no more), the first time with a Kubernetes event, and tells of its start
// (started, when not nil). The step goes on, from the anchor's version next,
// when out is finished and err nil.
func (st *step) recordStart(ctx context.Context, rv string, plan steps.Plan, started *steps.StateChange) (next string, out stepOutcome, err error) {
	r, anchor := st.r, st.anchor
	ann := map[string]string{taskmeta.AnnotationProgress: plan.Progress.String()}
	plan.AddTTL(ann)
	lbl := map[string]any{taskmeta.LabelTask: anchor.Name}
	if _, waited := anchor.Labels[taskmeta.LabelWaiting]; waited || plan.Claim != nil {
		lbl[taskmeta.LabelWaiting] = nil // started: it waits no more
	}
	next, err = r.patchAnchor(ctx, anchor, rv, map[string]any{
		"labels":      lbl,
		"annotations": ann,
	})
	if apierrors.IsConflict(err) {
		return "", conflicted, nil
	}
	if err != nil {
		return "", finished, err
	}
	if _, had := anchor.Annotations[taskmeta.AnnotationProgress]; !had {
		r.kubeEvent(anchor, false, taskmeta.ReasonStarted, "Task started: %s", strings.Join(plan.Progress.Parts, ", "))
	}
	if started != nil {
		next = st.tell(ctx, next, []steps.StateChange{*started}, r.now())
	}
	return next, finished, nil
}

// forgetPVCLeft takes off the anchor of an ended task the name of its PVC,
// left at its end and gone now.
func (st *step) forgetPVCLeft(ctx context.Context, rv string) (stepOutcome, error) {
	r, anchor := st.r, st.anchor
	_, err := r.patchAnchor(ctx, anchor, rv, map[string]any{"annotations": map[string]any{taskmeta.AnnotationPVCLeft: nil}})
	if apierrors.IsConflict(err) {
		return conflicted, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return finished, err
	}
	r.log(ctx).Infow("Deleted the PVC left at the task's end", "task", anchor.Name, "pvc", taskmeta.PVCName(anchor.Name))
	return finished, nil
}

// end records the task's final state on its anchor (labelled with it, and
// the PVC left, if any), tells of it (ended) with a Kubernetes event, and
// gives back the owner's share when the plan says so.
func (st *step) end(ctx context.Context, rv string, plan steps.Plan, ended []steps.StateChange, event string, res *Result) (stepOutcome, error) {
	r, anchor, final := st.r, st.anchor, plan.Final
	now := r.now()
	ann := finalAnnotations(final, now)
	if st.pvcLeft != "" {
		// The sweep deletes it again (endedTask).
		ann[taskmeta.AnnotationPVCLeft] = st.pvcLeft
	}
	plan.AddTTL(ann)
	rv, err := r.patchAnchor(ctx, anchor, rv, map[string]any{
		"labels":      map[string]string{taskmeta.LabelState: final.State},
		"annotations": ann,
	})
	if apierrors.IsConflict(err) {
		return conflicted, nil
	}
	if err != nil {
		return finished, err
	}
	st.tell(ctx, rv, ended, now)
	res.Ended = final.State
	r.log(ctx).Infow("Task ended", "task", anchor.Name, "state", final.State, "reason", final.Reason)
	note := final.State
	if final.Reason != "" {
		note += ": " + strings.ReplaceAll(final.Reason, "\n", "; ")
	}
	r.kubeEvent(anchor, final.State != tesv1.StateComplete && final.State != tesv1.StateCanceled, taskmeta.ReasonEnded, "%s", note)
	if plan.Release {
		r.giveBackShare(ctx, anchor, event)
	}
	return finished, nil
}

// finalAnnotations are the anchor's annotations of a task that ended (its
// label taskmeta.LabelState is written beside them).
func finalAnnotations(f *steps.Final, now time.Time) map[string]string {
	return map[string]string{
		taskmeta.AnnotationState:  f.State,
		taskmeta.AnnotationEnded:  now.UTC().Format(time.RFC3339),
		taskmeta.AnnotationReason: f.Reason,
	}
}

// do carries out one action.
func (st *step) do(ctx context.Context, act steps.Action) (stepOutcome, error) {
	switch act.Kind {
	case steps.CreatePVC:
		return st.createPVC(ctx, act)
	case steps.CreateJob:
		return st.createJob(ctx, act)
	case steps.FailJob:
		return st.failJob(ctx, act)
	case steps.DeleteJob:
		return st.deleteJob(ctx, act.Part, act.Reason)
	case steps.DeletePVC:
		st.pvcLeft = st.deletePVC(ctx)
		st.pvcGone = st.pvcLeft == ""
		return finished, nil
	case steps.ReleasePVC:
		st.releasePVC(ctx)
		return finished, nil
	case steps.RecordOutputFileLogs:
		st.recordOutputFileLogs(ctx, taskmeta.ObjectName(st.a.Name, act.Part))
		return finished, nil
	case steps.RecordExecutorLog:
		st.recordExecutorLog(ctx, act.Part)
		return finished, nil
	case steps.RecordPreemption:
		return st.recordPreemption(ctx, act)
	case steps.DeleteTask:
		return finished, st.deleteTask(ctx, act)
	}
	return finished, fmt.Errorf("unknown action %q", act.Kind)
}

// needSpec returns the task; one that cannot be read ends the part.
func (st *step) needSpec(ctx context.Context, part string) (*taskspec.Task, stepOutcome, error) {
	if st.spec != nil {
		return st.spec, finished, nil
	}
	spec, err := st.r.anchorSpec(st.anchor)
	if err != nil {
		// A task refused now (a setting changed since it started: the
		// executor secret, the backend parameters) stops as one that
		// cannot be read.
		reason := fmt.Sprintf("The task cannot be read: %v", err)
		if errors.Is(err, errRefused) {
			reason = steps.Capitalize(err.Error())
		}
		st.r.log(ctx).Errorw("The task cannot be read or is refused; it stops", "task", st.a.Name, "error", err)
		next, err := st.endPart(ctx, part, reason, false)
		return nil, next, err
	}
	st.r.logWarnings(ctx, st.a.Name, spec)
	st.spec = spec
	return spec, finished, nil
}

func (st *step) createPVC(ctx context.Context, act steps.Action) (stepOutcome, error) {
	spec, next, err := st.needSpec(ctx, act.Part)
	if spec == nil {
		return next, err
	}
	err = st.r.call(ctx, func(ctx context.Context) error {
		_, err := st.r.Client.CoreV1().PersistentVolumeClaims(st.a.Namespace).Create(ctx, jobspec.PVC(st.a, spec, st.r.Config.Config), metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		return finished, nil
	}
	return st.created(ctx, act, err)
}

func (st *step) createJob(ctx context.Context, act steps.Action) (stepOutcome, error) {
	spec, next, err := st.needSpec(ctx, act.Part)
	if spec == nil {
		return next, err
	}
	var job *batchv1.Job
	if i, ok := taskmeta.ExecutorIndex(act.Part); ok {
		if i >= len(spec.Executors) {
			return st.endPart(ctx, act.Part, fmt.Sprintf("The task's progress names executor %d, but the task has %d", i, len(spec.Executors)), false)
		}
		job = jobspec.ExecutorJob(st.a, spec, i, st.r.Config.Config)
	} else {
		job = jobspec.FilerJob(st.a, act.Part, spec, st.r.Config.Config)
		if act.Partial {
			jobspec.SkipMissingOutputs(job)
		}
	}
	if !st.deadline.IsZero() {
		left := int64(math.Ceil(st.deadline.Sub(st.r.now()).Seconds()))
		job.Spec.ActiveDeadlineSeconds = ptrTo(max(1, left))
	}
	err = st.r.call(ctx, func(ctx context.Context) error {
		_, err := st.r.Client.BatchV1().Jobs(st.a.Namespace).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		return st.checkOurs(ctx, act)
	}
	if err == nil {
		st.r.kubeEvent(st.anchor, false, taskmeta.ReasonJobCreated, "%s", taskmeta.JobCreatedNote(job.Name))
		if st.r.Config.Debug {
			st.r.log(ctx).Debugw("Created job", "task", st.a.Name, "job", job.Name, "manifest", jobManifest(job))
		} else {
			st.r.log(ctx).Infow("Created job", "task", st.a.Name, "job", job.Name)
		}
	}
	return st.created(ctx, act, err)
}

// hiddenEnv are the variables whose values the debug log never shows.
var hiddenEnv = map[string]bool{"TESK_FTP_USERNAME": true, "TESK_FTP_PASSWORD": true}

// created handles the answer to a create: an object the API server rejects
// (invalid, forbidden by a policy or a quota) can never be created as it is,
// so the task stops at once with the server's message (behaviour §8.6);
// other errors are tried again.
func (st *step) created(ctx context.Context, act steps.Action, err error) (stepOutcome, error) {
	if kubeapi.Classify(err) != kubeapi.Rejected {
		return finished, err
	}
	reason := fmt.Sprintf("Creating %s was rejected: %v", steps.DescribePart(st.a.Name, act.Part), err)
	st.r.log(ctx).Errorw("Creating an object was rejected; the task stops", "task", st.a.Name, "part", act.Part, "error", err)
	return st.endPart(ctx, act.Part, reason, false)
}

// checkOurs: a job that already exists is done if the task owns it; a job of
// the same name that it does not own stops the task.
func (st *step) checkOurs(ctx context.Context, act steps.Action) (stepOutcome, error) {
	job, err := st.r.getJob(ctx, st.a.Namespace, taskmeta.ObjectName(st.a.Name, act.Part))
	switch {
	case err != nil:
		return finished, err
	case job == nil:
		return again, nil
	case taskmeta.OwnedBy(job, st.a.UID):
		return finished, nil
	}
	return st.endPart(ctx, act.Part, fmt.Sprintf("Job '%s' exists but does not belong to the task", job.Name), false)
}

// maxPVCLeft bounds the error the anchor records of a PVC left (bytes).
const maxPVCLeft = 512

// deletePVC deletes the task's PVC; a failure is logged and its error
// returned (at most maxPVCLeft bytes; "" when the PVC is gone), and the
// task goes on: the anchor records it, and the sweep tries again.
func (st *step) deletePVC(ctx context.Context) string {
	err := st.r.call(ctx, func(ctx context.Context) error {
		return st.r.Client.CoreV1().PersistentVolumeClaims(st.a.Namespace).Delete(ctx, taskmeta.PVCName(st.a.Name), metav1.DeleteOptions{})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		st.r.log(ctx).Warnw("Deleting the PVC failed; going on, the sweep tries again", "task", st.a.Name, "pvc", taskmeta.PVCName(st.a.Name), "error", err)
		left := err.Error()
		if len(left) > maxPVCLeft {
			left = left[:maxPVCLeft] + "…"
		}
		return left
	}
	return ""
}

func (st *step) releasePVC(ctx context.Context) {
	err := st.r.call(ctx, func(ctx context.Context) error {
		_, err := st.r.Client.CoreV1().PersistentVolumeClaims(st.a.Namespace).Patch(ctx, taskmeta.PVCName(st.a.Name), types.MergePatchType,
			[]byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		st.r.log(ctx).Warnw("Releasing the kept PVC from its task failed; deleting the task will delete it", "task", st.a.Name, "error", err)
	} else {
		st.r.log(ctx).Infow("Keeping the PVC (KEEP_FAILED_PVC)", "task", st.a.Name, "pvc", taskmeta.PVCName(st.a.Name))
	}
}

func (st *step) deleteTask(ctx context.Context, act steps.Action) error {
	bg := metav1.DeletePropagationBackground
	err := st.r.call(ctx, func(ctx context.Context) error {
		return st.r.Client.CoreV1().ConfigMaps(st.a.Namespace).Delete(ctx, st.a.Name, metav1.DeleteOptions{
			PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &st.a.UID},
		})
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	st.r.log(ctx).Infow("Deleted the task and all it owns", "task", st.a.Name, "reason", act.Reason)
	return nil
}

// endPart records that the service ended a part, and why, then (for a job it
// deletes) deletes it; the step is then decided again, and stops the task.
func (st *step) endPart(ctx context.Context, part, reason string, deleteJob bool) (stepOutcome, error) {
	next, err := st.record(ctx, func(p taskmeta.Progress) taskmeta.Progress { return p.WithEnded(part, reason) })
	if err != nil || next == conflicted || !deleteJob {
		return next, err
	}
	if next, err := st.deleteJob(ctx, part, reason); err != nil || next != finished {
		return next, err
	}
	return again, nil
}

// record changes the task's progress on a fresh read of the anchor (this step
// may have written it already); the step is then decided again.
func (st *step) record(ctx context.Context, change func(taskmeta.Progress) taskmeta.Progress) (stepOutcome, error) {
	fresh, err := st.r.getAnchor(ctx, st.a.Namespace, st.a.Name)
	if err != nil {
		return finished, err
	}
	prog, _ := taskmeta.ParseProgress(fresh.Annotations[taskmeta.AnnotationProgress])
	_, err = st.r.patchAnchor(ctx, fresh, fresh.ResourceVersion, map[string]any{
		"annotations": map[string]string{taskmeta.AnnotationProgress: change(prog).String()},
	})
	switch {
	case apierrors.IsConflict(err):
		return conflicted, nil
	case err != nil:
		return finished, err
	}
	return again, nil
}

// patchAnchor merges metadata into the anchor, on the condition that it is
// still at resourceVersion rv; it returns the new resourceVersion.
func (r *Runner) patchAnchor(ctx context.Context, anchor *corev1.ConfigMap, rv string, meta map[string]any) (string, error) {
	meta["resourceVersion"] = rv
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	var out *corev1.ConfigMap
	err := r.call(ctx, func(ctx context.Context) (err error) {
		out, err = r.Client.CoreV1().ConfigMaps(anchor.Namespace).Patch(ctx, anchor.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return "", err
	}
	return out.ResourceVersion, nil
}
