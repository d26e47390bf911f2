package steps

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// StateChange is a change of a task's TES state that a step recorded on its
// anchor, as the handler tells it to subscribers (behaviour §5.8): the task
// started (INITIALIZING, or RUNNING for a task without inputs), its first
// executor started (RUNNING), a step took up its cancel (CANCELING), or it
// ended (its final state, with why).
type StateChange struct {
	Namespace string
	Task      string
	// Owner is who created the task (OwnerOf).
	Owner string
	Old   string
	New   string
	// Time is when the step recorded the new state.
	Time time.Time
	// Reason says why a task that ended stopped (its system_logs); empty
	// otherwise.
	Reason string
	// NotifyURL is the address the task's tag taskmeta.TagNotifyURL names,
	// as the tag says it (the publisher checks it against
	// NotifyURLPrefixes); "" for none.
	NotifyURL string
}

// RecordedState is the TES state a task's anchor records: its final state
// once it ended; CANCELING once a step took up its cancel (labelled
// cancelled, it recorded its running parts as ended by the service); else
// that of the last part started (INITIALIZING while the volume and the
// inputs filer run, RUNNING from the first executor on); QUEUED before any
// part started. A progress record that cannot be read is UNKNOWN. The TES
// view derives its state from the jobs and pods too (viewState): it shows
// CANCELING from the cancel label on, and QUEUED while its first executor's job
// has no pod yet or its pods wait for a node, which no step records: the
// record says RUNNING from the step that creates the first executor's job,
// whether or not its pod can be created.
func RecordedState(anchor metav1.ObjectMeta) string {
	if s := anchor.Annotations[taskmeta.AnnotationState]; s != "" {
		return s
	}
	prog, err := taskmeta.ParseProgress(anchor.Annotations[taskmeta.AnnotationProgress])
	if err != nil {
		return stateUnknown
	}
	return progressState(anchor, prog)
}

// stateUnknown is the recorded state of a task whose progress record cannot
// be read (it ends SYSTEM_ERROR).
const stateUnknown = "UNKNOWN"

// progressState is the state of a task not ended, from its progress record.
func progressState(anchor metav1.ObjectMeta, prog taskmeta.Progress) string {
	if anchor.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled && slices.ContainsFunc(prog.Ended, func(e taskmeta.EndedRecord) bool { return e.Reason == cancelledReason }) {
		return tesv1.StateCanceling
	}
	state := tesv1.StateQueued
	for _, part := range prog.Parts {
		if prog.IsStarted(part) {
			state = phaseOf(part)
		}
	}
	return state
}

// StateChanges are the changes of the recorded state that a plan makes on a
// task's anchor: started, by its progress record (written first: a part
// started, or a cancel taken up); ended, by its final state (written last).
// A task cancelled ends CANCELED through CANCELING: a step that ends it at
// once tells both. Neither is there when that write changes no state. The
// caller fills in the time.
func StateChanges(anchor metav1.ObjectMeta, plan Plan) (started *StateChange, ended []StateChange) {
	at := RecordedState(anchor)
	if tesv1.IsFinal(at) {
		return nil, nil // an ended task never moves again
	}
	owner, notify := OwnerOf(anchor), taskmeta.NotifyURLOf(anchor)
	change := func(next, reason string) StateChange {
		ch := StateChange{Namespace: anchor.Namespace, Task: anchor.Name, Owner: owner, Old: at, New: next, Reason: reason, NotifyURL: notify}
		at = next
		return ch
	}
	if plan.Progress != nil {
		if next := progressState(anchor, *plan.Progress); next != at {
			ch := change(next, "")
			started = &ch
		}
	}
	if plan.Final == nil || plan.Final.State == at {
		return started, nil
	}
	if plan.Final.State == tesv1.StateCanceled && at != tesv1.StateCanceling {
		ended = append(ended, change(tesv1.StateCanceling, ""))
	}
	return started, append(ended, change(plan.Final.State, plan.Final.Reason))
}

// OwnerOf is who created the task: the anchor's creator annotation, else
// its label-safe form (a task the TESK API wrote).
func OwnerOf(anchor metav1.ObjectMeta) string {
	if owner := anchor.Annotations[taskmeta.AnnotationCreator]; owner != "" {
		return owner
	}
	return anchor.Labels[taskmeta.LabelCreator]
}
