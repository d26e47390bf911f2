package steps

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// placementConfig enables every backend parameter.
const placementConfig = `
node_pool: {pools: {highmem: {nodeSelector: {pool: highmem}, tolerations: [{key: pool, operator: Equal, value: highmem, effect: NoSchedule}]}}}
preemptible: {"true": {nodeSelector: {spot: "true"}, tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]}}
gpu: {max: 2, default: nvidia.com/gpu, types: {nvidia.com/gpu: {tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}, amd.com/gpu: {}}}
zones: {allowed: [a, b]}
service_account: {allowed: [reader]}
image_pull_secrets: {allowed: [regcred, quay]}
`

func placed(t *testing.T) Config {
	t.Helper()
	bp, err := backendparams.Parse([]byte(placementConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ExecutorServiceAccount = "tesk-executor"
	cfg.BackendParameters = bp
	return cfg
}

func withParams(kv ...string) func(*taskspec.Task) {
	return func(t *taskspec.Task) {
		t.Resources.BackendParameters = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Resources.BackendParameters[kv[i]] = kv[i+1]
		}
	}
}

var zoneB = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
	NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}},
	}}},
}}}

// checkExecutorPod checks an executor's pod placed by node_pool=highmem,
// preemptible=true, gpu_count=2, zones=b, service_account=reader and
// image_pull_secrets=regcred.
func checkExecutorPod(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	if want := map[string]string{"pool": "highmem", "spot": "true"}; !reflect.DeepEqual(ps.NodeSelector, want) {
		t.Errorf("node selector %v, want %v", ps.NodeSelector, want)
	}
	var keys []string
	for _, tol := range ps.Tolerations {
		keys = append(keys, tol.Key)
	}
	if want := []string{"pool", "spot", "nvidia.com/gpu"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("tolerations of %v, want %v", keys, want)
	}
	if !reflect.DeepEqual(ps.Affinity, zoneB) {
		t.Errorf("affinity %+v, want zone b required", ps.Affinity)
	}
	res := ps.Containers[0].Resources
	if l, r := res.Limits["nvidia.com/gpu"], res.Requests["nvidia.com/gpu"]; l.Value() != 2 || r.Value() != 2 {
		t.Errorf("resources %v, want 2 nvidia.com/gpu as limit and request", res)
	}
	if l := res.Limits[corev1.ResourceCPU]; l.Value() != 1 {
		t.Errorf("the CPU request is not a limit too: %v", res)
	}
	if ps.ServiceAccountName != "reader" || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("service account %q, token %v; want reader, without its token", ps.ServiceAccountName, ps.AutomountServiceAccountToken)
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(ps.ImagePullSecrets, want) {
		t.Errorf("pull secrets %v", ps.ImagePullSecrets)
	}
}

// checkFilerPod checks that a filer's pod gets the zone and nothing else of
// the parameters.
func checkFilerPod(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	if !reflect.DeepEqual(ps.Affinity, zoneB) {
		t.Errorf("filer affinity %+v, want zone b required", ps.Affinity)
	}
	if ps.NodeSelector != nil || ps.Tolerations != nil || ps.ImagePullSecrets != nil || ps.ServiceAccountName != "tesk-executor" {
		t.Errorf("the filer got the executors' placement: %+v", ps)
	}
	if _, ok := ps.Containers[0].Resources.Limits["nvidia.com/gpu"]; ok {
		t.Errorf("the filer got GPUs")
	}
}

var allParams = withParams("node_pool", "highmem", "preemptible", "true", "gpu_count", "2", "zones", "b", "service_account", "reader", "image_pull_secrets", "regcred")

func withCPU(t *taskspec.Task) {
	for i := range t.Executors {
		t.Executors[i].Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	}
}

func TestBuildJobsWithBackendParameters(t *testing.T) {
	cfg := placed(t)
	t.Run("every parameter", func(t *testing.T) {
		task := taskWith(1, withCPU, allParams)
		checkExecutorPod(t, jobspec.ExecutorJob(testAnchor, task, 0, cfg.Config).Spec.Template.Spec)
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			checkFilerPod(t, jobspec.FilerJob(testAnchor, part, task, cfg.Config).Spec.Template.Spec)
		}
	})
	t.Run("none", func(t *testing.T) {
		task := taskWith(1)
		with := jobspec.ExecutorJob(testAnchor, task, 0, cfg.Config)
		without := jobspec.ExecutorJob(testAnchor, task, 0, DefaultConfig().Config)
		without.Spec.Template.Spec.ServiceAccountName = "tesk-executor"
		if !reflect.DeepEqual(with, without) {
			t.Errorf("a task without parameters is placed:\n%+v\n%+v", with.Spec.Template.Spec, without.Spec.Template.Spec)
		}
		if f := jobspec.FilerJob(testAnchor, taskmeta.PartInputsFiler, task, cfg.Config); f.Spec.Template.Spec.Affinity != nil {
			t.Errorf("filer affinity %+v", f.Spec.Template.Spec.Affinity)
		}
	})
	t.Run("a GPU type of its own", func(t *testing.T) {
		task := taskWith(1, withParams("gpu_count", "1", "gpu_type", "amd.com/gpu"))
		ps := jobspec.ExecutorJob(testAnchor, task, 0, cfg.Config).Spec.Template.Spec
		res := ps.Containers[0].Resources
		if l := res.Limits["amd.com/gpu"]; l.Value() != 1 || len(res.Limits) != 1 || len(res.Requests) != 1 {
			t.Errorf("resources %v, want 1 amd.com/gpu alone", res)
		}
		if ps.Tolerations != nil || ps.NodeSelector != nil {
			t.Errorf("amd.com/gpu has no placement, got %v %v", ps.NodeSelector, ps.Tolerations)
		}
	})
}

