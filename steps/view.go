package steps

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TesTask is the TES 1.1 view of a task (tesTask, the fields this service
// knows).
type TesTask struct {
	ID           string    `json:"id"`
	State        string    `json:"state"`
	CreationTime string    `json:"creation_time,omitempty"`
	Logs         []TaskLog `json:"logs"`
}

// TaskLog is TES 1.1 tesTaskLog.
type TaskLog struct {
	Logs       []ExecutorLog     `json:"logs"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	StartTime  string            `json:"start_time,omitempty"`
	EndTime    string            `json:"end_time,omitempty"`
	Outputs    []FileLog         `json:"outputs"`
	SystemLogs []string          `json:"system_logs,omitempty"`
}

// ExecutorLog is TES 1.1 tesExecutorLog, without stdout and stderr (the
// executors' pod logs hold them).
type ExecutorLog struct {
	StartTime string `json:"start_time,omitempty"`
	EndTime   string `json:"end_time,omitempty"`
	ExitCode  *int32 `json:"exit_code,omitempty"`
}

// BuildView derives the TES view from the cluster, as the TESK API derives
// it: the state from the anchor or the jobs, each executor's exit code and
// times from its job's last pod, the uploaded files from the outputs filer's
// annotation, and why the task stopped.
func BuildView(anchor metav1.ObjectMeta, jobs map[string]*batchv1.Job, pods []*corev1.Pod, cfg Config, now time.Time) TesTask {
	if pods == nil {
		pods = []*corev1.Pod{}
	}
	plan := Decide(Observed{Anchor: anchor, Jobs: jobs, Pods: pods}, cfg, now)
	state := viewState(plan)
	log := TaskLog{
		Logs:      []ExecutorLog{},
		Outputs:   []FileLog{},
		StartTime: rfc3339(anchor.CreationTimestamp.Time),
	}
	if ended := anchor.Annotations[taskmeta.AnnotationEnded]; ended != "" {
		log.EndTime = ended
	}
	if reason := anchor.Annotations[taskmeta.AnnotationReason]; reason != "" {
		log.SystemLogs = strings.Split(reason, "\n")
	}
	var execParts []string
	for part := range jobs {
		if _, ok := taskmeta.ExecutorIndex(part); ok {
			execParts = append(execParts, part)
		}
	}
	// In the executors' order: ex-100 comes after ex-99.
	sort.Slice(execParts, func(i, k int) bool {
		a, _ := taskmeta.ExecutorIndex(execParts[i])
		b, _ := taskmeta.ExecutorIndex(execParts[k])
		return a < b
	})
	for _, part := range execParts {
		log.Logs = append(log.Logs, executorLog(jobs[part], podsOfJob(pods, jobs[part].Name)))
	}
	if j := jobs[taskmeta.PartOutputsFiler]; j != nil {
		if v := j.Annotations[taskmeta.AnnotationOutputFileLogs]; v != "" {
			if files, err := ParseFileLogs(v); err == nil {
				log.Outputs = files
			}
		}
	}
	return TesTask{
		ID:           anchor.Name,
		State:        state,
		CreationTime: rfc3339(anchor.CreationTimestamp.Time),
		Logs:         []TaskLog{log},
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
	if plan.Final.State == StateCanceled {
		return StateCanceling
	}
	return StateRunning
}

func executorLog(job *batchv1.Job, pods []*corev1.Pod) ExecutorLog {
	var l ExecutorLog
	if job.Status.StartTime != nil {
		l.StartTime = rfc3339(job.Status.StartTime.Time)
	}
	if job.Status.CompletionTime != nil {
		l.EndTime = rfc3339(job.Status.CompletionTime.Time)
	}
	// The last pod that ran tells the executor's exit code.
	sort.Slice(pods, func(i, k int) bool { return pods[i].CreationTimestamp.Before(&pods[k].CreationTimestamp) })
	for i := len(pods) - 1; i >= 0; i-- {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				code := t.ExitCode
				l.ExitCode = &code
				l.StartTime = rfc3339(t.StartedAt.Time)
				l.EndTime = rfc3339(t.FinishedAt.Time)
				return l
			}
			if r := cs.State.Running; r != nil {
				l.StartTime = rfc3339(r.StartedAt.Time)
				return l
			}
		}
	}
	return l
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// View reads a task and returns its TES view.
func (r *Runner) View(ctx context.Context, ns, task string) (TesTask, error) {
	anchor, err := r.getAnchor(ctx, ns, task)
	if err != nil {
		return TesTask{}, err
	}
	sel := metav1.ListOptions{LabelSelector: taskSelector(task)}
	var jobs *batchv1.JobList
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		jobs, err = r.Client.BatchV1().Jobs(ns).List(ctx, sel)
		return err
	}); err != nil {
		return TesTask{}, err
	}
	var pods *corev1.PodList
	if err := r.call(ctx, func(ctx context.Context) (err error) {
		pods, err = r.Client.CoreV1().Pods(ns).List(ctx, sel)
		return err
	}); err != nil {
		return TesTask{}, err
	}
	return BuildView(anchor.ObjectMeta, jobsByPart(task, jobs.Items), podPointers(pods.Items), r.Config, r.now()), nil
}
