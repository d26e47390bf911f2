//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// A task that runs past TASK_MAX_RUN_SECONDS: its executor's job got what
// was left of the limit as its activeDeadlineSeconds, the Job controller
// fails it when that passes, and the task ends EXECUTOR_ERROR saying so,
// long before its executor would have ended.
func TestTimeLimitEndsATask(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.MaxRun = 8 * time.Second }})
	task := "task-timelimit"
	e.submit(task, taskJSON(executor(task, 0, map[string]string{"fate.tesk.test/delay": "300s"}, nil)))
	e.waitFor("the executor's job", 30*time.Second, func() bool { _, err := e.job(task + "-ex-00"); return err == nil })
	job, err := e.job(task + "-ex-00")
	if err != nil {
		t.Fatal(err)
	}
	if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d < 1 || *d > 8 {
		t.Errorf("the executor's activeDeadlineSeconds %v, want what is left of 8 s", d)
	}
	v := e.waitState(task, tesv1.StateExecutorError, 60*time.Second)
	if logs := strings.Join(v.Logs[0].SystemLogs, " "); !strings.Contains(logs, "DeadlineExceeded") && !strings.Contains(logs, "deadline") {
		t.Errorf("system_logs %q do not say the task ran out of time", logs)
	}
}
