package taskmeta

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Format is the version of the record format this code writes on a task's
// anchor and jobs (the labels, annotations and keys that hold the task and
// its progress) and the newest it reads. A change that an older version
// would misread raises it; an older version leaves an anchor of a newer
// format alone (CheckFormat).
const Format = 1

// NewAnchor is a task's anchor ConfigMap, the one builder of it: named for
// the task, labelled with it (how the steps, the sweep, the TES API and
// TESK's tooling find it), marked with the record format
// (AnnotationFormat), holding its task JSON, gzipped (taskspec.ConfigMapKey),
// and what its creator knows besides (info: the TES API's the creator, the
// name, the submitted TES task).
func NewAnchor(ns, task string, taskJSONGzipped []byte, info AnchorInfo) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        task,
			Namespace:   ns,
			Labels:      map[string]string{LabelTask: task},
			Annotations: map[string]string{AnnotationFormat: strconv.Itoa(Format)},
		},
		BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskJSONGzipped},
	}
	info.write(cm)
	return cm
}

// AnchorInfo is what a task's creator knows of it besides its task JSON;
// its zero value adds nothing to the anchor.
type AnchorInfo struct {
	// SubmittedBy says what wrote the task (AnnotationSubmittedBy), e.g.
	// SubmittedByTESAPI.
	SubmittedBy string
	// TESTask is the submitted TES task, gzipped JSON (TESTaskKey).
	TESTask []byte
	// OrderedID labels a task whose id orders by its time (LabelOrderedID).
	OrderedID bool
	// CreatorLabel is the label-safe form of who created the task
	// (LabelCreator); with it, Creator is their subject (AnnotationCreator).
	CreatorLabel, Creator string
	// Name is the task's name (AnnotationTaskName).
	Name string
	// Tags are the task's TES tags (AnnotationTags).
	Tags map[string]string
}

// write puts what info holds on an anchor.
func (info AnchorInfo) write(cm *corev1.ConfigMap) {
	if info.SubmittedBy != "" {
		cm.Annotations[AnnotationSubmittedBy] = info.SubmittedBy
	}
	if info.TESTask != nil {
		cm.BinaryData[TESTaskKey] = info.TESTask
	}
	if info.OrderedID {
		cm.Labels[LabelOrderedID] = "true"
	}
	if info.CreatorLabel != "" {
		cm.Labels[LabelCreator] = info.CreatorLabel
		cm.Annotations[AnnotationCreator] = info.Creator
	}
	if info.Name != "" {
		cm.Annotations[AnnotationTaskName] = info.Name
	}
	if len(info.Tags) > 0 {
		b, _ := json.Marshal(info.Tags)
		cm.Annotations[AnnotationTags] = string(b)
	}
}

// Anchor identifies the object that owns a task's PVC and jobs.
type Anchor struct {
	Name, Namespace string
	UID             types.UID
	// Creator is the subject that created the task through the TES API
	// (AnnotationCreator), if known.
	Creator string
}

// AnchorOf identifies a task's anchor.
func AnchorOf(m metav1.ObjectMeta) Anchor {
	return Anchor{Name: m.Name, Namespace: m.Namespace, UID: m.UID, Creator: m.Annotations[AnnotationCreator]}
}

// OwnerRefs make the anchor the owner of an object of its task.
func (a Anchor) OwnerRefs() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}
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

// FormatOf returns the record format of an anchor: its AnnotationFormat, 1
// when it has none (the anchors written before the annotation, and the
// ConfigMaps the TESK API writes).
func FormatOf(meta metav1.ObjectMeta) (int, error) {
	v, ok := meta.Annotations[AnnotationFormat]
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("task %s: annotation %s is %q, not a record format (a whole number from 1)", meta.Name, AnnotationFormat, v)
	}
	return n, nil
}

// CheckFormat returns an error for an anchor this code cannot read: one
// written in a format newer than Format (by a newer version of the
// service), or whose format annotation does not parse. Such a task is not
// acted on: no step, no sweep, no view.
func CheckFormat(meta metav1.ObjectMeta) error {
	n, err := FormatOf(meta)
	if err != nil {
		return err
	}
	if n > Format {
		return fmt.Errorf("task %s is recorded in format %d (annotation %s); this version of the service reads formats up to %d: run the version that wrote it, or a newer one", meta.Name, n, AnnotationFormat, Format)
	}
	return nil
}
