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
)

// TES task states (TES 1.1 tesState).
const (
	StateQueued        = "QUEUED"
	StateInitializing  = "INITIALIZING"
	StateRunning       = "RUNNING"
	StateComplete      = "COMPLETE"
	StateExecutorError = "EXECUTOR_ERROR"
	StateSystemError   = "SYSTEM_ERROR"
	StateCanceling     = "CANCELING"
	StateCanceled      = "CANCELED"
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
	// DeleteTask deletes the anchor, and with it everything it owns.
	DeleteTask ActionKind = "delete-task"
)

// Action is one write.
type Action struct {
	Kind   ActionKind `json:"kind"`
	Part   string     `json:"part,omitempty"`
	Reason string     `json:"reason,omitempty"`
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
	Progress *Progress
	Actions  []Action
	// Final, when set, is written on the anchor after the actions.
	Final *Final
	// State is the task's TES state once the plan is applied.
	State string
	Notes []Note
	// NeedsPods is set when the decision would look at pods it was not given.
	NeedsPods bool
	// TTL, when set, is the task's TTL to record on the anchor with the
	// plan's first write (TTLValue).
	TTL string
}

// addTTL adds the TTL the plan records to an anchor's annotations.
func (p Plan) addTTL(ann map[string]string) {
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
	if _, ok := obs.Anchor.Annotations[taskmeta.AnnotationTTL]; !ok && (plan.Progress != nil || plan.Final != nil) {
		// The first write on a task fixes its TTL (behaviour §4.2).
		plan.TTL = TTLValue(cfg.TaskTTL)
	}
	return plan
}

func decide(obs Observed, cfg Config, now time.Time) Plan {
	var plan Plan
	if state := obs.Anchor.Annotations[taskmeta.AnnotationState]; state != "" {
		return endedTask(plan, obs.Anchor, state, now)
	}
	prog, err := ParseProgress(obs.Anchor.Annotations[taskmeta.AnnotationProgress])
	if err != nil {
		plan.note("error", "%v", err)
		// What was started is unknown: treat the PVC as started, so that it
		// is deleted (or kept) as for any task that stops.
		prog = Progress{Started: []string{taskmeta.PartPVC}}
		return stop(plan, prog, cfg, StateSystemError, fmt.Sprintf("the task's progress record is unreadable: %v", err))
	}
	if obs.Anchor.Labels[taskmeta.LabelStatus] == taskmeta.StatusCancelled {
		return cancel(plan, prog, obs, cfg, now)
	}
	if prog.Parts == nil {
		var ok bool
		if plan, ok = submission(plan, obs); !ok {
			return plan
		}
		prog = *plan.Progress
	}
	return advance(plan, prog, obs, cfg, now)
}

// endedTask: a task that ended stays as it is, until its TTL (fixed when it
// started) has passed since it ended; then it is deleted with all it owns
// (behaviour §4.2).
func endedTask(plan Plan, anchor metav1.ObjectMeta, state string, now time.Time) Plan {
	plan.State = state
	ttl, ok := TaskTTLOf(anchor)
	if !ok {
		return plan
	}
	if ended, err := time.Parse(time.RFC3339, anchor.Annotations[taskmeta.AnnotationEnded]); err == nil && !now.Before(ended.Add(ttl)) {
		plan.Actions = append(plan.Actions, Action{Kind: DeleteTask, Reason: fmt.Sprintf("ended %s ago, its TTL is %d s", now.Sub(ended).Truncate(time.Second), int64(ttl.Seconds()))})
	}
	return plan
}

// submission starts a task: its whole sequence of parts is recorded. A task
// that can never run ends at once with SYSTEM_ERROR and why (behaviour §1.1,
// §8.5). ok is false when the plan is final.
func submission(plan Plan, obs Observed) (Plan, bool) {
	if obs.Unreadable != "" {
		plan.note("error", "%s", obs.Unreadable)
		plan.Final = &Final{State: StateSystemError, Reason: obs.Unreadable}
		plan.State = StateSystemError
		return plan, false
	}
	if obs.Spec == nil {
		plan.State = StateQueued
		return plan, false
	}
	if err := obs.Spec.Refusal(); err != nil {
		plan.note("error", "%v", err)
		plan.Final = &Final{State: StateSystemError, Reason: err.Error()}
		plan.State = StateSystemError
		return plan, false
	}
	prog := Progress{Parts: Parts(obs.Spec)}
	plan.Progress = &prog
	return plan, true
}

