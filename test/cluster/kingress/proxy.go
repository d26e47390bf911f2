package kingress

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Proxy serves the routes of a Table.
type Proxy struct {
	Table *Table
	Log   *slog.Logger
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tg, ok := p.Table.Lookup(r.Host, r.URL.Path, nil)
	if !ok {
		http.Error(w, fmt.Sprintf("no route for host %q", r.Host), http.StatusNotFound)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = tg.Addr
			pr.Out.Host = tg.Host
			for k, v := range tg.Headers {
				pr.Out.Header.Set(k, v)
			}
			pr.SetXForwarded()
		},
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.Log.Warn("backend failed", "host", r.Host, "backend", tg.Addr, "error", err)
			http.Error(w, "backend: "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// Controller keeps the table in step with the KIngresses of the stand-in's
// class and marks each ready, with LoadBalancer (host name of the
// stand-in's Service) as its load balancer.
type Controller struct {
	Client       dynamic.Interface
	Table        *Table
	LoadBalancer string
	Log          *slog.Logger
}

// Run watches until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	f := dynamicinformer.NewDynamicSharedInformerFactory(c.Client, 10*time.Minute)
	inf := f.ForResource(GVR).Informer()
	queue := make(chan *unstructured.Unstructured, 256)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.enqueue(queue, o) },
		UpdateFunc: func(_, o any) { c.enqueue(queue, o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if u, ok := o.(*unstructured.Unstructured); ok {
				c.Table.Delete(u.GetNamespace() + "/" + u.GetName())
			}
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-queue:
			if err := c.reconcile(ctx, u); err != nil {
				c.Log.Warn("reconcile", "ingress", u.GetNamespace()+"/"+u.GetName(), "error", err)
				go func() {
					time.Sleep(time.Second)
					queue <- u
				}()
			}
		}
	}
}

func (c *Controller) enqueue(q chan<- *unstructured.Unstructured, o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok || u.GetAnnotations()[ClassAnnotation] != Class {
		return
	}
	q <- u.DeepCopy()
}

// reconcile routes one KIngress and marks it ready.
func (c *Controller) reconcile(ctx context.Context, u *unstructured.Unstructured) error {
	key := u.GetNamespace() + "/" + u.GetName()
	if u.GetDeletionTimestamp() != nil {
		c.Table.Delete(key)
		return nil
	}
	spec, err := SpecOf(u)
	if err != nil {
		return err
	}
	if err := c.Table.Set(key, spec); err != nil {
		return err
	}
	gen := u.GetGeneration()
	if observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); observed == gen && ready(u) {
		return nil
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(t string) map[string]any {
		return map[string]any{"type": t, "status": "True", "lastTransitionTime": now}
	}
	lb := map[string]any{"ingress": []any{map[string]any{"domainInternal": c.LoadBalancer}}}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"observedGeneration":  gen,
		"conditions":          []any{cond("LoadBalancerReady"), cond("NetworkConfigured"), cond("Ready")},
		"publicLoadBalancer":  lb,
		"privateLoadBalancer": lb,
	}})
	_, err = c.Client.Resource(GVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err == nil {
		c.Log.Info("ingress ready", "ingress", key, "rules", len(spec.Rules))
	}
	return err
}

func ready(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}
