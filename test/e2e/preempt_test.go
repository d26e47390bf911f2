//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// An executor's pod evicted through the Eviction API (as a node drain or
// the cluster autoscaler evicts it) on the real node: Kubernetes runs it
// again without spending the executor's retries (backoffLimit 0), the
// handler counts it on the job, and the task completes; a job that loses
// more pods than EXECUTOR_MAX_PREEMPTIONS (1 here) ends the task PREEMPTED.
// A command that exits non-zero still ends it EXECUTOR_ERROR at once
// (TestRealNodeExitCodes, under the same pod failure policy).
func TestRealNodeEvictedExecutorRunsAgain(t *testing.T) {
	e := newRealEnv(t, 60*time.Second, func(c *steps.Config) { c.MaxPreemptions = 1 })
	t.Run("evicted once: run again, COMPLETE", func(t *testing.T) {
		task := "task-realevict1"
		e.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "echo started; sleep 12; echo done"))))
		first := e.evictRunningPod(task+"-ex-00", "")
		v := e.waitState(task, tesv1.StateComplete, 3*time.Minute)
		j, err := e.job(task + "-ex-00")
		if err != nil {
			t.Fatal(err)
		}
		if got := taskmeta.PreemptedPods(j); !slices.Equal(got, []string{first}) {
			t.Errorf("pods counted as taken away %v, want [%s]", got, first)
		}
		if j.Status.Failed != 0 || j.Status.Succeeded != 1 {
			t.Errorf("job status failed %d, succeeded %d; want 0 and 1 (the eviction spends no retry)", j.Status.Failed, j.Status.Succeeded)
		}
		if n := len(v.Logs[0].Logs); n != 1 || v.Logs[0].Logs[0].ExitCode != 0 || !strings.Contains(v.Logs[0].Logs[0].Stdout, "done") {
			t.Errorf("executor logs %+v, want the rerun's, exit code 0 and its output", v.Logs[0].Logs)
		}
	})
	t.Run("evicted twice, past the bound: PREEMPTED", func(t *testing.T) {
		task := "task-realevict2"
		e.submit(task, noIO(taskJSON(realExecutor(task, 0, "busybox", "echo started; exec sleep 600"))))
		first := e.evictRunningPod(task+"-ex-00", "")
		second := e.evictRunningPod(task+"-ex-00", first)
		v := e.waitState(task, tesv1.StatePreempted, 3*time.Minute)
		logs := systemLogs(v)
		if !strings.Contains(logs, "EXECUTOR_MAX_PREEMPTIONS") || !strings.Contains(logs, task+"-ex-00") {
			t.Errorf("system_logs %q: want the job and the setting named", logs)
		}
		j, err := e.job(task + "-ex-00")
		if err != nil {
			t.Fatal(err)
		}
		if got := taskmeta.PreemptedPods(j); !slices.Equal(got, []string{first, second}) {
			t.Errorf("pods counted as taken away %v, want [%s %s]", got, first, second)
		}
		e.waitFor("the job's pods to stop", time.Minute, func() bool {
			for _, p := range e.podsOf(task + "-ex-00") {
				if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
					return false
				}
			}
			return true
		})
	})
}

// evictRunningPod waits for a pod of the job, other than not, whose
// container runs, evicts it through the Eviction API (a second's grace),
// and returns its name.
func (e *env) evictRunningPod(job, not string) string {
	e.t.Helper()
	var name string
	e.waitFor("a running pod of "+job, 2*time.Minute, func() bool {
		for _, p := range e.podsOf(job) {
			if p.Name == not || p.DeletionTimestamp != nil {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					name = p.Name
					return true
				}
			}
		}
		return false
	})
	grace := int64(1)
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace}}
	if err := e.c.Client.CoreV1().Pods(e.ns).EvictV1(context.Background(), ev); err != nil {
		e.t.Fatalf("evict %s: %v", name, err)
	}
	return name
}
