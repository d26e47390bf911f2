//go:build e2e

// Package manifests checks the Knative manifests of config/knative against a
// real API server: the local control plane of test/cluster, with the CRDs of
// knative.dev/serving and knative.dev/eventing installed and the checks of
// the Knative admission webhooks as ValidatingAdmissionPolicies
// (testdata/knative-webhook-rules.yaml). Every object is submitted as a
// server-side dry run with strict field validation and must be accepted;
// broken copies of them must be rejected. Other tests hold the manifests to
// the code: the Roles namespaced and bound to the ServiceAccounts the
// services run as (what they grant is held to the requests made by
// test/e2e's TestRolesAreExactlyWhatIsUsed), the ConfigMap against the
// variables the handler reads, the Triggers against the event types it
// takes.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// configDir is config/knative, relative to this package.
var configDir = filepath.Join("..", "..", "config", "knative")

const (
	rulesFile    = "testdata/knative-webhook-rules.yaml"
	fieldManager = "tesk-manifests-test"
)

// The local cluster, started by the first test that needs it and stopped by
// TestMain.
var (
	clusterOnce sync.Once
	shared      *cluster.Cluster
	sharedErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop cluster:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// liveCluster returns the local cluster with the Knative CRDs, the webhook
// rules and config/knative's namespaces in place.
func liveCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		shared, sharedErr = startCluster(ctx)
	})
	if sharedErr != nil {
		t.Fatalf("local cluster: %v", sharedErr)
	}
	return shared
}

func startCluster(ctx context.Context) (*cluster.Cluster, error) {
	begin := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*cluster.Cluster, error) {
		_ = c.Stop()
		return nil, err
	}
	if err := c.InstallKnativeCRDs(ctx); err != nil {
		return fail(err)
	}
	objs, err := readObjects()
	if err != nil {
		return fail(err)
	}
	ns, err := layoutOf(objs)
	if err != nil {
		return fail(err)
	}
	for _, n := range ns.all {
		if err := ensureNamespace(ctx, c, n); err != nil {
			return fail(err)
		}
	}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		return fail(err)
	}
	if err := c.Apply(ctx, rules); err != nil {
		return fail(fmt.Errorf("webhook rules: %w", err))
	}
	if err := waitRulesEnforced(ctx, c, ns.platform); err != nil {
		return fail(err)
	}
	fmt.Printf("cluster with Knative CRDs and webhook rules ready in %.1fs\n", time.Since(begin).Seconds())
	return c, nil
}

func ensureNamespace(ctx context.Context, c *cluster.Cluster, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// waitRulesEnforced waits until the API server enforces the rules: a
// Trigger without a subscriber is rejected. (An expression that does not
// compile or fails to evaluate rejects every object it matches, which the
// test of the accepted objects catches.)
func waitRulesEnforced(ctx context.Context, c *cluster.Cluster, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1",
		"kind":       "Trigger",
		"metadata":   map[string]any{"name": "rules-probe", "namespace": ns},
		"spec":       map[string]any{"broker": "default"},
	}}
	mapper := newMapper(c)
	for {
		_, err := dryRun(ctx, c, mapper, probe)
		if err != nil && strings.Contains(err.Error(), "spec.subscriber needs") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook rules not enforced (last answer to a Trigger without subscriber: %v): %w", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kustomization is the part of kustomization.yaml the tests read.
type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
}

func readKustomization() (kustomization, error) {
	var k kustomization
	b, err := os.ReadFile(filepath.Join(configDir, "kustomization.yaml"))
	if err != nil {
		return k, err
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("kustomization.yaml: %w", err)
	}
	if k.Namespace != "" {
		// kustomize would move the tasks' objects into the platform's
		// namespace, or the other way round.
		return k, fmt.Errorf("kustomization.yaml sets namespace %q: every object names its own", k.Namespace)
	}
	return k, nil
}

// namespaces are config/knative's: the platform's (the handler's Service),
// the tasks' (the handler's NAMESPACE), and all that it creates.
type namespaces struct {
	platform, tasks string
	all             []string
}

