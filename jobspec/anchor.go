package jobspec

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Anchor identifies the object that owns a task's PVC and jobs.
type Anchor struct {
	Name, Namespace string
	UID             types.UID
	// Creator is the subject that created the task through the TES API
	// (taskmeta.AnnotationCreator), if known.
	Creator string
}

// AnchorOf identifies a task's anchor.
func AnchorOf(m metav1.ObjectMeta) Anchor {
	return Anchor{Name: m.Name, Namespace: m.Namespace, UID: m.UID, Creator: m.Annotations[taskmeta.AnnotationCreator]}
}

// OwnerRefs make the anchor the owner of an object of its task.
func (a Anchor) OwnerRefs() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}
}
