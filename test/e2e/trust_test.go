//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// An executor whose spec asks for more than a task may (behaviour §8.8)
// creates nothing, from an event's input as from a ConfigMap written by
// something else than the TES API: the task ends SYSTEM_ERROR naming the
// field; and without TRUST_EVENTS an event's input is refused before
// anything is written.
func TestForbiddenExecutorCreatesNothing(t *testing.T) {
	privileged := func(task string) map[string]any {
		ex := executor(task, 0, nil, nil)
		c := ex["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["securityContext"] = map[string]any{"privileged": true}
		return taskJSON(ex)
	}
	nothingCreated := func(e *env, task string) {
		e.t.Helper()
		ctx := context.Background()
		jobs, err := e.c.Client.BatchV1().Jobs(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "taskmaster-name=" + task})
		if err != nil || len(jobs.Items) != 0 {
			e.t.Errorf("jobs %v, %v; want none", jobs, err)
		}
		pvcs, err := e.c.Client.CoreV1().PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "taskmaster-name=" + task})
		if err != nil || len(pvcs.Items) != 0 {
			e.t.Errorf("PVCs %v, %v; want none", pvcs, err)
		}
	}
	e := newEnv(t, envOptions{})
	t.Run("event", func(t *testing.T) {
		task := "task-privileged01"
		code, body := e.post("task.submitted", map[string]any{"task": task, "namespace": e.ns, "input": privileged(task)})
		if code != http.StatusBadRequest || !strings.Contains(body, "securityContext.privileged") {
			t.Errorf("answer %d %s, want 400 naming securityContext.privileged", code, body)
		}
		v := e.waitState(task, tesv1.StateSystemError, 10*time.Second)
		if msg := strings.Join(v.Logs[0].SystemLogs, " "); !strings.Contains(msg, "executors[0]: spec.template.spec.containers[0].securityContext.privileged") {
			t.Errorf("system_logs %q", msg)
		}
		nothingCreated(e, task)
	})
	t.Run("anchor", func(t *testing.T) {
		task := "task-privileged02"
		raw, _ := json.Marshal(privileged(task))
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: task, Namespace: e.ns, Labels: map[string]string{"taskmaster-name": task}},
			BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)},
		}
		if _, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if code, body := e.post("task.submitted", map[string]any{"task": task, "namespace": e.ns}); code != http.StatusBadRequest {
			t.Errorf("answer %d %s, want 400", code, body)
		}
		e.waitState(task, tesv1.StateSystemError, 10*time.Second)
		nothingCreated(e, task)
	})
	t.Run("inline input off", func(t *testing.T) {
		off := newEnv(t, envOptions{config: func(c *steps.Config) { c.TrustEvents = false }})
		task := "task-inline01"
		code, body := off.post("task.submitted", map[string]any{"task": task, "namespace": off.ns, "input": noIO(taskJSON(executor(task, 0, nil, nil)))})
		if code != http.StatusBadRequest || !strings.Contains(body, "TRUST_EVENTS") {
			t.Errorf("answer %d %s, want 400 naming TRUST_EVENTS", code, body)
		}
		if _, err := off.c.Client.CoreV1().ConfigMaps(off.ns).Get(context.Background(), task, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the anchor was written: %v", err)
		}
		nothingCreated(off, task)
	})
}