func (n namespaces) has(ns string) bool { return slices.Contains(n.all, ns) }

// manifestObject is an object of config/knative, as read from its files or
// as kustomize rendered it.
type manifestObject interface {
	GetKind() string
	GetName() string
	GetNamespace() string
	UnstructuredContent() map[string]any
}

// layoutOf finds the namespaces of config/knative's objects.
func layoutOf[O manifestObject](objs []O) (namespaces, error) {
	var n namespaces
	for _, o := range objs {
		switch {
		case o.GetKind() == "Namespace":
			n.all = append(n.all, o.GetName())
		case o.GetKind() == "Service" && o.GetName() == "tesk-handler":
			n.platform = o.GetNamespace()
		case o.GetKind() == "ConfigMap" && o.GetName() == "tesk-handler-config":
			n.tasks, _, _ = unstructured.NestedString(o.UnstructuredContent(), "data", "NAMESPACE")
		}
	}
	switch {
	case n.platform == "" || !n.has(n.platform):
		return n, fmt.Errorf("the handler's namespace %q is not one of the Namespaces %v", n.platform, n.all)
	case n.tasks == "" || !n.has(n.tasks):
		return n, fmt.Errorf("the tasks' namespace (NAMESPACE=%q of tesk-handler-config) is not one of the Namespaces %v", n.tasks, n.all)
	case n.tasks == n.platform:
		return n, fmt.Errorf("the tasks run in the platform's namespace %q", n.tasks)
	}
	return n, nil
}

// object is one document of a manifest file.
type object struct {
	file string
	*unstructured.Unstructured
}

func (o object) String() string { return o.file + ": " + o.GetKind() + " " + o.GetName() }

// decodeAll splits a multi-document YAML file into objects.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
}

// loadObjects decodes every document of the kustomization's resources.
func loadObjects(t *testing.T) []object {
	t.Helper()
	objs, err := readObjects()
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// readObjects reads every object of the kustomization's resources.
func readObjects() ([]object, error) {
	k, err := readKustomization()
	if err != nil {
		return nil, err
	}
	var objs []object
	for _, f := range k.Resources {
		b, err := os.ReadFile(filepath.Join(configDir, f))
		if err != nil {
			return nil, fmt.Errorf("resource %s of kustomization.yaml: %v", f, err)
		}
		docs, err := decodeAll(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("%s holds no object", f)
		}
		for _, d := range docs {
			objs = append(objs, object{file: f, Unstructured: d})
		}
	}
	return objs, nil
}

// find returns a copy of the one object of the given kind and name.
func find(t *testing.T, objs []object, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %s in config/knative, found %d", kind, name, len(found))
	}
	return found[0].DeepCopy()
}

func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func newMapper(c *cluster.Cluster) meta.ResettableRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.Config)))
}

// warningCollector keeps the warnings the API server sends.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// dryRun submits obj as a server-side apply with dryRun=All and strict field
// validation: the API server decodes, defaults, validates (CRD schemas
// included) and admits it (ValidatingAdmissionPolicies included) and stores
// nothing. It returns the warnings of an accepted object.
func dryRun(ctx context.Context, c *cluster.Cluster, mapper meta.ResettableRESTMapper, obj *unstructured.Unstructured) ([]string, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.Config)
	wc := &warningCollector{}
	cfg.WarningHandler = wc
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s has no namespace", gvk.Kind, obj.GetName())
		}
		ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	force := true
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           &force,
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
	})
	return wc.warnings, err
}

