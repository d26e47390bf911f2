package eventserver

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// A task that ended before its anchor was labelled with the final state (a
// version that did not write the label ended it) is labelled by the next
// sweep, so that the TES API's list selects it by state on the API server;
// nothing else is written on it, nor on the other anchors.
func TestSweepLabelsTasksEndedWithoutTheStateLabel(t *testing.T) {
	ended := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	anchor := func(name string, ann, labels map[string]string) *corev1.ConfigMap {
		cm := taskmeta.NewAnchor("tesk", name, nil, taskmeta.AnchorInfo{})
		cm.CreationTimestamp = metav1.NewTime(time.Now().Add(-2 * time.Hour))
		cm.Annotations[taskmeta.AnnotationTTL] = "none"
		for k, v := range ann {
			cm.Annotations[k] = v
		}
		for k, v := range labels {
			cm.Labels[k] = v
		}
		return cm
	}
	final := func(state string) map[string]string {
		return map[string]string{taskmeta.AnnotationState: state, taskmeta.AnnotationEnded: ended}
	}
	objs := []runtime.Object{
		anchor("task-unlabelled", final(tesv1.StateComplete), nil),
		anchor("task-labelled", final(tesv1.StateExecutorError), map[string]string{taskmeta.LabelState: tesv1.StateExecutorError}),
		anchor("task-newer-format", map[string]string{taskmeta.AnnotationState: tesv1.StateComplete, taskmeta.AnnotationFormat: "99"}, nil),
		anchor("task-not-ended", nil, nil), // written a moment ago: its task.submitted decides
	}
	objs[3].(*corev1.ConfigMap).CreationTimestamp = metav1.Now()
	s := newTestServer()
	client := fake.NewSimpleClientset(objs...)
	s.Runner.Client = client
	sc := metadatafake.NewTestScheme()
	sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, &metav1.PartialObjectMetadata{})
	sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}, &metav1.PartialObjectMetadataList{})
	var mds []runtime.Object
	for _, o := range objs {
		cm := o.(*corev1.ConfigMap)
		mds = append(mds, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: cm.ObjectMeta})
	}
	s.Metadata = metadatafake.NewSimpleMetadataClient(sc, mds...)

	if rec := post(t, s, "dev.knative.sources.ping", `{}`, nil); rec.Code != http.StatusOK {
		t.Fatalf("sweep: %d %s", rec.Code, rec.Body)
	}
	for name, want := range map[string]string{
		"task-unlabelled":   tesv1.StateComplete,
		"task-labelled":     tesv1.StateExecutorError,
		"task-newer-format": "",
		"task-not-ended":    "",
	} {
		cm, err := client.CoreV1().ConfigMaps("tesk").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Labels[taskmeta.LabelState]; got != want {
			t.Errorf("%s labelled %q, want %q", name, got, want)
		}
	}
	var patched []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "configmaps" {
			patched = append(patched, a.(interface{ GetName() string }).GetName())
		}
	}
	if !slices.Equal(patched, []string{"task-unlabelled"}) {
		t.Errorf("anchors patched: %v, want only task-unlabelled", patched)
	}
}
