package taskmeta

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// NewAnchor is a task's anchor ConfigMap: named for the task, labelled with
// it (how the steps, the sweep, the TES API and TESK's tooling find it), and
// holding its task JSON, gzipped (taskspec.ConfigMapKey). Whoever creates a task adds what they know
// besides (the creator, the name, the submitted TES task).
func NewAnchor(ns, task string, taskJSONGzipped []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        task,
			Namespace:   ns,
			Labels:      map[string]string{LabelTask: task},
			Annotations: map[string]string{},
		},
		BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskJSONGzipped},
	}
}

// IsAnchor reports whether a ConfigMap is a task's anchor: labelled with the
// task it is named for (a task's other ConfigMaps carry the label too).
func IsAnchor(meta metav1.ObjectMeta) bool {
	return meta.Name != "" && meta.Labels[LabelTask] == meta.Name
}

// CancelPatch is the merge patch that cancels a task: its anchor labelled
// task-status: Cancelled, as the TES API and the TESK API label it.
func CancelPatch() []byte {
	return []byte(`{"metadata":{"labels":{"` + LabelStatus + `":"` + StatusCancelled + `"}}}`)
}
