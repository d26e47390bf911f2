package runner

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// admitConfig is the default configuration with an executor secret.
func admitConfig() steps.Config {
	cfg := steps.DefaultConfig()
	cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: "tesk-creds", MountPath: "/secret"}
	return cfg
}

// TestRefusedTasksCreateNothing: a task whose executor asks for a forbidden
// field ends SYSTEM_ERROR with the field in system_logs, whether the JSON
// came in the event or from the anchor, and no PVC or job is created
// (behaviour §8.8).
func TestRefusedTasksCreateNothing(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range taskfixtures.ForbiddenExecutorChanges {
		j := taskfixtures.TESKAPIExecutor()
		c.Mod(&j)
		spec := &taskspec.Task{Executors: []batchv1.Job{j}, Inputs: []taskspec.Input{{Path: "/data/in.txt", Content: "x"}}}
		raw, _ := json.Marshal(spec)
		check := func(t *testing.T, api *fakeAPI, err error) {
			t.Helper()
			if !invalid.Is(err) {
				t.Errorf("error %v, want bad input", err)
			}
			a := api.anchor()
			if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], c.Field) {
				t.Errorf("anchor %v, want SYSTEM_ERROR naming %s", a.Annotations, c.Field)
			}
			if a.Labels[taskmeta.LabelState] != tesv1.StateSystemError {
				t.Errorf("labels %v, want the final state's", a.Labels)
			}
			if n := api.count("create", "jobs", "") + api.count("create", "persistentvolumeclaims", ""); n != 0 {
				t.Errorf("%d objects created", n)
			}
		}
		t.Run("event: "+c.Name, func(t *testing.T) {
			api := newFakeAPI(t)
			_, err := testRunner(api, admitConfig()).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1")
			check(t, api, err)
		})
		t.Run("anchor: "+c.Name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: taskfixtures.AnchorWith(nil), BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)}}
			api := newFakeAPI(t, cm)
			_, err := testRunner(api, admitConfig()).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-1")
			check(t, api, err)
		})
	}
}

// TestEventsAreNotTrustedByDefault: without TRUST_EVENTS an event that
// carries the task JSON is refused and creates nothing, not even the
// anchor, while the same task from its anchor runs; and a task.cancelled
// cancels only a task whose anchor is labelled cancelled (behaviour §5.2).
func TestEventsAreNotTrustedByDefault(t *testing.T) {
	ctx := testCtx(t)
	raw, _ := json.Marshal(taskfixtures.TaskWith(1))
	api := newFakeAPI(t)
	r := testRunner(api, steps.DefaultConfig())
	r.Config.TrustEvents = false
	_, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1")
	if !invalid.Is(err) || !strings.Contains(err.Error(), "TRUST_EVENTS") {
		t.Fatalf("error %v, want bad input naming TRUST_EVENTS", err)
	}
	if n := len(api.Actions()); n != 0 {
		t.Errorf("%d requests made, want none", n)
	}

	api = newFakeAPI(t, anchorObject(taskfixtures.TaskWith(1), taskfixtures.AnchorWith(nil)))
	r = testRunner(api, steps.DefaultConfig())
	r.Config.TrustEvents = false
	if _, err := r.Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-1"); err != nil {
		t.Fatal(err)
	}
	if api.job("ex-00") == nil {
		t.Error("the task from its anchor did not start")
	}

	// A cancel of a running task that nobody labelled: refused, nothing
	// written; once labelled (as the TES API does), it is cancelled.
	p := taskfixtures.ProgressOf(taskfixtures.FullParts[:2], "ev-1", taskfixtures.Ago(time.Minute), taskfixtures.FullParts[:2]...)
	api = newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2, taskfixtures.WithInput, taskfixtures.WithOutput), taskfixtures.AnchorWith(&p)))
	r = testRunner(api, steps.DefaultConfig())
	r.Config.TrustEvents = false
	_, err = r.Cancel(ctx, taskfixtures.Namespace, taskfixtures.TaskName, "ev-2")
	if !invalid.Is(err) || !strings.Contains(err.Error(), "TRUST_EVENTS") {
		t.Fatalf("error %v, want bad input naming TRUST_EVENTS", err)
	}
	if n := api.count("patch", "configmaps", ""); n != 0 {
		t.Errorf("%d patches of the anchor", n)
	}
	a := api.anchor()
	a.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	if _, err := api.CoreV1().ConfigMaps(taskfixtures.Namespace).Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Cancel(ctx, taskfixtures.Namespace, taskfixtures.TaskName, "ev-3"); err != nil || (res.State != tesv1.StateCanceling && res.State != tesv1.StateCanceled) {
		t.Errorf("labelled: %+v %v, want the task cancelled", res, err)
	}
}
