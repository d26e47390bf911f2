package steps

import (
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// BuildView derives the TES view from the cluster, as the TESK API derives
// it: the state from the anchor or the jobs; one executor log per executor
// whose container started or whose job ended, in the executors' order, from
// the record its end left on the job or else from its last pod; the uploaded files from the
// outputs filer's annotation; and in the system logs, what the TES API
// noted at its creation (taskmeta.AnnotationSystemLog) and why it stopped. The logs keep the
// recorded ends of stdout and stderr; a reader that shows fewer fields
// (the TES API's MINIMAL and BASIC views) leaves them out.
func BuildView(anchor metav1.ObjectMeta, jobs map[string]*batchv1.Job, pods []*corev1.Pod, cfg Config, now time.Time) tesv1.Task {
	if pods == nil {
		pods = []*corev1.Pod{}
	}
	plan := Decide(Observed{Anchor: anchor, Jobs: jobs, Pods: pods}, cfg, now)
	state := viewState(plan)
	log := tesv1.TaskLog{
		Logs:      []tesv1.ExecutorLog{},
		Outputs:   []tesv1.OutputFileLog{},
		StartTime: rfc3339(anchor.CreationTimestamp.Time),
	}
	if ended := anchor.Annotations[taskmeta.AnnotationEnded]; ended != "" {
		log.EndTime = ended
	}
	if note := anchor.Annotations[taskmeta.AnnotationSystemLog]; note != "" {
		log.SystemLogs = append(log.SystemLogs, note)
	}
	if reason := anchor.Annotations[taskmeta.AnnotationReason]; reason != "" {
		log.SystemLogs = append(log.SystemLogs, strings.Split(reason, "\n")...)
	}
	for _, part := range ExecutorParts(jobs) {
		l := executorLog(jobs[part], podsOfJob(pods, jobs[part].Name))
		if l.StartTime == "" && taskmeta.StatusOf(jobs[part]) == taskmeta.JobRunning {
			// Its container has not started (no pod yet, or one that
			// waits for a node or its image): no log until it has an
			// exit code and a start. The executors run one after
			// another, so none after it has one either.
			break
		}
		log.Logs = append(log.Logs, l)
	}
	if j := jobs[taskmeta.PartOutputsFiler]; j != nil {
		if v := j.Annotations[taskmeta.AnnotationOutputFileLogs]; v != "" {
			if files, err := ParseFileLogs(v); err == nil {
				log.Outputs = files
			}
		}
	}
	return tesv1.Task{
		ID:           anchor.Name,
		State:        state,
		CreationTime: rfc3339(anchor.CreationTimestamp.Time),
		Logs:         []tesv1.TaskLog{log},
	}
}

// viewState is the TES state of a task whose decision is plan: the state
// once the plan is applied; while the task is ending but its last step (the
// PVC, the output file logs, the final state) is not written yet, RUNNING,
// or CANCELING for a cancel.
func viewState(plan Plan) string {
	if plan.Final == nil {
		return plan.State
	}
	if plan.Final.State == tesv1.StateCanceled {
		return tesv1.StateCanceling
	}
	return tesv1.StateRunning
}

// ExecutorParts are the executors' parts among a task's jobs, in the
// executors' order (ex-100 comes after ex-99): the order of the executor
// logs.
func ExecutorParts(jobs map[string]*batchv1.Job) []string {
	var parts []string
	for part, j := range jobs {
		if _, ok := taskmeta.ExecutorIndex(part); ok && j != nil {
			parts = append(parts, part)
		}
	}
	sort.Slice(parts, func(i, k int) bool {
		a, _ := taskmeta.ExecutorIndex(parts[i])
		b, _ := taskmeta.ExecutorIndex(parts[k])
		return a < b
	})
	return parts
}

// executorLog is an executor's log: the record its end left on the job, or
// what its last pod tells (its exit code once it ended; while it runs, 0
// and no end time; no start time before its container started). An ended
// job without a record or a pod that tells has the exit code
// UnknownExitCode, unless it completed (its container exited 0).
func executorLog(job *batchv1.Job, pods []*corev1.Pod) tesv1.ExecutorLog {
	if l, ok := RecordedLog(job); ok {
		return l
	}
	return ObservedLog(job, pods)
}

// ObservedLog is an executor's exit code and times as its job and pods tell
// them, without streams. Its start is its container's: the Job's own start
// (set by the Job controller before any pod exists, also when none can be
// created) stands in only for pods that ended and are gone.
func ObservedLog(job *batchv1.Job, pods []*corev1.Pod) tesv1.ExecutorLog {
	l, ended := podLog(pods)
	if !ended {
		switch taskmeta.StatusOf(job) {
		case taskmeta.JobComplete:
			l.ExitCode = 0
		case taskmeta.JobFailed:
			l.ExitCode = UnknownExitCode
		}
	}
	if l.StartTime == "" && len(pods) == 0 && job.Status.Succeeded+job.Status.Failed > 0 && job.Status.StartTime != nil {
		l.StartTime = rfc3339(job.Status.StartTime.Time)
	}
	if l.EndTime == "" {
		l.EndTime = rfc3339(jobEnd(job))
	}
	return l
}

// podLog is what the last pod that ran tells of its executor: the exit code
// and times of its container once it ended (true), its start while it runs.
func podLog(pods []*corev1.Pod) (tesv1.ExecutorLog, bool) {
	var l tesv1.ExecutorLog
	pods = slices.Clone(pods)
	sort.Slice(pods, func(i, k int) bool { return pods[i].CreationTimestamp.Before(&pods[k].CreationTimestamp) })
	for i := len(pods) - 1; i >= 0; i-- {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				l.ExitCode = t.ExitCode
				l.StartTime = rfc3339(t.StartedAt.Time)
				l.EndTime = rfc3339(t.FinishedAt.Time)
				return l, true
			}
			if r := cs.State.Running; r != nil {
				l.StartTime = rfc3339(r.StartedAt.Time)
				return l, false
			}
		}
	}
	return l, false
}

// LastPod is the job's pod created last, or nil.
func LastPod(pods []*corev1.Pod, job string) *corev1.Pod {
	var last *corev1.Pod
	for _, p := range podsOfJob(pods, job) {
		if last == nil || last.CreationTimestamp.Before(&p.CreationTimestamp) {
			last = p
		}
	}
	return last
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// jobEnd is when the job ended: its completion time, else when it first
// counted as complete or failed; zero while it runs.
func jobEnd(j *batchv1.Job) time.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.Time
	}
	var t time.Time
	for _, c := range j.Status.Conditions {
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet, batchv1.JobFailed, batchv1.JobFailureTarget:
			if c.Status == corev1.ConditionTrue && (t.IsZero() || c.LastTransitionTime.Time.Before(t)) {
				t = c.LastTransitionTime.Time
			}
		}
	}
	return t
}
