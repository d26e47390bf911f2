package steps

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// StartGrace is how long a task's anchor may wait for its task.submitted
// event before the sweep starts the task itself: the writer of an anchor
// (the TES API, or whoever writes them) posts the event right after it,
// so a task still unstarted past it had its event lost.
const StartGrace = 30 * time.Second

// AwaitsStart reports whether an anchor has not been started, has not
// ended, and has waited longer than StartGrace for its task.submitted
// event, whoever wrote it.
func AwaitsStart(anchor metav1.ObjectMeta, now time.Time) bool {
	if _, ok := anchor.Annotations[taskmeta.AnnotationProgress]; ok || anchor.Annotations[taskmeta.AnnotationState] != "" {
		return false
	}
	return now.Sub(anchor.CreationTimestamp.Time) > StartGrace
}
