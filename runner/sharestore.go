package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// maxShareAttempts bounds how often a ledger is read again after another
// step wrote it in between.
const maxShareAttempts = 8

// errShareBusy is a ledger that changed under every attempt: the step is
// tried again (a 5xx), as for an anchor that does.
var errShareBusy = fmt.Errorf("the owner's share changed under %d attempts; try again", maxShareAttempts)

// getShare reads an owner's ledger: nil if there is none.
func (r *Runner) getShare(ctx context.Context, ns, owner string) (*corev1.ConfigMap, steps.Share, error) {
	var cm *corev1.ConfigMap
	err := r.call(ctx, func(ctx context.Context) (err error) {
		cm, err = r.Client.CoreV1().ConfigMaps(ns).Get(ctx, steps.ShareName(owner), metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, steps.Share{Tasks: map[string]float64{}}, nil
	}
	if err != nil {
		return nil, steps.Share{}, err
	}
	s, err := steps.ParseShare(cm)
	return cm, s, err
}

// writeShare writes an owner's ledger on the condition that it is still as
// read (cm; nil: there was none): a conflict, or a ledger created meanwhile,
// says another step wrote it first. An empty share deletes the ledger.
func (r *Runner) writeShare(ctx context.Context, ns, owner string, cm *corev1.ConfigMap, s steps.Share) (conflict bool, err error) {
	switch {
	case cm == nil && len(s.Tasks) == 0:
		return false, nil
	case cm == nil:
		ledger := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: steps.ShareName(owner), Namespace: ns, Labels: map[string]string{
				taskmeta.LabelShare: "true", taskmeta.LabelCreator: owner,
			}},
			Data: map[string]string{steps.ShareKey: s.Encode()},
		}
		err = r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().ConfigMaps(ns).Create(ctx, ledger, metav1.CreateOptions{})
			return err
		})
		if apierrors.IsAlreadyExists(err) {
			return true, nil
		}
	case len(s.Tasks) == 0:
		rv := cm.ResourceVersion
		err = r.call(ctx, func(ctx context.Context) error {
			return r.Client.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
	default:
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cm.ResourceVersion},
			"data":     map[string]string{steps.ShareKey: s.Encode()},
		})
		err = r.call(ctx, func(ctx context.Context) error {
			_, err := r.Client.CoreV1().ConfigMaps(ns).Patch(ctx, cm.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
	}
	if apierrors.IsConflict(err) {
		return true, nil
	}
	return false, err
}

// claimShare puts a task in its owner's ledger if the quota leaves it room
// (a task already there has its place): false when it has none. No owner
// is ever over its share: each write is conditional on the ledger read.
func (r *Runner) claimShare(ctx context.Context, ns, task string, c steps.Claim) (bool, error) {
	for range maxShareAttempts {
		cm, s, err := r.getShare(ctx, ns, c.Owner)
		if err != nil {
			return false, err
		}
		if _, in := s.Tasks[task]; in {
			return true, nil
		}
		if !r.Config.Quota.Room(s, task, c.Cores) {
			return false, nil
		}
		s.Tasks[task] = c.Cores
		conflict, err := r.writeShare(ctx, ns, c.Owner, cm, s)
		if err != nil || !conflict {
			return err == nil, err
		}
	}
	return false, errShareBusy
}

// releaseShare takes tasks out of their owner's ledger; it reports whether
// any was there.
func (r *Runner) releaseShare(ctx context.Context, ns, owner string, tasks ...string) (bool, error) {
	for range maxShareAttempts {
		cm, s, err := r.getShare(ctx, ns, owner)
		if err != nil {
			return false, err
		}
		released := false
		for _, t := range tasks {
			if _, in := s.Tasks[t]; in {
				delete(s.Tasks, t)
				released = true
			}
		}
		if !released {
			return false, nil
		}
		conflict, err := r.writeShare(ctx, ns, owner, cm, s)
		if err != nil || !conflict {
			return err == nil, err
		}
	}
	return false, errShareBusy
}

// startWaiting starts an owner's waiting tasks, the oldest first, while its
// share has room (each start claims its place).
func (r *Runner) startWaiting(ctx context.Context, ns, owner, event string) {
	waiting, err := r.waitingOf(ctx, ns, owner)
	if err != nil {
		r.log(ctx).Warnw("Could not list the owner's waiting tasks; the sweep starts them", "owner", owner, "error", err)
		return
	}
	for _, m := range waiting {
		res, err := r.Reconcile(ctx, ns, m.Name, Options{Event: event, Submit: true})
		if err != nil {
			r.log(ctx).Warnw("Could not start a waiting task; the sweep starts it", "task", m.Name, "error", err)
			return
		}
		if res.Waiting {
			return // the share is full again
		}
	}
}

// waitingOf lists an owner's waiting tasks, the oldest first: their
// metadata alone where the Runner has a metadata client (a start reads
// each anchor whole anyway, and most of them wait on), else whole anchors.
func (r *Runner) waitingOf(ctx context.Context, ns, owner string) ([]metav1.ObjectMeta, error) {
	opts := metav1.ListOptions{LabelSelector: labels.Set{taskmeta.LabelCreator: owner, taskmeta.LabelWaiting: "true"}.String()}
	var metas []metav1.ObjectMeta
	err := r.call(ctx, func(ctx context.Context) error {
		metas = metas[:0]
		if r.Metadata != nil {
			list, err := r.Metadata.Resource(configMapsResource).Namespace(ns).List(ctx, opts)
			if err != nil {
				return err
			}
			for _, m := range list.Items {
				metas = append(metas, m.ObjectMeta)
			}
			return nil
		}
		list, err := r.Client.CoreV1().ConfigMaps(ns).List(ctx, opts)
		if err != nil {
			return err
		}
		for _, cm := range list.Items {
			metas = append(metas, cm.ObjectMeta)
		}
		return nil
	})
	sort.Slice(metas, func(i, j int) bool {
		ti, tj := metas[i].CreationTimestamp, metas[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return metas[i].Name < metas[j].Name
	})
	return metas, err
}

// holdShare claims a task's place in its owner's share. Without room, the
// task is labelled waiting (so that a task of the owner that ends finds
// it) and its place asked for once more: a place given back in between is
// taken either way. It returns the anchor's resourceVersion after the
// label.
func (r *Runner) holdShare(ctx context.Context, anchor *corev1.ConfigMap, rv string, c steps.Claim) (bool, string, error) {
	held, err := r.claimShare(ctx, anchor.Namespace, anchor.Name, c)
	if err != nil || held {
		return held, rv, err
	}
	if anchor.Labels[taskmeta.LabelWaiting] != "true" {
		if rv, err = r.patchAnchor(ctx, anchor, rv, map[string]any{
			"labels":      map[string]string{taskmeta.LabelWaiting: "true"},
			"annotations": map[string]string{taskmeta.AnnotationCores: strconv.FormatFloat(c.Cores, 'f', -1, 64)},
		}); err != nil {
			return false, rv, err
		}
	}
	held, err = r.claimShare(ctx, anchor.Namespace, anchor.Name, c)
	return held, rv, err
}

// giveBackShare takes an ended task out of its owner's share and starts
// the owner's waiting tasks that now fit. A failure is a warning: the
// sweep gives back the places of ended tasks.
func (r *Runner) giveBackShare(ctx context.Context, anchor *corev1.ConfigMap, event string) {
	owner := anchor.Labels[taskmeta.LabelCreator]
	released, err := r.releaseShare(ctx, anchor.Namespace, owner, anchor.Name)
	if err != nil {
		r.log(ctx).Warnw("Could not give back the task's place in its owner's share; the sweep does", "task", anchor.Name, "owner", owner, "error", err)
		return
	}
	if released {
		r.startWaiting(ctx, anchor.Namespace, owner, event)
	}
}

// shareSweep is what a sweep learns of the owners' shares: their ledgers,
// listed before the anchors, and of each owner's tasks those that wait,
// those that hold a place and how each stands.
type shareSweep struct {
	ledgers map[string]*corev1.ConfigMap
	shares  map[string]steps.Share
	// tasks are the anchors of tasks with an owner, by name.
	tasks   map[string]sweptShareTask
	waiting []steps.Waiting
}

// sweptShareTask is how a task of an owner stands.
type sweptShareTask struct {
	owner          string
	started, ended bool
}

// listShares reads every owner's ledger.
func (r *Runner) listShares(ctx context.Context, ns string) (*shareSweep, error) {
	sw := &shareSweep{ledgers: map[string]*corev1.ConfigMap{}, shares: map[string]steps.Share{}, tasks: map[string]sweptShareTask{}}
	err := listPages(ctx, r, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		o.LabelSelector = labels.Set{taskmeta.LabelShare: "true"}.String()
		list, err := r.Client.CoreV1().ConfigMaps(ns).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			cm := &list.Items[i]
			owner := cm.Labels[taskmeta.LabelCreator]
			s, err := steps.ParseShare(cm)
			if err != nil {
				r.log(ctx).Warnw("Sweep cannot read an owner's share; it is left as it is", "share", cm.Name, "error", err)
				continue
			}
			sw.ledgers[owner], sw.shares[owner] = cm, s
		}
		return list.Continue, nil
	})
	return sw, err
}