// advance walks the task's parts in order: it looks at each started part's
// job, starts the next part once the ones before it passed, and completes the
// task after the last.
func advance(plan Plan, prog Progress, obs Observed, cfg Config, now time.Time) Plan {
	var toStart, passed []string
	state := StateQueued
	for _, part := range prog.Parts {
		if !prog.IsStarted(part) {
			toStart = append(toStart, part)
			if part == taskmeta.PartPVC {
				continue // the PVC and the first job start together
			}
			break
		}
		if part == taskmeta.PartPVC {
			if reason, ok := prog.EndedReason(part); ok {
				// The API server rejected the claim (behaviour §8.6).
				return stop(plan, prog, cfg, StateSystemError, reason)
			}
			if prog.inLastBatch(part, obs.Event) {
				plan.Actions = append(plan.Actions, Action{Kind: CreatePVC, Part: part})
			}
			continue
		}
		state = phaseOf(part)
		if prog.IsDone(part) {
			continue
		}
		var ok bool
		if plan, ok = partJob(plan, prog, obs, cfg, now, part, state); !ok {
			return plan
		}
		passed = append(passed, part)
	}

	if len(toStart) > 0 {
		next := prog.withDone(passed...).withStarted(obs.Event, now, toStart...)
		plan.Progress = &next
		for _, part := range toStart {
			kind := CreateJob
			if part == taskmeta.PartPVC {
				kind = CreatePVC
			}
			plan.Actions = append(plan.Actions, Action{Kind: kind, Part: part})
		}
		plan.State = phaseOf(toStart[len(toStart)-1])
		return plan
	}
	return complete(plan, prog, obs)
}

// partJob looks at a started part's job. ok is true when the part passed
// (its job completed, or failed ignoring errors); otherwise the plan is the
// step's: wait, fail the job, or stop the task.
func partJob(plan Plan, prog Progress, obs Observed, cfg Config, now time.Time, part, state string) (Plan, bool) {
	task := obs.Anchor.Name
	job := obs.Jobs[part]
	if reason, ok := prog.EndedReason(part); ok {
		// The service ended this part itself: the task stops, also when
		// the job then ended on its own (in doubt, the task stops). A job
		// of the task that still runs is one whose deletion failed: delete
		// it again, unless its deletion was rejected (behaviour §1.13).
		if _, kept := prog.KeptReason(part); !kept && job != nil && !isGone(job) && taskmeta.StatusOf(job) == taskmeta.JobRunning && ownedBy(job, obs.Anchor.UID) {
			plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: reason})
		}
		return stop(plan, prog, cfg, StateSystemError, reason), false
	}
	if job == nil || isGone(job) {
		if job == nil && prog.inLastBatch(part, obs.Event) {
			// A redelivery of the event that recorded the part: its first
			// attempt may have stopped before it created it.
			plan.Actions = append(plan.Actions, Action{Kind: CreateJob, Part: part})
			plan.State = state
			return plan, false
		}
		if job == nil && obs.Gone != part && prog.Last != nil && slices.Contains(prog.Last.Parts, part) {
			if now.Sub(prog.Last.At) < recordedMissingGrace {
				// Recorded moments ago by another event, which may still be
				// creating it.
				plan.State = state
				return plan, false
			}
			// Past the grace, a job of the last record with no sign that it
			// ever existed (no deletion reported, none of its pods left)
			// was never created: the step that recorded it was cut short
			// and its event is not coming back (behaviour §6.5).
			if obs.Pods == nil {
				return waitForPods(plan, state), false
			}
			if len(podsOfJob(obs.Pods, taskmeta.ObjectName(task, part))) == 0 {
				return redo(plan, prog, obs, now, state), false
			}
		}
		msg := fmt.Sprintf("%s was deleted while it ran", capitalize(describe(task, part)))
		plan.note("error", "%s", msg)
		return stop(plan, prog, cfg, StateSystemError, msg), false
	}
	switch taskmeta.StatusOf(job) {
	case taskmeta.JobComplete:
		return plan, true
	case taskmeta.JobFailed:
		return failedJob(plan, prog, cfg, now, part, job, state)
	}
	if EndedByService(job) {
		if at, ok := failedAt(job); ok && now.Sub(at) >= cfg.PodTimeout {
			msg := fmt.Sprintf("Job '%s' was failed (%s) but Kubernetes didn't mark it Failed within %s; it is kept", job.Name, job.Annotations[taskmeta.AnnotationFailed], secs(cfg.PodTimeout))
			plan.note("error", "%s", msg)
			return stop(plan, prog, cfg, failedState(part), msg), false
		}
		plan.State = state
		return plan, false
	}
	if obs.Pods == nil {
		return waitForPods(plan, state), false
	}
	return checkPods(plan, prog, obs, cfg, now, part, job, state), false
}

// waitForPods: the decision needs the task's pods, which the step did not
// read; a step that reads them (a pod's event, the sweep) decides.
func waitForPods(plan Plan, state string) Plan {
	plan.NeedsPods = true
	plan.State = state
	return plan
}