func TestAdmitBackendParameters(t *testing.T) {
	cfg := placed(t)
	for _, c := range []struct {
		name string
		cfg  Config
		mod  func(*taskspec.Task)
		err  string
	}{
		{"allowed", cfg, allParams, ""},
		{"none, nothing enabled", DefaultConfig(), withParams(), ""},
		{"not enabled", DefaultConfig(), withParams("gpu_count", "1"), `resources.backend_parameters: "gpu_count" is not supported by this service's configuration (supported: none)`},
		{"not allowed", cfg, withParams("zones", "c"), `resources.backend_parameters.zones: "c" is not allowed (allowed: a, b)`},
		{"too many GPUs", cfg, withParams("gpu_count", "3"), `gpu_count: "3" is not a whole number from 0 to 2`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Admit(taskWith(1, c.mod), testNS, c.cfg)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("Admit: %v, want %q", err, c.err)
			}
		})
	}
}

// TestBackendParametersOnTheCluster: the jobs the steps create on the
// cluster carry the placement: the inputs filer the zone, the executor
// everything.
func TestBackendParametersOnTheCluster(t *testing.T) {
	cfg := placed(t)
	ctx := testCtx(t)
	task := taskWith(1, withInput, withCPU, allParams)
	raw := must(json.Marshal(task))

	api := newFakeAPI(t)
	if _, err := testRunner(api, cfg).Submit(ctx, testNS, testTask, raw, "ev-1"); err != nil {
		t.Fatal(err)
	}
	filer := api.job(taskmeta.PartInputsFiler)
	if filer == nil {
		t.Fatal("no inputs filer")
	}
	checkFilerPod(t, filer.Spec.Template.Spec)

	prog := progressOf(Parts(task), "ev-1", ago(time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler)
	done := owned(jobOf(taskmeta.PartInputsFiler, cond(batchv1.JobSuccessCriteriaMet, t0)))
	api = newFakeAPI(t, anchorObject(task, anchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
	if _, err := testRunner(api, cfg).Reconcile(ctx, testNS, testTask, Options{Event: "ev-2", Job: done.Name, Seen: done}); err != nil {
		t.Fatal(err)
	}
	ex := api.job("ex-00")
	if ex == nil {
		t.Fatal("no executor job")
	}
	checkExecutorPod(t, ex.Spec.Template.Spec)
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
	cfg := DefaultConfig()
	cfg.BackendParameters = narrower
	task := taskWith(2, withParams("zones", "b"))

	t.Run("at submission", func(t *testing.T) {
		api := newFakeAPI(t, anchorObject(task, anchorWith(nil)))
		_, err := testRunner(api, cfg).Submit(ctx, testNS, testTask, nil, "ev-1")
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
		prog := progressOf(Parts(task), "ev-1", ago(time.Hour), "ex-00")
		done := owned(jobOf("ex-00", cond(batchv1.JobSuccessCriteriaMet, t0)))
		api := newFakeAPI(t, anchorObject(task, anchorWith(&prog, taskmeta.AnnotationTTL, taskmeta.NoTTL)), done)
		r := testRunner(api, cfg)
		res, err := r.Reconcile(ctx, testNS, testTask, Options{Event: "ev-2", Job: done.Name, Seen: done})
		if err != nil {
			t.Fatal(err)
		}
		a := api.anchor()
		want := `Task refused: resources.backend_parameters.zones: "b" is not allowed (allowed: a)`
		if res.State != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || a.Annotations[taskmeta.AnnotationReason] != want {
			t.Errorf("state %s, anchor %v; want SYSTEM_ERROR: %s", res.State, a.Annotations, want)
		}
		view := BuildView(a.ObjectMeta, map[string]*batchv1.Job{"ex-00": done}, nil, cfg, t0)
		if logs := view.Logs[0].SystemLogs; len(logs) != 1 || logs[0] != want {
			t.Errorf("system_logs %q", logs)
		}
		// The redelivery and the sweep's look find an ended task.
		for _, ev := range []string{"ev-2", "ev-3"} {
			if _, err := r.Reconcile(ctx, testNS, testTask, Options{Event: ev, Job: done.Name, Seen: done}); err != nil {
				t.Fatal(err)
			}
		}
		if n := api.count("create", "jobs", ""); n != 0 {
			t.Errorf("%d jobs created", n)
		}
	})
}
