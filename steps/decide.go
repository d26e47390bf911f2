package steps

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Observed is what a step sees of a task on the cluster.
type Observed struct {
	// Event is the id of the event being handled; empty for a sweep.
	Event string
	// Anchor is the task's anchor: its name is the task's, its labels and
	// annotations hold the cancel label, the progress and the final state.
	Anchor metav1.ObjectMeta
	// Spec is the decoded task; needed only at submission (when the anchor
	// has no progress yet), else nil.
	Spec *taskspec.Task
	// Jobs are the task's jobs, by part (inputs-filer, ex-00, ...).
	Jobs map[string]*batchv1.Job
	// Pods are the task's pods; nil when they were not read.
	Pods []*corev1.Pod
	// Gone is a part whose deletion the event reported: it existed, so it is
	// not one that another event recorded and is still creating.
	Gone string
	// Unreadable says why the task stored on the anchor cannot be read (it
	// does not decode or does not fit the schema); read at submission only.
	Unreadable string
}

// ActionKind is what an action does.
type ActionKind string

const (
	CreatePVC ActionKind = "create-pvc"
	CreateJob ActionKind = "create-job"
	// FailJob sets the job's activeDeadlineSeconds to 1, so that Kubernetes
	// deletes its pods and marks it Failed; if the API rejects that, the job
	// is deleted instead (recorded first) and the task stops.
	FailJob ActionKind = "fail-job"
	// DeleteJob deletes a job (foreground, so that it is gone only once its
	// pods are).
	DeleteJob ActionKind = "delete-job"
	DeletePVC ActionKind = "delete-pvc"
	// ReleasePVC removes the anchor's ownership of the PVC that
	// KEEP_FAILED_PVC keeps, so that deleting the task keeps it.
	ReleasePVC ActionKind = "release-pvc"
	// RecordOutputFileLogs reads the outputs filer's log and stores the
	// uploaded files as the job's output-file-logs annotation.
	RecordOutputFileLogs ActionKind = "record-output-file-logs"
	// RecordExecutorLog copies an ended executor's exit code, times and the
	// ends of its stdout and stderr from its last pod onto its job, so that
	// they outlive the pod.
	RecordExecutorLog ActionKind = "record-executor-log"
	// RecordPreemption adds pods the cluster took from an executor's job
	// to the job's count (taskmeta.AnnotationPreempted).
	RecordPreemption ActionKind = "record-preemption"
	// DeleteTask deletes the anchor, and with it everything it owns.
	DeleteTask ActionKind = "delete-task"
)

// Action is one write.
type Action struct {
	Kind   ActionKind `json:"kind"`
	Part   string     `json:"part,omitempty"`
	Reason string     `json:"reason,omitempty"`
	// Pods are the pods a RecordPreemption adds to the job's count,
	// comma-separated.
	Pods string `json:"pods,omitempty"`
	// State is the final state a FailJob means for the task, when not the
	// part's failure state (PREEMPTED).
	State string `json:"state,omitempty"`
	// Partial: the outputs filer a CreateJob starts uploads the outputs
	// that exist, after an executor failed (TESK_OUTPUTS_SKIP_MISSING).
	Partial bool `json:"partial,omitempty"`
}

// Note is a line for the log.
type Note struct {
	Level string // "info", "warn" or "error"
	Msg   string
}

// Final is the state a task ended in, written on its anchor last.
type Final struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Plan is a step's decision.
type Plan struct {
	// Progress, when set, is written on the anchor before any action.
	Progress *taskmeta.Progress
	Actions  []Action
	// Final, when set, is written on the anchor after the actions.
	Final *Final
	// State is the task's TES state once the plan is applied.
	State string
	Notes []Note
	// NeedsPods is set when the decision would look at pods it was not given.
	NeedsPods bool
	// TTL, when set, is the task's TTL to record on the anchor with the
	// plan's first write (taskmeta.TTLValue).
	TTL string
	// Claim, when set, is the place in its owner's share the task must
	// hold before it starts (before Progress is written): without room
	// there, the task waits, QUEUED, and nothing else is done.
	Claim *Claim
	// Release: the task ends, and gives back its place in its owner's
	// share (after Final is written).
	Release bool
	// Deadline, when set, is when the task's time limit ends
	// (TASK_MAX_RUN_SECONDS after it began): the jobs the plan creates
	// are given what is left of it as their activeDeadlineSeconds.
	Deadline time.Time
}