// see notes the anchors of tasks with an owner.
func (sw *shareSweep) see(anchors []metav1.ObjectMeta) {
	for _, m := range anchors {
		owner := m.Labels[taskmeta.LabelCreator]
		if owner == "" || !taskmeta.IsAnchor(m) {
			continue
		}
		_, started := m.Annotations[taskmeta.AnnotationProgress]
		ended := m.Annotations[taskmeta.AnnotationState] != ""
		sw.tasks[m.Name] = sweptShareTask{owner: owner, started: started, ended: ended}
		if m.Labels[taskmeta.LabelWaiting] == "true" && !started && !ended {
			cores, _ := strconv.ParseFloat(m.Annotations[taskmeta.AnnotationCores], 64)
			sw.waiting = append(sw.waiting, steps.Waiting{Task: m.Name, Owner: owner, Cores: cores, Created: m.CreationTimestamp.Time})
		}
	}
}

// maxSweepStarts bounds the waiting tasks one sweep starts.
const maxSweepStarts = 200

// settleShares gives back the places of tasks that ended or are gone (a
// step that ended them stopped before it gave them back), starts the tasks
// that hold a place but never started, and then the waiting tasks that fit,
// in fair order (FairOrder). The ledgers were listed before the anchors, so
// a place in them is of a task whose anchor the anchors' list holds unless
// it was deleted.
func (r *Runner) settleShares(ctx context.Context, ns, event string, sw *shareSweep) (stepped []Result, errs []error) {
	var claimed []string
	for owner, s := range sw.shares {
		var gone []string
		for task := range s.Tasks {
			t, ok := sw.tasks[task]
			switch {
			case !ok || t.ended || t.owner != owner:
				gone = append(gone, task)
			case !t.started:
				claimed = append(claimed, task)
			}
		}
		if len(gone) == 0 {
			continue
		}
		sort.Strings(gone)
		if _, err := r.releaseShare(ctx, ns, owner, gone...); err != nil {
			errs = append(errs, fmt.Errorf("share of %s: %w", owner, err))
			continue
		}
		r.log(ctx).Infow("Sweep gave back the places of ended tasks", "owner", owner, "tasks", gone)
		for _, t := range gone {
			delete(s.Tasks, t)
		}
	}
	sort.Strings(claimed)
	start := claimed
	for _, w := range steps.FairOrder(sw.waiting, sw.shares, r.Config.Quota) {
		start = append(start, w.Task)
	}
	for _, task := range start[:min(len(start), maxSweepStarts)] {
		res, err := r.Reconcile(ctx, ns, task, Options{Event: event, Submit: true})
		if err != nil && !errors.Is(err, ErrUnknownTask) {
			errs = append(errs, fmt.Errorf("task %s: %w", task, err))
			continue
		}
		stepped = append(stepped, res)
	}
	return stepped, errs
}
