package knative

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NotReady lists config/knative's Knative objects (Services, Broker,
// Triggers, sources, SinkBinding) in the platform's namespace whose Ready
// condition is not True, each with its reason; none at all is an error too.
func (e *Env) NotReady(ctx context.Context) ([]string, error) {
	var bad []string
	for _, gvr := range knativeObjectGVRs {
		list, err := e.C.Dynamic.Resource(gvr).Namespace(e.Namespaces.Platform).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", gvr.Resource, err)
		}
		if len(list.Items) == 0 {
			bad = append(bad, gvr.Resource+": none")
		}
		for _, o := range list.Items {
			if ok, why := ready(&o); !ok {
				bad = append(bad, fmt.Sprintf("%s/%s: %s", gvr.Resource, o.GetName(), why))
			}
		}
	}
	sort.Strings(bad)
	return bad, nil
}

func ready(o *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			if m["status"] == "True" {
				return true, ""
			}
			return false, fmt.Sprintf("%v %v", m["reason"], m["message"])
		}
	}
	return false, "no Ready condition yet"
}

// WaitReady waits until NotReady lists nothing.
func (e *Env) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		bad, err := e.NotReady(ctx)
		if err == nil && len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("config/knative not Ready after %s: %s", timeout, strings.Join(bad, "; "))
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}

// Pods are the pods of a Knative Service's revisions that have not ended
// and are not being deleted (a pod that terminates is scale-down under way).
func (e *Env) Pods(ctx context.Context, service string) ([]corev1.Pod, error) {
	list, err := e.C.Client.CoreV1().Pods(e.Namespaces.Platform).List(ctx, metav1.ListOptions{LabelSelector: "serving.knative.dev/service=" + service})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	return live, nil
}

// WaitZero waits until the Service has no pod left: scaled to zero.
func (e *Env) WaitZero(ctx context.Context, service string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pods, err := e.Pods(ctx, service)
		if err == nil && len(pods) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d pods after %s, want 0 (scale to zero)", service, len(pods), timeout)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// URL is a Knative object's address (status.url, or status.address.url).
func (e *Env) URL(ctx context.Context, gvrResource string, name string) (string, error) {
	for _, gvr := range knativeObjectGVRs {
		if gvr.Resource != gvrResource {
			continue
		}
		o, err := e.C.Dynamic.Resource(gvr).Namespace(e.Namespaces.Platform).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if u, _, _ := unstructured.NestedString(o.Object, "status", "url"); u != "" {
			return u, nil
		}
		if u, _, _ := unstructured.NestedString(o.Object, "status", "address", "url"); u != "" {
			return u, nil
		}
		return "", fmt.Errorf("%s %s has no address yet", gvrResource, name)
	}
	return "", fmt.Errorf("no resource %s", gvrResource)
}

// HTTPClient reaches the cluster's addresses from this machine as a pod
// would: a name <svc>.<ns>.svc.cluster.local goes to that Service's
// ClusterIP (an ExternalName Service, as a Knative Service's own name is,
// is followed), any other name (a Knative Service's external domain) to
// the ingress's Service, the KIngress stand-in's, which routes by Host.
func (e *Env) HTTPClient() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if net.ParseIP(host) != nil {
				return d.DialContext(ctx, network, addr)
			}
			if !strings.HasSuffix(host, ".svc.cluster.local") {
				host, port = "kingress-standin.kingress-standin.svc.cluster.local", "80"
			}
			// A Knative Service's own name is an ExternalName Service
			// that points at the ingress: follow such names.
			for range 4 {
				rest := strings.TrimSuffix(host, ".svc.cluster.local")
				i := strings.LastIndexByte(rest, '.')
				if i <= 0 {
					return nil, fmt.Errorf("dial %s: %s is not <service>.<namespace>.svc.cluster.local", addr, host)
				}
				svc, err := e.C.Client.CoreV1().Services(rest[i+1:]).Get(ctx, rest[:i], metav1.GetOptions{})
				if err != nil {
					return nil, fmt.Errorf("dial %s: %w", addr, err)
				}
				if svc.Spec.Type != corev1.ServiceTypeExternalName {
					return d.DialContext(ctx, network, net.JoinHostPort(svc.Spec.ClusterIP, port))
				}
				host = svc.Spec.ExternalName
			}
			return nil, fmt.Errorf("dial %s: ExternalName Services point at each other", addr)
		},
		MaxIdleConnsPerHost: 16,
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// NewRevision has the Knative Service roll out a new revision (an
// annotation of its template changed), so that its pods read their
// ConfigMaps again, and waits until that revision is Ready and takes the
// traffic: quicker and surer than waiting for the Service at zero pods,
// which a client's polling can put off for good.
func (e *Env) NewRevision(ctx context.Context, service string, timeout time.Duration) error {
	services := e.C.Dynamic.Resource(ServiceGVR).Namespace(e.Namespaces.Platform)
	before, err := services.Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return err
	}
	old, _, _ := unstructured.NestedString(before.Object, "status", "latestReadyRevisionName")
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"tesk.test/rolled":%q}}}}}`, time.Now().UTC().Format(time.RFC3339Nano))
	if _, err := services.Patch(ctx, service, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		s, err := services.Get(ctx, service, metav1.GetOptions{})
		if err == nil {
			created, _, _ := unstructured.NestedString(s.Object, "status", "latestCreatedRevisionName")
			readyRev, _, _ := unstructured.NestedString(s.Object, "status", "latestReadyRevisionName")
			if ok, _ := ready(s); ok && readyRev == created && readyRev != old {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no new revision Ready after %s (err %v)", service, timeout, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}
