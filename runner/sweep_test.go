package runner

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// completedTask is a task with a PVC whose one executor completed.
func completedTask() []runtime.Object {
	prog := taskfixtures.ProgressOf([]string{taskmeta.PartPVC, "ex-00"}, "ev-0", taskfixtures.Ago(time.Hour), taskmeta.PartPVC, "ex-00")
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: taskmeta.PVCName(taskfixtures.TaskName), Namespace: taskfixtures.Namespace}}
	return []runtime.Object{anchorObject(taskfixtures.TaskWith(1), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), owned(taskfixtures.Completed("ex-00")), pvc}
}

// A PVC the task's end could not delete is recorded on the anchor, and the
// next sweep deletes it and removes the record; an event of the task after
// that changes nothing.
func TestAPVCLeftAtTheEndIsDeletedByTheSweep(t *testing.T) {
	for _, c := range errorClasses {
		if c.err == errNotFound {
			continue // a PVC already gone is deleted
		}
		t.Run(c.name, func(t *testing.T) {
			api := newFakeAPI(t, completedTask()...)
			down := api.inject("delete", "persistentvolumeclaims", "", c.err, 0)
			cfg := steps.DefaultConfig()
			cfg.Namespace = taskfixtures.Namespace
			res, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-done", Job: taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			a := api.anchor()
			if res.State != tesv1.StateComplete || a.Annotations[taskmeta.AnnotationState] != tesv1.StateComplete {
				t.Fatalf("state %s, written %q; want COMPLETE whatever the PVC", res.State, a.Annotations[taskmeta.AnnotationState])
			}
			if left := a.Annotations[taskmeta.AnnotationPVCLeft]; left == "" || !strings.Contains(left, c.err.Error()) {
				t.Fatalf("pvc-left %q, want the delete's error %q", left, c.err)
			}
			if _, err := api.CoreV1().PersistentVolumeClaims(taskfixtures.Namespace).Get(testCtx(t), taskmeta.PVCName(taskfixtures.TaskName), metav1.GetOptions{}); err != nil {
				t.Fatalf("the PVC: %v; want it still there", err)
			}

			// While the API server still refuses, a sweep tries and
			// keeps the record.
			if _, err := testRunner(api, cfg).Sweep(testCtx(t), taskfixtures.Namespace, "sweep-1", newMetadataFake(t, api)); err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if api.anchor().Annotations[taskmeta.AnnotationPVCLeft] == "" {
				t.Fatal("the record went while the PVC stays")
			}
			tries := api.count("delete", "persistentvolumeclaims", "")

			api.mu.Lock()
			down.times, down.hits = 1, 1 // the API server takes deletes again
			api.mu.Unlock()
			sw, err := testRunner(api, cfg).Sweep(testCtx(t), taskfixtures.Namespace, "sweep-2", newMetadataFake(t, api))
			if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := api.count("delete", "persistentvolumeclaims", ""); n != tries+1 {
				t.Errorf("%d deletes of the PVC by the sweep, want 1", n-tries)
			}
			if _, err := api.CoreV1().PersistentVolumeClaims(taskfixtures.Namespace).Get(testCtx(t), taskmeta.PVCName(taskfixtures.TaskName), metav1.GetOptions{}); err == nil {
				t.Error("the PVC is still there after the sweep")
			}
			a = api.anchor()
			if left, ok := a.Annotations[taskmeta.AnnotationPVCLeft]; ok {
				t.Errorf("pvc-left %q stays after the PVC went", left)
			}
			if a.Annotations[taskmeta.AnnotationState] != tesv1.StateComplete || len(sw.Stepped) != 1 {
				t.Errorf("state %q, stepped %+v; want COMPLETE, the task stepped once", a.Annotations[taskmeta.AnnotationState], sw.Stepped)
			}

			// Nothing is left to do.
			before := len(api.Actions())
			if _, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-later"}); err != nil {
				t.Fatal(err)
			}
			if got := len(api.Actions()) - before; got != 1 {
				t.Errorf("%d requests for an ended task's event, want 1 (its anchor)", got)
			}
		})
	}
}
