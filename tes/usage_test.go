package tes

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestUsageInTheTaskLog: BASIC and FULL give what a task used in its log's
// metadata: a running executor's wall seconds to now, and the core-seconds
// its request held (helloTask asks for one core).
func TestUsageInTheTaskLog(t *testing.T) {
	a := newAPITest(t)
	now := time.Now().UTC().Truncate(time.Second)
	a.srv.Now = func() time.Time { return now }
	code, body := a.do(http.MethodPost, "/tasks", helloTask)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	id := body["id"].(string)
	a.startExecutor(id, corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-90 * time.Second))}}}}})
	for _, view := range []string{tesv1.ViewBasic, tesv1.ViewFull} {
		code, body := a.do(http.MethodGet, "/tasks/"+id+"?view="+view, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", view, code, body)
		}
		md, _ := body["logs"].([]any)[0].(map[string]any)["metadata"].(map[string]any)
		for k, want := range map[string]string{"usage.ex-00.wall_seconds": "90", "usage.wall_seconds": "90", "usage.cpu_core_seconds": "90", "usage.memory_gb_seconds": "0"} {
			if md[k] != want {
				t.Errorf("%s: %s = %v, want %s (metadata %v)", view, k, md[k], want, md)
			}
		}
	}
}

// With the operator's prices, the task log's metadata prices an hour of the
// task for what it asked for, under the key Cromwell's TES backend reads
// (vm_price_per_hour_usd); without, no price is given.
func TestPricePerHourInTheTaskLog(t *testing.T) {
	for _, c := range []struct {
		name   string
		prices steps.Prices
		want   any
	}{
		// helloTask: 1 core, no RAM asked, the default disk (1 GiB).
		{"priced", steps.Prices{CoreHour: 0.04, RAMGBHour: 0.005, DiskGBHour: 0.0002}, "0.0402"},
		{"no prices", steps.Prices{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPITest(t)
			a.srv.Config.Prices = c.prices
			code, body := a.do(http.MethodPost, "/tasks", helloTask)
			if code != http.StatusOK {
				t.Fatalf("create: %d %v", code, body)
			}
			id := body["id"].(string)
			a.startExecutor(id, corev1.PodStatus{Phase: corev1.PodRunning})
			_, got := a.do(http.MethodGet, "/tasks/"+id+"?view=FULL", "")
			md, _ := got["logs"].([]any)[0].(map[string]any)["metadata"].(map[string]any)
			if md[steps.PricePerHourKey] != c.want {
				t.Errorf("%s = %v, want %v", steps.PricePerHourKey, md[steps.PricePerHourKey], c.want)
			}
		})
	}
}
