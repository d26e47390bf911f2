package taskmeta

import (
	"reflect"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// TestNewAnchorInfo: what a creator knows of a task lands on its anchor
// under the record format's names, and the zero AnchorInfo adds nothing.
func TestNewAnchorInfo(t *testing.T) {
	base := map[string]string{LabelTask: "t-1"}
	for _, c := range []struct {
		name        string
		info        AnchorInfo
		labels      map[string]string
		annotations map[string]string
		data        map[string][]byte
	}{
		{name: "nothing", labels: base, annotations: map[string]string{AnnotationFormat: "1"},
			data: map[string][]byte{taskspec.ConfigMapKey: []byte("gz")}},
		{
			name: "the TES API's",
			info: AnchorInfo{SubmittedBy: SubmittedByTESAPI, TESTask: []byte("tes"), OrderedID: true,
				CreatorLabel: "alice", Creator: "alice@example.org", Name: "a task", Tags: map[string]string{"k": "v"}},
			labels: map[string]string{LabelTask: "t-1", LabelOrderedID: "true", LabelCreator: "alice"},
			annotations: map[string]string{AnnotationFormat: "1", AnnotationSubmittedBy: SubmittedByTESAPI,
				AnnotationCreator: "alice@example.org", AnnotationTaskName: "a task", AnnotationTags: `{"k":"v"}`},
			data: map[string][]byte{taskspec.ConfigMapKey: []byte("gz"), TESTaskKey: []byte("tes")},
		},
		{name: "a subject without its label", info: AnchorInfo{Creator: "alice@example.org"}, labels: base,
			annotations: map[string]string{AnnotationFormat: "1"}, data: map[string][]byte{taskspec.ConfigMapKey: []byte("gz")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := NewAnchor("ns", "t-1", []byte("gz"), c.info)
			if cm.Name != "t-1" || cm.Namespace != "ns" {
				t.Errorf("named %s/%s, want ns/t-1", cm.Namespace, cm.Name)
			}
			if !reflect.DeepEqual(cm.Labels, c.labels) {
				t.Errorf("labels %v, want %v", cm.Labels, c.labels)
			}
			if !reflect.DeepEqual(cm.Annotations, c.annotations) {
				t.Errorf("annotations %v, want %v", cm.Annotations, c.annotations)
			}
			if !reflect.DeepEqual(cm.BinaryData, c.data) {
				t.Errorf("data %q, want %q", cm.BinaryData, c.data)
			}
		})
	}
}