// redo records the last record's parts again, as this step's, and creates
// them: the PVC (AlreadyExists if it was created) and the jobs not done.
func redo(plan Plan, prog Progress, obs Observed, now time.Time, state string) Plan {
	var parts []string
	for _, part := range prog.Last.Parts {
		if !prog.IsDone(part) {
			parts = append(parts, part)
		}
	}
	next := prog.withStarted(obs.Event, now, parts...)
	plan.Progress = &next
	for _, part := range parts {
		kind := CreateJob
		if part == taskmeta.PartPVC {
			kind = CreatePVC
		}
		plan.Actions = append(plan.Actions, Action{Kind: kind, Part: part})
	}
	plan.note("warn", "%s recorded as started %s ago was never created (the step that recorded it was cut short and its event did not come again); creating it now",
		capitalize(strings.Join(describeAll(obs.Anchor.Name, parts), ", ")), secs(now.Sub(prog.Last.At)))
	plan.State = state
	return plan
}

func describeAll(task string, parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = describe(task, p)
	}
	return out
}

// failedJob: a failed job stops the task, unless it is an executor's that
// ignores errors and that the service did not end itself; that one passes
// once Kubernetes marked it Failed (behaviour §1.5, §1.6, §1.10).
func failedJob(plan Plan, prog Progress, cfg Config, now time.Time, part string, job *batchv1.Job, state string) (Plan, bool) {
	if _, isExec := taskmeta.ExecutorIndex(part); isExec && IgnoresErrors(job) && !EndedByService(job) && !prog.IsFailing(part) {
		if IsMarkedFailed(job) {
			plan.note("warn", "Executor job '%s' failed; ignoring the error", job.Name)
			return plan, true
		}
		if since, ok := failureSince(job); ok && now.Sub(since) >= cfg.PodTimeout {
			msg := fmt.Sprintf("Executor job '%s' failed (ignore-error) but Kubernetes didn't mark it Failed within %s", job.Name, secs(cfg.PodTimeout))
			plan.note("error", "%s", msg)
			return stop(plan, prog, cfg, StateSystemError, msg), false
		}
		plan.State = state
		return plan, false // its pods are still ending
	}
	msg := fmt.Sprintf("Job '%s' failed%s", job.Name, failureDetail(job))
	if why := job.Annotations[taskmeta.AnnotationFailed]; why != "" {
		// The service failed it: say why.
		msg = fmt.Sprintf("Job '%s' was failed: %s", job.Name, why)
	}
	plan.note("info", "%s", msg)
	return stop(plan, prog, cfg, failedState(part), msg), false
}

// complete ends a task whose parts all passed: the uploaded files recorded,
// the PVC deleted, COMPLETE written (behaviour §1.3, §1.7).
func complete(plan Plan, prog Progress, obs Observed) Plan {
	if slices.Contains(prog.Parts, taskmeta.PartOutputsFiler) {
		if j := obs.Jobs[taskmeta.PartOutputsFiler]; j != nil && j.Annotations[taskmeta.AnnotationOutputFileLogs] == "" {
			plan.Actions = append(plan.Actions, Action{Kind: RecordOutputFileLogs, Part: taskmeta.PartOutputsFiler})
		}
	}
	if prog.IsStarted(taskmeta.PartPVC) {
		plan.Actions = append(plan.Actions, Action{Kind: DeletePVC, Part: taskmeta.PartPVC})
	}
	plan.Final = &Final{State: StateComplete}
	plan.State = StateComplete
	return plan
}

// checkPods fails a running job whose pods cannot start within the pod
// timeout, and ends a task whose pod was not scheduled within
// TESK_MAX_QUEUE_SECONDS.
func checkPods(plan Plan, prog Progress, obs Observed, cfg Config, now time.Time, part string, job *batchv1.Job, state string) Plan {
	pods := podsOfJob(obs.Pods, job.Name)
	queued := false
	for _, pod := range pods {
		if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
			continue
		}
		if reason, message := taskmeta.CannotStart(pod); reason != "" {
			since := pod.CreationTimestamp.Time
			if pod.Status.StartTime != nil {
				since = pod.Status.StartTime.Time
			}
			if now.Sub(since) >= cfg.PodTimeout {
				msg := fmt.Sprintf("Pod '%s' of job '%s' couldn't start within %s: %s", pod.Name, job.Name, secs(cfg.PodTimeout), joinReason(reason, message))
				plan.note("error", "%s", msg)
				return failJob(plan, prog, part, msg, state)
			}
			continue
		}
		if message, ok := taskmeta.Unschedulable(pod); ok {
			queued = true
			if cfg.MaxQueue > 0 && now.Sub(pod.CreationTimestamp.Time) >= cfg.MaxQueue {
				msg := fmt.Sprintf("Pod '%s' of job '%s' wasn't scheduled within %s: %s", pod.Name, job.Name, secs(cfg.MaxQueue), message)
				plan.note("error", "%s", msg)
				if taskmeta.IsFilerPart(part) || ranBefore(job, pods) {
					return failJob(plan, prog, part, msg, state)
				}
				next := prog.withEnded(part, msg)
				plan.Progress = &next
				plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: msg})
				return stop(plan, next, cfg, StateSystemError, msg)
			}
		}
	}
	if queued && state == StateRunning && job.Status.Succeeded == 0 && job.Status.Failed == 0 && !anyRunning(pods) {
		state = StateQueued
	}
	plan.State = state
	return plan
}