// Claim is a task's place in its owner's share: its owner (the anchor's
// creator-user-id label) and the cores it holds while it runs.
type Claim struct {
	Owner string
	Cores float64
}

// AddTTL adds the TTL the plan records to an anchor's annotations.
func (p Plan) AddTTL(ann map[string]string) {
	if p.TTL != "" {
		ann[taskmeta.AnnotationTTL] = p.TTL
	}
}

func (p *Plan) note(level, format string, a ...any) {
	p.Notes = append(p.Notes, Note{Level: level, Msg: fmt.Sprintf(format, a...)})
}

// Decide is the product's behaviour as one pure function: given what is on
// the cluster, the configuration and the time, what to do next. It is
// level-triggered: the same observation gives the same plan, whichever event
// asked, so duplicate, late and reordered events are harmless (behaviour §6).
// It reads as a few named policies: an ended task, a cancelled one, a
// submission, each started part's job (and its pods), and completion.
func Decide(obs Observed, cfg Config, now time.Time) Plan {
	plan := decide(obs, cfg, now)
	markPartialUpload(&plan, obs)
	if obs.Anchor.Annotations[taskmeta.AnnotationState] == "" {
		plan.Actions = recordLogs(plan.Actions, obs)
		markRecordedDone(&plan, obs)
	}
	if plan.Final != nil && cfg.Quota.On() && obs.Anchor.Labels[taskmeta.LabelCreator] != "" {
		plan.Release = true
	}
	if _, ok := obs.Anchor.Annotations[taskmeta.AnnotationTTL]; !ok && (plan.Progress != nil || plan.Final != nil) {
		// The first write on a task fixes its TTL (behaviour §4.2).
		plan.TTL = taskmeta.TTLValue(cfg.TaskTTL)
	}
	return plan
}

func decide(obs Observed, cfg Config, now time.Time) Plan {
	var plan Plan
	if state := obs.Anchor.Annotations[taskmeta.AnnotationState]; state != "" {
		return endedTask(plan, obs.Anchor, state, now)
	}
	prog, err := taskmeta.ParseProgress(obs.Anchor.Annotations[taskmeta.AnnotationProgress])
	if err != nil {
		plan.note("error", "%v", err)
		// What was started is unknown: treat the PVC as started, so that it
		// is deleted (or kept) as for any task that stops.
		prog = taskmeta.Progress{Started: []string{taskmeta.PartPVC}}
		return stop(plan, prog, cfg, tesv1.StateSystemError, fmt.Sprintf("the task's progress record is unreadable: %v", err))
	}
	if obs.Anchor.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled {
		// A cancel that comes once the last part has passed stops nothing:
		// the task's work is done and its outputs are uploaded, so it ends
		// COMPLETE, whichever of the cancel and the last job's end the
		// service saw first (behaviour §1.18).
		if prog.Parts != nil {
			if done := advance(plan, prog, obs, cfg, now); done.Final != nil && done.Final.State == tesv1.StateComplete {
				done.note("info", "%s", "The task was cancelled after its last step had passed: it ends COMPLETE")
				return done
			}
		}
		return cancel(plan, prog, obs, cfg, now)
	}
	if prog.Parts == nil {
		var ok bool
		if plan, ok = submission(plan, obs, cfg, now); !ok {
			return plan
		}
		prog = *plan.Progress
	}
	return advance(plan, prog, obs, cfg, now)
}

