package tes

import (
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Kinds of a step.
const (
	StepVolume   = "volume"
	StepInputs   = "inputs"
	StepExecutor = "executor"
	StepOutputs  = "outputs"
)

// Statuses of a step.
const (
	StepPending   = "pending"   // not created yet
	StepWaiting   = "waiting"   // created, its container not started
	StepRunning   = "running"   // its container runs (the volume: it exists)
	StepSucceeded = "succeeded" // ended well (the volume: the task ended)
	StepFailed    = "failed"    // ended with an error
	StepDeleted   = "deleted"   // the service deleted it before it ended
	StepSkipped   = "skipped"   // never created: the task ended before
)

// TaskStep is one part of a task (the volume, the inputs filer, an
// executor, the outputs filer) and its times, RFC 3339: created when its
// object was created, started when its container started (waiting in
// between), ended when it ended.
type TaskStep struct {
	Part     string `json:"part"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Executor *int   `json:"executor,omitempty"`
	Status   string `json:"status"`
	Created  string `json:"created,omitempty"`
	Started  string `json:"started,omitempty"`
	Ended    string `json:"ended,omitempty"`
	ExitCode *int32 `json:"exit_code,omitempty"`
	// Reason says why the service ended the step itself, when it did.
	Reason string `json:"reason,omitempty"`
}

// stepTimes are a step's times while they are derived.
type stepTimes struct {
	created, started, ended time.Time
}

// Timeline derives the task's steps and their times from its anchor (the
// parts and what was started, the end), its jobs and pods (when each was
// created, started and ended), and its Events (when a job that is gone was
// created and deleted, when the task started). The volume's bar runs from the
// task's start to its end; a job's from its creation, waiting until its
// container started, to its end.
func Timeline(anchor metav1.ObjectMeta, jobs []batchv1.Job, pods []corev1.Pod, kubeEvents []TaskKubeEvent) []TaskStep {
	id := anchor.Name
	tl := timeline{
		id:         id,
		finalState: anchor.Annotations[taskmeta.AnnotationState],
		byPart:     map[string]*batchv1.Job{},
		pods:       pods,
		events:     readTaskEvents(id, kubeEvents),
	}
	tl.prog, _ = taskmeta.ParseProgress(anchor.Annotations[taskmeta.AnnotationProgress])
	tl.ended, _ = time.Parse(time.RFC3339, anchor.Annotations[taskmeta.AnnotationEnded])
	for i := range jobs {
		if t, part, ok := taskmeta.SplitJobName(jobs[i].Name); ok && t == id {
			tl.byPart[part] = &jobs[i]
		}
	}
	parts := tl.prog.Parts
	if len(parts) == 0 {
		parts = tl.prog.Started
	}
	out := make([]TaskStep, 0, len(parts))
	for _, part := range parts {
		out = append(out, tl.step(part))
	}
	return out
}

// timeline is what Timeline derives the steps from: the task's anchor (its
// progress, end and final state), its jobs by part and its pods, and what
// its Events tell.
type timeline struct {
	id, finalState string
	prog           taskmeta.Progress
	ended          time.Time
	byPart         map[string]*batchv1.Job
	pods           []corev1.Pod
	events         taskEvents
}

// taskEvents are what a task's own Events tell: its start; each job's
// creation, failure and deletion, by part.
type taskEvents struct {
	started                  time.Time
	created, failed, deleted map[string]time.Time
}

// readTaskEvents reads the Events of the task id's anchor.
func readTaskEvents(id string, kubeEvents []TaskKubeEvent) taskEvents {
	ev := taskEvents{created: map[string]time.Time{}, failed: map[string]time.Time{}, deleted: map[string]time.Time{}}
	for _, e := range kubeEvents {
		if e.Object != "ConfigMap/"+id {
			continue
		}
		at := e.at
		if at.IsZero() {
			at, _ = time.Parse(time.RFC3339Nano, e.Time)
		}
		if e.Reason == taskmeta.ReasonStarted && ev.started.IsZero() {
			ev.started = at
		}
		job, ok := taskmeta.ParseJobNote(e.Message)
		if !ok {
			continue
		}
		_, part, ok := taskmeta.SplitJobName(job)
		if !ok {
			continue
		}
		switch e.Reason {
		case taskmeta.ReasonJobCreated:
			if _, seen := ev.created[part]; !seen {
				ev.created[part] = at
			}
		case taskmeta.ReasonJobFailed:
			ev.failed[part] = at
		case taskmeta.ReasonJobDeleted:
			ev.deleted[part] = at
		}
	}
	return ev
}

// step is the part's step: its kind, why the service ended it, and its
// status and times from the volume's, its job's or, when that is gone,
// the Events'.
func (tl *timeline) step(part string) TaskStep {
	st := TaskStep{Part: part, Name: taskmeta.ObjectName(tl.id, part)}
	st.Kind, st.Executor = stepKind(part)
	if reason, ok := tl.prog.EndedReason(part); ok {
		st.Reason = reason
	}
	if !tl.prog.IsStarted(part) {
		st.Status = StepPending
		if tl.finalState != "" {
			st.Status = StepSkipped
		}
		return st
	}
	var tt stepTimes
	if part == taskmeta.PartPVC {
		tl.volumeTimes(&st, &tt)
	} else if j := tl.byPart[part]; j != nil {
		tt.created = tl.events.created[part]
		if tt.created.IsZero() {
			tt.created = j.CreationTimestamp.Time
		}
		jobTimes(&st, &tt, j, podsOf(tl.pods, j.Name))
	} else {
		tl.goneJobTimes(&st, &tt, part)
	}
	tt.clamp()
	st.Created, st.Started, st.Ended = formatTime(tt.created), formatTime(tt.started), formatTime(tt.ended)
	return st
}

// stepKind is the kind of a part's step, and an executor's index.
func stepKind(part string) (kind string, executor *int) {
	switch part {
	case taskmeta.PartPVC:
		return StepVolume, nil
	case taskmeta.PartInputsFiler:
		return StepInputs, nil
	case taskmeta.PartOutputsFiler:
		return StepOutputs, nil
	}
	if i, ok := taskmeta.ExecutorIndex(part); ok {
		return StepExecutor, &i
	}
	return StepExecutor, nil
}

// volumeTimes: the volume runs from the task's start (else its first job's
// creation) to its end.
func (tl *timeline) volumeTimes(st *TaskStep, tt *stepTimes) {
	tt.created = tl.events.started
	if tt.created.IsZero() {
		tt.created = firstJobTime(tl.byPart, tl.events.created)
	}
	tt.started = tt.created
	st.Status = StepRunning
	if !tl.ended.IsZero() {
		tt.ended, st.Status = tl.ended, StepSucceeded
	}
}

// goneJobTimes are the times of a job that is gone, deleted by the service
// or with its task, from the Events and the progress.
func (tl *timeline) goneJobTimes(st *TaskStep, tt *stepTimes, part string) {
	ev := tl.events
	tt.created = ev.created[part]
	switch {
	case !ev.deleted[part].IsZero():
		st.Status, tt.ended = StepDeleted, ev.deleted[part]
	case tl.prog.IsDone(part):
		st.Status = StepSucceeded
	case !ev.failed[part].IsZero():
		st.Status, tt.ended = StepFailed, ev.failed[part]
	default:
		st.Status = StepDeleted
	}
	if tt.ended.IsZero() {
		tt.ended = tl.ended
	}
}

// firstJobTime is the earliest job creation the Events tell, else the
// earliest job's creation.
func firstJobTime(jobs map[string]*batchv1.Job, created map[string]time.Time) time.Time {
	var first time.Time
	for _, t := range created {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	for _, j := range jobs {
		if t := j.CreationTimestamp.Time; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

// podsOf is the pods of the named job, oldest first.
func podsOf(pods []corev1.Pod, job string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		if pods[i].Labels[batchv1.JobNameLabel] == job {
			out = append(out, &pods[i])
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].CreationTimestamp.Before(&out[k].CreationTimestamp) })
	return out
}

// jobTimes reads a job's status and its pods': the first container start,
// the last pod's end and exit code.
func jobTimes(st *TaskStep, tt *stepTimes, j *batchv1.Job, pods []*corev1.Pod) {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			var t metav1.Time
			switch {
			case cs.State.Running != nil:
				t = cs.State.Running.StartedAt
			case cs.State.Terminated != nil:
				t = cs.State.Terminated.StartedAt
			}
			if !t.IsZero() && (tt.started.IsZero() || t.Time.Before(tt.started)) {
				tt.started = t.Time
			}
		}
	}
	if n := len(pods); n > 0 {
		for _, cs := range pods[n-1].Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				code := term.ExitCode
				st.ExitCode = &code
				tt.ended = term.FinishedAt.Time
			}
		}
	}
	switch taskmeta.StatusOf(j) {
	case taskmeta.JobComplete:
		st.Status = StepSucceeded
		if j.Status.CompletionTime != nil && tt.ended.IsZero() {
			tt.ended = j.Status.CompletionTime.Time
		}
	case taskmeta.JobFailed:
		st.Status = StepFailed
		if tt.ended.IsZero() {
			for _, c := range j.Status.Conditions {
				if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
					tt.ended = c.LastTransitionTime.Time
					break
				}
			}
		}
	default:
		switch {
		case st.ExitCode != nil && *st.ExitCode != 0:
			st.Status = StepFailed
		case st.ExitCode != nil:
			st.Status = StepSucceeded
		case !tt.started.IsZero():
			st.Status = StepRunning
		default:
			st.Status = StepWaiting
		}
	}
	if j.DeletionTimestamp != nil && st.Status != StepSucceeded && st.Status != StepFailed {
		st.Status = StepDeleted
		tt.ended = j.DeletionTimestamp.Time
	}
}

// clamp keeps created <= started <= ended: the objects' times are in
// seconds, the Events' in microseconds.
func (tt *stepTimes) clamp() {
	if !tt.started.IsZero() && !tt.created.IsZero() && tt.started.Before(tt.created) {
		tt.started = tt.created
	}
	from := tt.started
	if from.IsZero() {
		from = tt.created
	}
	if !tt.ended.IsZero() && !from.IsZero() && tt.ended.Before(from) {
		tt.ended = from
	}
}
