package runner

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestBackendParametersOnTheCluster: the jobs the steps create on the
// cluster carry the placement: the inputs filer the zone, the executor
// everything.

// placed is the configuration of the placement tests
// (taskfixtures.Placement).
func placed(t *testing.T) steps.Config {
	cfg := steps.DefaultConfig()
	cfg.ExecutorServiceAccount = "tesk-executor"
	cfg.BackendParameters = taskfixtures.Placement(t)
	return cfg
}

func TestBackendParametersOnTheCluster(t *testing.T) {
	cfg := placed(t)
	ctx := testCtx(t)
	task := taskfixtures.TaskWith(1, taskfixtures.WithInput, taskfixtures.WithCPU, taskfixtures.AllParams)
	raw := must(json.Marshal(task))

	api := newFakeAPI(t)
	if _, err := testRunner(api, cfg).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, raw, "ev-1"); err != nil {
		t.Fatal(err)
	}
	filer := api.job(taskmeta.PartInputsFiler)
	if filer == nil {
		t.Fatal("no inputs filer")
	}
	taskfixtures.CheckFilerPod(t, filer.Spec.Template.Spec)

	prog := taskfixtures.ProgressOf(steps.Parts(task), "ev-1", taskfixtures.Ago(time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler)
	done := owned(taskfixtures.JobOf(taskmeta.PartInputsFiler, taskfixtures.Cond(batchv1.JobSuccessCriteriaMet, taskfixtures.Now)))
	api = newFakeAPI(t, anchorObject(task, taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
	if _, err := testRunner(api, cfg).Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", Job: done.Name, Seen: done}); err != nil {
		t.Fatal(err)
	}
	ex := api.job("ex-00")
	if ex == nil {
		t.Fatal("no executor job")
	}
	taskfixtures.CheckExecutorPod(t, ex.Spec.Template.Spec)
}

// TestBackendParametersNoLongerAllowed: a task whose parameters the
// configuration no longer allows (it changed after the TES API accepted
// them) ends with SYSTEM_ERROR saying which, at its submission or at its
// next job, and nothing is created for it, then or later.
func TestBackendParametersNoLongerAllowed(t *testing.T) {
	ctx := testCtx(t)
	narrower, err := backendparams.Parse([]byte("zones: {allowed: [a]}"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := steps.DefaultConfig()
	cfg.BackendParameters = narrower
	task := taskfixtures.TaskWith(2, taskfixtures.WithParams("zones", "b"))

	t.Run("at submission", func(t *testing.T) {
		api := newFakeAPI(t, anchorObject(task, taskfixtures.AnchorWith(nil)))
		_, err := testRunner(api, cfg).Submit(ctx, taskfixtures.Namespace, taskfixtures.TaskName, nil, "ev-1")
		if !invalid.Is(err) {
			t.Errorf("error %v, want bad input", err)
		}
		a := api.anchor()
		want := `task refused: resources.backend_parameters.zones: "b" is not allowed (allowed: a)`
		if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationReason] != want {
			t.Errorf("anchor %v, want SYSTEM_ERROR: %s", a.Annotations, want)
		}
		if n := api.count("create", "jobs", "") + api.count("create", "persistentvolumeclaims", ""); n != 0 {
			t.Errorf("%d objects created", n)
		}
	})
	t.Run("at its next job", func(t *testing.T) {
		prog := taskfixtures.ProgressOf(steps.Parts(task), "ev-1", taskfixtures.Ago(time.Hour), "ex-00")
		done := owned(taskfixtures.JobOf("ex-00", taskfixtures.Cond(batchv1.JobSuccessCriteriaMet, taskfixtures.Now)))
		api := newFakeAPI(t, anchorObject(task, taskfixtures.AnchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
		r := testRunner(api, cfg)
		res, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2", Job: done.Name, Seen: done})
		if err != nil {
			t.Fatal(err)
		}
		a := api.anchor()
		want := `Task refused: resources.backend_parameters.zones: "b" is not allowed (allowed: a)`
		if res.State != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationReason] != want {
			t.Errorf("state %s, anchor %v; want SYSTEM_ERROR: %s", res.State, a.Annotations, want)
		}
		view := steps.BuildView(a.ObjectMeta, map[string]*batchv1.Job{"ex-00": done}, nil, cfg, taskfixtures.Now)
		if logs := view.Logs[0].SystemLogs; len(logs) != 1 || logs[0] != want {
			t.Errorf("system_logs %q", logs)
		}
		// The redelivery and the sweep's look find an ended task.
		for _, ev := range []string{"ev-2", "ev-3"} {
			if _, err := r.Reconcile(ctx, taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: ev, Job: done.Name, Seen: done}); err != nil {
				t.Fatal(err)
			}
		}
		if n := api.count("create", "jobs", ""); n != 0 {
			t.Errorf("%d jobs created", n)
		}
	})
}

// TestJobsGetTheTimeLeft: a job created within the limit gets what is left
// of it as its activeDeadlineSeconds.
func TestJobsGetTheTimeLeft(t *testing.T) {
	began := taskfixtures.Ago(10 * time.Minute)
	pr := taskfixtures.ProgressOf([]string{"ex-00", "ex-01"}, "ev-1", began, "ex-00")
	pr.Began = &began
	api := newFakeAPI(t, anchorObject(taskfixtures.TaskWith(2), taskfixtures.AnchorWith(&pr, taskmeta.AnnotationTTL, taskmeta.NoTTL)), owned(taskfixtures.Completed("ex-00")))
	cfg := steps.DefaultConfig()
	cfg.Namespace = taskfixtures.Namespace
	cfg.MaxRun = time.Hour
	r := testRunner(api, cfg)
	if _, err := r.Reconcile(testCtx(t), taskfixtures.Namespace, taskfixtures.TaskName, Options{Event: "ev-2"}); err != nil {
		t.Fatal(err)
	}
	j, err := api.BatchV1().Jobs(taskfixtures.Namespace).Get(context.Background(), taskmeta.ObjectName(taskfixtures.TaskName, "ex-01"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := j.Spec.ActiveDeadlineSeconds; d == nil || *d != 3000 {
		t.Errorf("activeDeadlineSeconds %v, want 3000 (50 minutes left)", d)
	}
}
