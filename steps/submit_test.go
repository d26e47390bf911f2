package steps

import (
	"slices"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestParts(t *testing.T) {
	cases := []struct {
		name string
		task *taskspec.Task
		want []string
	}{
		{"behaviour §1.1-§1.3: inputs, executors, outputs", taskWith(2, withInput, withOutput), fullParts},
		{"behaviour §1.1: executors only, no PVC", taskWith(1), []string{"ex-00"}},
		{"behaviour §1.3: volumes need no filer", taskWith(1, withVolume), []string{taskmeta.PartPVC, "ex-00"}},
		{"behaviour §1.1: inputs without outputs", taskWith(1, withInput), []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Parts(c.task); !slices.Equal(got, c.want) {
				t.Errorf("Parts = %v, want %v", got, c.want)
			}
		})
	}
}
