package steps

import (
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAwaitsStart(t *testing.T) {
	created := metav1.NewTime(t0.Add(-time.Hour))
	api := map[string]string{taskmeta.AnnotationSubmittedBy: taskmeta.SubmittedByTESAPI}
	cases := []struct {
		name        string
		annotations map[string]string
		created     metav1.Time
		want        bool
	}{
		{"written by the TES API, never started, past the grace", api, created, true},
		{"within the grace its event may still come", api, metav1.NewTime(t0.Add(-StartGrace / 2)), false},
		{"written by another (the TESK API), never started, past the grace", map[string]string{}, created, true},
		{"started", map[string]string{taskmeta.AnnotationSubmittedBy: taskmeta.SubmittedByTESAPI, taskmeta.AnnotationProgress: `{"parts":["ex-00"]}`}, created, false},
		{"ended", map[string]string{taskmeta.AnnotationSubmittedBy: taskmeta.SubmittedByTESAPI, taskmeta.AnnotationState: tesv1.StateSystemError}, created, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "task-1", Annotations: c.annotations, CreationTimestamp: c.created}
			if got := AwaitsStart(meta, t0); got != c.want {
				t.Errorf("AwaitsStart = %v, want %v", got, c.want)
			}
		})
	}
}
