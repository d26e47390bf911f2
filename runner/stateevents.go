package runner

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// StatePublisher tells subscribers of a task's state change (Runner.States).
// An error means the change may not have reached them.
type StatePublisher interface {
	PublishState(ctx context.Context, ch steps.StateChange) error
}

// owedChange is a state change whose event could not be delivered, as the
// anchor records it (taskmeta.AnnotationStateEventsOwed); the reason of a
// final state is the anchor's own (taskmeta.AnnotationReason).
type owedChange struct {
	Old  string    `json:"old"`
	New  string    `json:"new"`
	Time time.Time `json:"time"`
}

// owedChanges reads the state changes an anchor records as owed; nil for
// none (or for a record that does not parse: it is dropped, not paid).
func owedChanges(anchor metav1.ObjectMeta) []owedChange {
	v := anchor.Annotations[taskmeta.AnnotationStateEventsOwed]
	if v == "" {
		return nil
	}
	var owed []owedChange
	if err := json.Unmarshal([]byte(v), &owed); err != nil {
		return nil
	}
	return owed
}

// changeOf is the StateChange an owed record stands for.
func changeOf(anchor metav1.ObjectMeta, o owedChange) steps.StateChange {
	ch := steps.StateChange{Namespace: anchor.Namespace, Task: anchor.Name, Owner: steps.OwnerOf(anchor), Old: o.Old, New: o.New, Time: o.Time, NotifyURL: taskmeta.NotifyURLOf(anchor)}
	if tesv1.IsFinal(o.New) {
		ch.Reason = anchor.Annotations[taskmeta.AnnotationReason]
	}
	return ch
}

// owedValue is the annotation's value for owed changes (nil: removed).
func owedValue(owed []owedChange) any {
	if len(owed) == 0 {
		return nil
	}
	b, _ := json.Marshal(owed)
	return string(b)
}

// tell publishes the state changes the step has just recorded on the
// anchor (at resourceVersion rv), in order, and returns the anchor's
// resourceVersion. A change not delivered is logged and recorded on the
// anchor as owed, so that the sweep tells it (payOwed); while changes are
// owed, later ones are recorded after them rather than published, so that
// subscribers get a task's changes in order. Neither fails the step.
func (st *step) tell(ctx context.Context, rv string, changes []steps.StateChange, at time.Time) string {
	r := st.r
	if len(changes) == 0 || r.States == nil {
		return rv
	}
	owed := slices.Clone(st.owed)
	for _, ch := range changes {
		ch.Time = at.UTC().Truncate(time.Second)
		if len(owed) == 0 {
			err := r.States.PublishState(ctx, ch)
			if err == nil {
				continue
			}
			r.log(ctx).Errorw("The task's state change was not delivered; the anchor records it as owed, and the sweep tells it", "task", ch.Task, "old", ch.Old, "new", ch.New, "error", err)
		}
		owed = append(owed, owedChange{Old: ch.Old, New: ch.New, Time: ch.Time})
	}
	if len(owed) == len(st.owed) {
		return rv
	}
	next, err := r.patchAnchor(ctx, st.anchor, rv, map[string]any{"annotations": map[string]any{taskmeta.AnnotationStateEventsOwed: owedValue(owed)}})
	if err == nil {
		st.owed = owed
		return next
	}
	if apierrors.IsConflict(err) {
		// Another step changed the anchor: record them on a fresh read;
		// the rest of this step, conditional on rv, then decides again.
		err = r.oweFresh(ctx, st.a.Namespace, st.a.Name, owed[len(st.owed):])
	}
	if err != nil {
		r.log(ctx).Errorw("The task's state changes are lost: they were not delivered, and the anchor could not record them", "task", st.a.Name, "changes", owed[len(st.owed):], "error", err)
	}
	return rv
}

// oweFresh adds owed changes to the anchor's record, on fresh reads.
func (r *Runner) oweFresh(ctx context.Context, ns, task string, more []owedChange) error {
	var err error
	for range maxAttempts {
		var fresh *corev1.ConfigMap
		if fresh, err = r.getAnchor(ctx, ns, task); err != nil {
			return err
		}
		owed := append(owedChanges(fresh.ObjectMeta), more...)
		_, err = r.patchAnchor(ctx, fresh, fresh.ResourceVersion, map[string]any{"annotations": map[string]any{taskmeta.AnnotationStateEventsOwed: owedValue(owed)}})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// owingAnchors are the anchors that record state changes not yet told.
func owingAnchors(anchors []metav1.ObjectMeta) []metav1.ObjectMeta {
	var out []metav1.ObjectMeta
	for _, m := range anchors {
		if m.Annotations[taskmeta.AnnotationStateEventsOwed] != "" && taskmeta.IsAnchor(m) && taskmeta.CheckFormat(m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// payOwed tells the state changes the anchors record as owed, each task's in
// order, and removes those told from the anchor, on the condition that it
// is as the sweep listed it (else the next sweep tells them again: a
// subscriber may get one twice, with the same id). A task whose change
// still fails keeps it and those after it. labelBatch anchors at most.
func (r *Runner) payOwed(ctx context.Context, anchors []metav1.ObjectMeta) {
	if r.States == nil {
		return
	}
	for _, m := range anchors[:min(len(anchors), labelBatch)] {
		owed := owedChanges(m)
		told := 0
		for _, o := range owed {
			if err := r.States.PublishState(ctx, changeOf(m, o)); err != nil {
				r.log(ctx).Warnw("Sweep could not tell a task's owed state change; the next sweep tries again", "task", m.Name, "new", o.New, "error", err)
				break
			}
			told++
		}
		if told == 0 && len(owed) > 0 {
			continue
		}
		_, err := r.patchAnchor(ctx, &corev1.ConfigMap{ObjectMeta: m}, m.ResourceVersion, map[string]any{
			"annotations": map[string]any{taskmeta.AnnotationStateEventsOwed: owedValue(owed[told:])},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			r.log(ctx).Warnw("Sweep could not record the state changes it told", "task", m.Name, "error", err)
		}
	}
}