// TestKustomizationListsEveryYAMLFile: kubectl apply -k deploys what
// kustomization.yaml lists, so a file it misses would silently not be
// deployed, and one it lists must exist.
func TestKustomizationListsEveryYAMLFile(t *testing.T) {
	k, err := readKustomization()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range k.Resources {
		if listed[r] {
			t.Errorf("kustomization.yaml lists %s twice", r)
		}
		listed[r] = true
		if _, err := os.Stat(filepath.Join(configDir, r)); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", r, err)
		}
	}
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(configDir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 2 {
		t.Fatalf("config/knative holds %d YAML files", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		// values.yaml holds the chart's values config/knative is rendered
		// with, not objects.
		if name == "kustomization.yaml" || name == "values.yaml" {
			continue
		}
		if !listed[name] {
			t.Errorf("config/knative/%s is not listed in kustomization.yaml's resources", name)
		}
	}
}

// TestEveryObjectIsAccepted dry-runs every object of config/knative against
// the API server and wants it accepted, without warnings.
func TestEveryObjectIsAccepted(t *testing.T) {
	objs := loadObjects(t)
	c := liveCluster(t)
	ns, err := layoutOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	mapper := newMapper(c)
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
		t.Run(o.file+"/"+o.GetKind()+"/"+o.GetName(), func(t *testing.T) {
			if o.GetKind() != "Namespace" && !ns.has(o.GetNamespace()) {
				t.Errorf("%s: namespace %q, want one of config/knative's %v (so that kubectl apply -f works too)", o, o.GetNamespace(), ns.all)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			warnings, err := dryRun(ctx, c, mapper, o.DeepCopy())
			if err != nil {
				t.Fatalf("%s rejected: %v", o, err)
			}
			if len(warnings) > 0 {
				t.Errorf("%s accepted with warnings: %s", o, strings.Join(warnings, "; "))
			}
		})
	}
	for _, want := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service", "Broker", "Trigger", "ApiServerSource", "PingSource", "NetworkPolicy"} {
		if !kinds[want] {
			t.Errorf("config/knative has no %s", want)
		}
	}
}

// brokenCase is a copy of a manifest object, broken on purpose.
type brokenCase struct {
	name       string
	kind, obj  string
	breakIt    func(u map[string]any)
	wantReason string // a part of the rejection's message
}

func set(path string, v any) func(map[string]any) {
	return func(u map[string]any) { setPath(u, path, v) }
}

func remove(path string) func(map[string]any) {
	return func(u map[string]any) {
		parts := strings.Split(path, ".")
		unstructured.RemoveNestedField(u, parts...)
	}
}

// setPath sets a dotted path; a number as a part indexes a list.
func setPath(u map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	var cur any = u
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			var idx int
			if _, err := fmt.Sscanf(p, "%d", &idx); err != nil || idx >= len(c) {
				panic(fmt.Sprintf("bad index %q in %s", p, path))
			}
			if last {
				c[idx] = v
				return
			}
			cur = c[idx]
		default:
			panic(fmt.Sprintf("cannot set %s: %T at %q", path, cur, p))
		}
	}
}

func appendTo(path string, v any) func(map[string]any) {
	return func(u map[string]any) {
		parts := strings.Split(path, ".")
		var cur any = u
		for _, p := range parts {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[p]
			case []any:
				var idx int
				_, _ = fmt.Sscanf(p, "%d", &idx)
				cur = c[idx]
			}
		}
		list, _ := cur.([]any)
		setPath(u, path, append(list, v))
	}
}

