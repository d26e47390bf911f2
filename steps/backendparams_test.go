package steps

import (
	"reflect"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// placed is the configuration of the placement tests
// (taskfixtures.Placement).
func placed(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.ExecutorServiceAccount = "tesk-executor"
	cfg.BackendParameters = taskfixtures.Placement(t)
	return cfg
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