// endedTask: a task that ended stays as it is, until its TTL (fixed when it
// started) has passed since it ended; then it is deleted with all it owns
// (behaviour §4.2). A PVC its end could not delete is deleted again
// meanwhile (behaviour §1.9).
func endedTask(plan Plan, anchor metav1.ObjectMeta, state string, now time.Time) Plan {
	plan.State = state
	if ttl, ok := taskmeta.TaskTTLOf(anchor); ok {
		if ended, err := time.Parse(time.RFC3339, anchor.Annotations[taskmeta.AnnotationEnded]); err == nil && !now.Before(ended.Add(ttl)) {
			plan.Actions = append(plan.Actions, Action{Kind: DeleteTask, Reason: fmt.Sprintf("ended %s ago, its TTL is %d s", now.Sub(ended).Truncate(time.Second), int64(ttl.Seconds()))})
			return plan // the PVC goes with the task
		}
	}
	if left := anchor.Annotations[taskmeta.AnnotationPVCLeft]; left != "" {
		plan.Actions = append(plan.Actions, Action{Kind: DeletePVC, Part: taskmeta.PartPVC, Reason: "its deletion at the task's end failed: " + left})
	}
	return plan
}

// ranBefore reports whether a pod of the job ran or failed before.
func ranBefore(job *batchv1.Job, pods []*corev1.Pod) bool {
	if job.Status.Failed > 0 || job.Status.Succeeded > 0 {
		return true
	}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending {
			return true
		}
	}
	return false
}

func anyRunning(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning {
			return true
		}
	}
	return false
}

func failureDetail(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			return ": " + joinReason(c.Reason, c.Message)
		}
	}
	return ""
}

func joinReason(reason, message string) string {
	switch {
	case message == "":
		return reason
	case reason == "":
		return message
	}
	return reason + ": " + message
}

func secs(d time.Duration) string { return fmt.Sprintf("%d s", int64(d.Round(time.Second).Seconds())) }

func Capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func sortedParts(jobs map[string]*batchv1.Job) []string {
	parts := make([]string, 0, len(jobs))
	for p := range jobs {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return parts
}

// markRecordedDone: a step that ends a task COMPLETE records the last
// executors' logs before the final state; it first marks those executors
// done on the anchor, as a step that goes on to the next part does, so
// that another step of the same task (a job's second change comes a few
// milliseconds after its first) either reads them done or finds the
// anchor changed, and does not record the same logs again.
func markRecordedDone(plan *Plan, obs Observed) {
	if plan.Progress != nil || plan.Final == nil || plan.Final.State != tesv1.StateComplete {
		return
	}
	var parts []string
	for _, a := range plan.Actions {
		if a.Kind == RecordExecutorLog {
			parts = append(parts, a.Part)
		}
	}
	if len(parts) == 0 {
		return
	}
	prog, err := taskmeta.ParseProgress(obs.Anchor.Annotations[taskmeta.AnnotationProgress])
	if err != nil || prog.Parts == nil {
		return
	}
	next := prog.WithDone(parts...)
	plan.Progress = &next
}

// recordLogs adds a RecordExecutorLog for each executor whose job ended
// without a record and that no step went past yet, after the parts the plan creates (the task goes on
// first) and before anything it fails or deletes (a deleted job's pods take
// its log with them).
func recordLogs(actions []Action, obs Observed) []Action {
	// A job recorded done was passed by an earlier step, which recorded its
	// log (or warned): steps read only the jobs not done, and so does this.
	prog, _ := taskmeta.ParseProgress(obs.Anchor.Annotations[taskmeta.AnnotationProgress])
	var records []Action
	for _, part := range ExecutorParts(obs.Jobs) {
		j := obs.Jobs[part]
		if _, ok := j.Annotations[taskmeta.AnnotationExecutorLog]; ok || prog.IsDone(part) || taskmeta.IsGone(j) || taskmeta.StatusOf(j) == taskmeta.JobRunning {
			continue
		}
		records = append(records, Action{Kind: RecordExecutorLog, Part: part})
	}
	if len(records) == 0 {
		return actions
	}
	at := 0
	for i, a := range actions {
		if a.Kind == CreateJob || a.Kind == CreatePVC {
			at = i + 1
		}
	}
	return slices.Concat(actions[:at], records, actions[at:])
}
