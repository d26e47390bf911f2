package steps

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Decide on an ended task: the PVC its end left is deleted again, until the
// TTL deletes the task with it.
func TestEndedTaskDeletesTheLeftPVC(t *testing.T) {
	ended := func(ago time.Duration, kv ...string) Observed {
		m := anchorWith(nil, append([]string{taskmeta.AnnotationState, tesv1.StateComplete,
			taskmeta.AnnotationEnded, t0.Add(-ago).Format(time.RFC3339), taskmeta.AnnotationTTL, "3600"}, kv...)...)
		return Observed{Anchor: m}
	}
	for _, c := range []struct {
		name string
		obs  Observed
		want string
	}{
		{"ended, nothing left", ended(time.Minute), ""},
		{"ended, its PVC left", ended(time.Minute, taskmeta.AnnotationPVCLeft, "503"), "delete-pvc"},
		{"past its TTL, its PVC left", ended(2*time.Hour, taskmeta.AnnotationPVCLeft, "503"), "delete-task"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := Decide(c.obs, DefaultConfig(), t0)
			var got []string
			for _, a := range plan.Actions {
				got = append(got, string(a.Kind))
			}
			if fmt.Sprint(got) != fmt.Sprint(strings.Fields(c.want)) || plan.State != tesv1.StateComplete || plan.Final != nil {
				t.Errorf("actions %v, state %s, final %v; want [%s], COMPLETE, none", got, plan.State, plan.Final, c.want)
			}
		})
	}
}
