package benchkit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// WatchFromNow watches from the current state on (the resourceVersion of
// a one-item list), resuming after the API server closes the watch.
func WatchFromNow[L interface{ GetResourceVersion() string }](ctx context.Context,
	list func(context.Context, metav1.ListOptions) (L, error),
	w func(context.Context, metav1.ListOptions) (watch.Interface, error)) (watch.Interface, error) {
	l, err := list(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	return watchtools.NewRetryWatcherWithContext(ctx, l.GetResourceVersion(), &cache.ListWatch{WatchFuncWithContext: w})
}

// TaskEnd is a task and the final state on its anchor, with its reason.
type TaskEnd struct{ Task, State, Reason string }

// WatchAnchors sends each task of namespace ns once, when its anchor first
// has a final state.
func WatchAnchors(ctx context.Context, client kubernetes.Interface, ns string, out chan<- TaskEnd) error {
	cms := client.CoreV1().ConfigMaps(ns)
	w, err := WatchFromNow(ctx, cms.List, cms.Watch)
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		seen := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || seen[cm.Name] {
					continue
				}
				if st := cm.Annotations[taskmeta.AnnotationState]; st != "" {
					seen[cm.Name] = true
					select {
					case out <- TaskEnd{cm.Name, st, cm.Annotations[taskmeta.AnnotationReason]}:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return nil
}
