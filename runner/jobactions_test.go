package runner

import (
	"slices"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// The count is written on the job on the condition that the job is as the
// step read it: a step that finds the job changed decides again and counts
// each pod once; a pod counted before is not written again.
func TestRecordingAPreemption(t *testing.T) {
	prog := taskfixtures.ProgressOf([]string{"ex-00"}, "ev-0", taskfixtures.Ago(time.Hour), "ex-00")
	api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(1), taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)),
		owned(taskfixtures.Running("ex-00")), taskfixtures.DisruptedPod("ex-00", "a", "EvictionByEvictionAPI"))
	job := taskmeta.ObjectName(taskfixtures.TaskName, "ex-00")
	api.inject("patch", "jobs", job, errConflict, 1)
	cfg := steps.DefaultConfig()
	for _, ev := range []string{"ev-pod", "ev-pod-again"} {
		if _, err := testRunner(api, cfg).Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: ev, Pods: true}); err != nil {
			t.Fatalf("Reconcile %s: %v", ev, err)
		}
	}
	if got := taskmeta.PreemptedPods(api.job("ex-00")); !slices.Equal(got, []string{job + "-a"}) {
		t.Errorf("counted %v, want the pod once", got)
	}
	// The conflicted patch, then one that took.
	if n := api.count("patch", "jobs", job); n != 2 {
		t.Errorf("%d patches of the job, want 2", n)
	}
	if a := api.anchor(); a.Annotations[taskmeta.AnnotationState] != "" {
		t.Errorf("the task ended (%s) under the bound", a.Annotations[taskmeta.AnnotationState])
	}
}