// TestBrokenCopiesAreRejected: the check above can fail. Each case breaks a
// copy of one object the way a manifest gets broken (a typo in a field name,
// a value of the wrong type, a missing part, a value Knative refuses) and
// wants the API server to reject it for that reason.
func TestBrokenCopiesAreRejected(t *testing.T) {
	objs := loadObjects(t)
	c := liveCluster(t)
	mapper := newMapper(c)
	const svc, trig, ping, apis = "Service", "Trigger", "PingSource", "ApiServerSource"
	handler, submitted := "tesk-handler", "tesk-task-submitted"
	container := "spec.template.spec.containers.0"
	cases := []brokenCase{
		// Field validation (Strict) against the schemas.
		{"service: misspelt field", svc, handler, set(container+".readinesProbe", map[string]any{"httpGet": map[string]any{"path": "/readyz"}}), "readinesProbe"},
		{"service: concurrency not a number", svc, handler, set("spec.template.spec.containerConcurrency", "fifty"), "containerConcurrency"},
		{"pingsource: misspelt field", ping, "tesk-sweep", set("spec.scheduel", "* * * * *"), "scheduel"},
		{"trigger: retry not a number", trig, submitted, set("spec.delivery.retry", "ten"), "retry"},
		{"configmap: a number, not a string", "ConfigMap", "tesk-handler-config", set("data.POD_TIMEOUT", int64(240)), "POD_TIMEOUT"},
		{"role: misspelt verbs", "Role", handler, set("rules.0.verb", []any{"get"}), "verb"},
		{"rolebinding: bad roleRef kind", "RoleBinding", handler, set("roleRef.kind", "Rol"), "roleRef.kind"},
		{"serviceaccount: misspelt field", "ServiceAccount", handler, set("automountToken", false), "automountToken"},
		{"namespace: invalid name", "Namespace", "tesk", set("metadata.name", "Tesk"), "RFC 1123"},
		// The Knative webhooks' checks.
		{"service: reserved env var", svc, handler, appendTo(container+".env", map[string]any{"name": "PORT", "value": "9090"}), "reserved by Knative"},
		{"service: fieldRef without the feature", svc, handler, appendTo(container+".env", map[string]any{"name": "NAMESPACE", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.namespace"}}}), "kubernetes.podspec-fieldref"},
		{"service: concurrency too high", svc, handler, set("spec.template.spec.containerConcurrency", int64(5000)), "containerConcurrency must be"},
		{"service: timeout too long", svc, handler, set("spec.template.spec.timeoutSeconds", int64(3600)), "timeoutSeconds must be"},
		{"service: min-scale above max-scale", svc, handler, func(u map[string]any) {
			_ = unstructured.SetNestedField(u, "9", "spec", "template", "metadata", "annotations", "autoscaling.knative.dev/min-scale")
		}, "must not exceed max-scale"},
		{"service: privileged", svc, handler, set(container+".securityContext.privileged", true), "privileged"},
		{"trigger: no subscriber", trig, submitted, remove("spec.subscriber"), "spec.subscriber needs"},
		{"trigger: relative subscriber URI", trig, submitted, set("spec.subscriber", map[string]any{"uri": "/handler"}), "spec.subscriber needs"},
		{"trigger: no broker", trig, submitted, remove("spec.broker"), "spec.broker"},
		{"trigger: bad attribute name", trig, submitted, set("spec.filter.attributes", map[string]any{"Type": "task.submitted"}), "attribute names"},
		{"trigger: unknown backoff policy", trig, submitted, set("spec.delivery.backoffPolicy", "fibonacci"), "backoffPolicy"},
		{"trigger: backoff delay not ISO 8601", trig, submitted, set("spec.delivery.backoffDelay", "5s"), "backoffDelay"},
		{"trigger: dead letter sink without name", trig, submitted, remove("spec.delivery.deadLetterSink.ref.name"), "deadLetterSink"},
		{"broker: backoff delay not ISO 8601", "Broker", "default", set("spec.delivery", map[string]any{"backoffDelay": "soon"}), "backoffDelay"},
		{"pingsource: bad schedule", ping, "tesk-sweep", set("spec.schedule", "every minute"), "spec.schedule"},
		{"pingsource: @every", ping, "tesk-sweep", set("spec.schedule", "@every 1m"), "@every"},
		{"pingsource: no sink", ping, "tesk-sweep", remove("spec.sink"), "spec.sink"},
		{"apiserversource: unknown mode", apis, "tesk-events", set("spec.mode", "Full"), "spec.mode"},
		{"apiserversource: no resources", apis, "tesk-events", set("spec.resources", []any{}), "spec.resources"},
		{"apiserversource: sink without kind", apis, "tesk-events", remove("spec.sink.ref.kind"), "spec.sink"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := find(t, objs, tc.kind, tc.obj)
			tc.breakIt(u.Object)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := dryRun(ctx, c, mapper, u)
			if err == nil {
				t.Fatalf("the broken %s %s was accepted", tc.kind, tc.obj)
			}
			if !strings.Contains(err.Error(), tc.wantReason) {
				t.Fatalf("the broken %s %s was rejected, but not for %q: %v", tc.kind, tc.obj, tc.wantReason, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
