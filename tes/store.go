package tes

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Store is the TES API's view of the cluster: the tasks of one namespace,
// each its anchor ConfigMap, its jobs and its pods. Every call is one API
// request (or one chunked LIST), its transient errors tried again with
// bounded backoff (kubeapi.Call).
type Store struct {
	Client    kubernetes.Interface
	Metadata  metadata.Interface
	Namespace string
}

var configMapsResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// listChunk is how many anchors one LIST call of a filtered scan returns.
const listChunk = 1000

// Anchor reads a task's anchor (a NotFound error when there is none).
func (st Store) Anchor(ctx context.Context, id string) (*corev1.ConfigMap, error) {
	return kubeapi.Get(ctx, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return st.Client.CoreV1().ConfigMaps(st.Namespace).Get(ctx, id, metav1.GetOptions{})
	})
}

// CreateAnchor writes a new task's anchor (AlreadyExists when its name is
// taken: not tried again, the caller draws another).
func (st Store) CreateAnchor(ctx context.Context, cm *corev1.ConfigMap) error {
	return kubeapi.Call(ctx, func(ctx context.Context) error {
		_, err := st.Client.CoreV1().ConfigMaps(st.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
}

// Cancel labels a task's anchor cancelled (taskmeta.CancelPatch).
func (st Store) Cancel(ctx context.Context, id string) error {
	return kubeapi.Call(ctx, func(ctx context.Context) error {
		_, err := st.Client.CoreV1().ConfigMaps(st.Namespace).Patch(ctx, id, types.MergePatchType, taskmeta.CancelPatch(), metav1.PatchOptions{})
		return err
	})
}

// AnchorChunk is one LIST of the metadata of ConfigMaps (a chunk of the
// list's scan: its options carry the selector, the limit and the API
// server's continue token).
func (st Store) AnchorChunk(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	return kubeapi.Get(ctx, func(ctx context.Context) (*metav1.PartialObjectMetadataList, error) {
		return st.Metadata.Resource(configMapsResource).Namespace(st.Namespace).List(ctx, opts)
	})
}

// AnchorsChunk is one LIST of whole ConfigMaps (a chunk of the list's scan
// in a view that shows the submitted task).
func (st Store) AnchorsChunk(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return kubeapi.Get(ctx, func(ctx context.Context) (*corev1.ConfigMapList, error) {
		return st.Client.CoreV1().ConfigMaps(st.Namespace).List(ctx, opts)
	})
}

// Anchors lists the ConfigMaps of a label selector, whole.
func (st Store) Anchors(ctx context.Context, selector string) ([]corev1.ConfigMap, error) {
	l, err := st.AnchorsChunk(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// JobsAndPods lists the jobs and the pods of a label selector, both at once
// (runner.ListJobsAndPods).
func (st Store) JobsAndPods(ctx context.Context, selector string) ([]batchv1.Job, []corev1.Pod, error) {
	return runner.ListJobsAndPods(ctx, st.Client, st.Namespace, selector, kubeapi.DefaultBackoff)
}

// KubeEventsAbout lists the Events whose involved object is named name.
func (st Store) KubeEventsAbout(ctx context.Context, name string) ([]corev1.Event, error) {
	sel := fields.Set{"involvedObject.name": name}.AsSelector().String()
	l, err := kubeapi.Get(ctx, func(ctx context.Context) (*corev1.EventList, error) {
		return st.Client.CoreV1().Events(st.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: maxObjectEvents})
	})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
