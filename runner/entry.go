package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Submit starts a task. With input (the task JSON; only with TrustEvents),
// it creates the task's anchor ConfigMap from it, as the
// TESK API would; without, it reads the task from the ConfigMap the TES API
// or the TESK API created. A duplicate submission changes nothing: the
// anchor on the cluster is the task.
func (r *Runner) Submit(ctx context.Context, ns, task string, input json.RawMessage, event string) (Result, error) {
	var spec *taskspec.Task
	if len(input) > 0 && !r.Config.TrustEvents {
		// Whoever can post an event would choose the pods (behaviour §5.2).
		return Result{Task: task, Namespace: ns, Actions: []steps.Action{}}, invalid.Errorf(
			"task %s/%s: the event carries the task JSON (data.input), which this handler does not take from events (TRUST_EVENTS is off): submit the task through the TES API, or write its ConfigMap and send the event without input", ns, task)
	}
	if len(input) > 0 {
		cm := taskmeta.NewAnchor(ns, task, taskspec.Gzip(input), taskmeta.AnchorInfo{})
		var bad error
		if spec, bad = taskspec.Decode(input); bad == nil {
			bad = r.admit(spec, ns)
		}
		if bad != nil {
			// A task that can never run still becomes a task, ended with
			// SYSTEM_ERROR and why, so that the view, the TTL and the
			// sweep see it; the event is answered 400 (behaviour §8.5).
			final := &steps.Final{State: tesv1.StateSystemError, Reason: bad.Error()}
			cm.Annotations = finalAnnotations(final, r.now())
			cm.Labels[taskmeta.LabelState] = final.State
			cm.Annotations[taskmeta.AnnotationTTL] = taskmeta.TTLValue(r.Config.TaskTTL)
		}
		err := r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
		switch {
		case apierrors.IsAlreadyExists(err):
			spec = nil // the task on the cluster wins over the event's copy
		case err != nil:
			return Result{Task: task, Namespace: ns}, err
		case bad != nil:
			r.log(ctx).Errorw("The task can never run; it ended", "task", task, "state", tesv1.StateSystemError, "reason", bad.Error())
			return Result{Task: task, Namespace: ns, State: tesv1.StateSystemError, Actions: []steps.Action{}, Message: bad.Error(), Ended: tesv1.StateSystemError}, invalid.Wrap(bad)
		default:
			r.logWarnings(ctx, task, spec)
		}
	}
	res, err := r.Reconcile(ctx, ns, task, Options{Event: event, Spec: spec, Submit: true})
	if err == ErrUnknownTask {
		err = invalid.Errorf("task %s/%s: no ConfigMap %q holds its JSON, and the event has no input", ns, task, task)
	}
	return res, err
}

// Cancel cancels a task: it takes the step that follows the label
// task-status: Cancelled on the anchor, which the TES API sets before it
// posts the event. With TrustEvents the event itself cancels the task: the
// handler labels the anchor, as the TESK API labels a task it cancels.
// Without, an unlabelled task is left as it is and the event is refused, so
// that whoever can post an event cannot end another's task. A task that
// already ended stays as it is.
func (r *Runner) Cancel(ctx context.Context, ns, task, event string) (Result, error) {
	res := Result{Task: task, Namespace: ns, Actions: []steps.Action{}}
	anchor, err := r.getAnchor(ctx, ns, task)
	if errors.Is(err, ErrUnknownTask) {
		// Not a 404: a Knative delivery retries those.
		return res, invalid.Errorf("task %s/%s: no such task (no ConfigMap %q)", ns, task, task)
	}
	if err != nil {
		return res, err
	}
	if err := r.checkAnchor(ctx, anchor, true); err != nil {
		return res, err
	}
	if state := anchor.Annotations[taskmeta.AnnotationState]; state != "" {
		res.State = state
		res.Message = fmt.Sprintf("the task already ended (%s); nothing to cancel", state)
		return res, nil
	}
	if anchor.Labels[taskmeta.LabelStatus] != taskmeta.StatusCancelled && !r.Config.TrustEvents {
		return res, invalid.Errorf("task %s/%s is not labelled %s: %s, and this handler does not cancel on an event's word (TRUST_EVENTS is off): cancel through the TES API, or label the task's ConfigMap",
			ns, task, taskmeta.LabelStatus, taskmeta.StatusCancelled)
	}
	if anchor.Labels[taskmeta.LabelStatus] != taskmeta.StatusCancelled {
		err := r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().ConfigMaps(ns).Patch(ctx, task, types.MergePatchType, taskmeta.CancelPatch(), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return res, err
		}
		r.log(ctx).Infow("Task cancelled", "task", task)
		r.kubeEvent(anchor, false, taskmeta.ReasonCancelled, "Task cancelled")
	}
	return r.Reconcile(ctx, ns, task, Options{Event: event, Cancel: true})
}
