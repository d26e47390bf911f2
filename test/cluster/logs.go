package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

var (
	kwokLogsGVR        = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	kwokClusterLogsGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterlogs"}
)

// writeLogFile writes content as a container log file in the CRI format
// that kwok serves (one "<time> stdout F <line>" record per line) and
// returns its path. Every line, the last included, is served with a
// trailing newline.
func (c *Cluster) writeLogFile(key, content string) (string, error) {
	sum := sha256.Sum256([]byte(key))
	path := filepath.Join(c.Dir, "podlogs", hex.EncodeToString(sum[:8])+".log")
	var b strings.Builder
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	if content == "" {
		lines = nil
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, strings.TrimSuffix(l, "\r"))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

func logsSpec(path string) map[string]any {
	return map[string]any{"logs": []any{map[string]any{"logsFile": path}}}
}

func (c *Cluster) applyObject(ctx context.Context, gvr schema.GroupVersionResource, namespace string, obj map[string]any) error {
	js, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	force := true
	meta := obj["metadata"].(map[string]any)
	name := meta["name"].(string)
	ri := c.Dynamic.Resource(gvr)
	if namespace != "" {
		_, err = ri.Namespace(namespace).Patch(ctx, name, types.ApplyPatchType, js, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	} else {
		_, err = ri.Patch(ctx, name, types.ApplyPatchType, js, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	}
	return err
}

// SetPodLogs makes GET pods/{pod}/log (any container) in namespace return
// content, one line per line of content. The pod need not exist yet. kwok
// picks the setting up from its watch, usually within milliseconds.
func (c *Cluster) SetPodLogs(ctx context.Context, namespace, pod, content string) error {
	path, err := c.writeLogFile("pod/"+namespace+"/"+pod, content)
	if err != nil {
		return err
	}
	return c.applyObject(ctx, kwokLogsGVR, namespace, map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Logs",
		"metadata":   map[string]any{"name": pod, "namespace": namespace},
		"spec":       logsSpec(path),
	})
}

// SetNamespaceLogs makes every pod of namespace that has no log of its own
// (SetPodLogs) return content through pods/log.
func (c *Cluster) SetNamespaceLogs(ctx context.Context, namespace, content string) error {
	path, err := c.writeLogFile("namespace/"+namespace, content)
	if err != nil {
		return err
	}
	return c.applyObject(ctx, kwokClusterLogsGVR, "", map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "ClusterLogs",
		"metadata":   map[string]any{"name": "namespace-" + namespace},
		"spec": map[string]any{
			"selector": map[string]any{"matchNamespaces": []any{namespace}},
			"logs":     logsSpec(path)["logs"],
		},
	})
}

// SetLogsForSelector gives content as log to every pod of namespace that
// matches the label selector, those that exist now and those created later
// (for example the pod of a Job, whose name is only known at run time),
// until stop is called or the cluster stops. The log is set as soon as the
// pod is seen, normally before it has been scheduled.
func (c *Cluster) SetLogsForSelector(ctx context.Context, namespace, selector, content string) (stop func(), err error) {
	if _, err := labels.Parse(selector); err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	path, err := c.writeLogFile("selector/"+namespace+"/"+selector, content)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("cluster stopped")
	}
	c.watchers = append(c.watchers, cancel)
	c.mu.Unlock()

	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := factory.Core().V1().Pods().Informer()
	set := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		for attempt := 0; attempt < 5 && wctx.Err() == nil; attempt++ {
			err := c.applyObject(wctx, kwokLogsGVR, pod.Namespace, map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1",
				"kind":       "Logs",
				"metadata":   map[string]any{"name": pod.Name, "namespace": pod.Namespace},
				"spec":       logsSpec(path),
			})
			if err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: set}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(wctx.Done())
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) }()
	select {
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	case <-synced:
	}
	return cancel, nil
}