// failJob fails a part's job, recorded first: in doubt (the patch got an
// error, then the job failed on its own), the task stops all the same.
func failJob(plan Plan, prog Progress, part, reason, state string) Plan {
	if !prog.IsFailing(part) {
		next := prog.withFailing(part)
		plan.Progress = &next
	}
	plan.Actions = append(plan.Actions, Action{Kind: FailJob, Part: part, Reason: reason})
	plan.State = state
	return plan
}

// cancel stops a cancelled task: no further job, the running jobs deleted
// (recorded first, as the service's own ends), the jobs that ended kept;
// CANCELED once the deleted jobs are gone (behaviour §1.18). A part recorded
// moments ago whose job does not exist yet may still be being created by
// another step: the task stays CANCELING until it shows (and is deleted) or
// the grace period passes. A job whose deletion was rejected is kept, and one
// still terminating --pod-timeout after its deletion is waited for no more:
// the task ends CANCELED all the same, saying so (behaviour §8.3).
func cancel(plan Plan, prog Progress, obs Observed, cfg Config, now time.Time) Plan {
	going := false
	next := prog
	var lines []string
	for _, part := range sortedParts(obs.Jobs) {
		job := obs.Jobs[part]
		if _, kept := prog.KeptReason(part); kept {
			continue // stop says why
		}
		if isGone(job) {
			if now.Sub(job.DeletionTimestamp.Time) >= cfg.PodTimeout {
				lines = append(lines, fmt.Sprintf("Job '%s' was still terminating %s after it was deleted", job.Name, secs(cfg.PodTimeout)))
				continue
			}
			going = true
			continue
		}
		if taskmeta.StatusOf(job) == taskmeta.JobRunning {
			next = next.withEnded(part, "Task cancelled")
			plan.Actions = append(plan.Actions, Action{Kind: DeleteJob, Part: part, Reason: "task cancelled"})
			going = true
		}
	}
	for _, part := range prog.Running() {
		_, ended := prog.EndedReason(part)
		if obs.Jobs[part] == nil && !ended && prog.Last != nil && slices.Contains(prog.Last.Parts, part) && now.Sub(prog.Last.At) < recordedMissingGrace {
			going = true
		}
	}
	if len(next.Ended) != len(prog.Ended) {
		plan.Progress = &next
	}
	if going {
		plan.State = StateCanceling
		return plan
	}
	if len(lines) > 0 {
		plan.note("warn", "%s", strings.Join(lines, "; "))
	}
	return stop(plan, prog, cfg, StateCanceled, strings.Join(append([]string{"Task cancelled"}, lines...), "\n"))
}

// stop ends the task: its PVC deleted (kept and released from the task with
// KEEP_FAILED_PVC), the final state written last, with why: one line, and a
// line for each job whose deletion was rejected (TES system_logs).
func stop(plan Plan, prog Progress, cfg Config, state, reason string) Plan {
	if prog.IsStarted(taskmeta.PartPVC) {
		if cfg.KeepFailedPVC {
			plan.Actions = append(plan.Actions, Action{Kind: ReleasePVC, Part: taskmeta.PartPVC})
		} else {
			plan.Actions = append(plan.Actions, Action{Kind: DeletePVC, Part: taskmeta.PartPVC})
		}
	}
	for _, k := range prog.Kept {
		reason += "\n" + k.Reason
	}
	plan.Final = &Final{State: state, Reason: reason}
	plan.State = state
	return plan
}

// phaseOf is the TES state while a part runs.
func phaseOf(part string) string {
	if part == taskmeta.PartPVC || part == taskmeta.PartInputsFiler {
		return StateInitializing
	}
	return StateRunning
}

// failedState is the TES state of a task stopped by a failed part: an
// executor's failure is the executor's error, a filer's the system's.
func failedState(part string) string {
	if _, ok := taskmeta.ExecutorIndex(part); ok {
		return StateExecutorError
	}
	return StateSystemError
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

// podsOfJob returns the pods the Job controller created for the job.
func podsOfJob(pods []*corev1.Pod, job string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.Labels[batchv1.JobNameLabel] == job || p.Labels["job-name"] == job {
			out = append(out, p)
		}
	}
	return out
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

func capitalize(s string) string {
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
