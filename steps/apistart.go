package steps

import (
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A task created through the project's TES API carries
// taskmeta.AnnotationSubmittedBy on its anchor. The TES API posts
// task.submitted right after it writes the anchor; if that event is lost,
// the sweep starts the task once it has waited APIStartGrace without
// progress.
const APIStartGrace = 30 * time.Second

// AwaitsAPIStart reports whether an anchor was written by the TES API, has
// not been started, and has waited longer than APIStartGrace for its
// task.submitted event.
func AwaitsAPIStart(anchor metav1.ObjectMeta, now time.Time) bool {
	if anchor.Annotations[taskmeta.AnnotationSubmittedBy] != taskmeta.SubmittedByTESAPI {
		return false
	}
	if _, ok := anchor.Annotations[taskmeta.AnnotationProgress]; ok || anchor.Annotations[taskmeta.AnnotationState] != "" {
		return false
	}
	return now.Sub(anchor.CreationTimestamp.Time) > APIStartGrace
}
