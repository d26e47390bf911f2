//go:build e2e

package manifests

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// roleRules flattens a Role's rules to group/resource: sorted verbs, and
// refuses what a Role of this project must not hold.
func roleRules(t *testing.T, role *unstructured.Unstructured) map[string][]string {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	got := map[string][]string{}
	for i, r := range rules {
		m := r.(map[string]any)
		for _, k := range []string{"resourceNames", "nonResourceURLs"} {
			if _, ok := m[k]; ok {
				t.Errorf("Role %s rule %d: %s is not expected", role.GetName(), i, k)
			}
		}
		groups, _, _ := unstructured.NestedStringSlice(m, "apiGroups")
		resources, _, _ := unstructured.NestedStringSlice(m, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(m, "verbs")
		for _, g := range groups {
			for _, res := range resources {
				key := g + "/" + res
				for _, v := range verbs {
					if v == "*" || res == "*" || g == "*" {
						t.Errorf("Role %s rule %d: wildcard in %s %s", role.GetName(), i, key, v)
					}
					if !slices.Contains(got[key], v) {
						got[key] = append(got[key], v)
					}
				}
			}
		}
	}
	for k := range got {
		sort.Strings(got[k])
	}
	return got
}

// boundRoles lists, for each Role of the manifests, the ServiceAccounts
// its RoleBindings bind it to, and checks that every binding is of a Role of
// the manifests, in its own namespace, to ServiceAccounts of the manifests.
func boundRoles(t *testing.T, objs []object) map[*unstructured.Unstructured][]string {
	t.Helper()
	roles := map[string]*unstructured.Unstructured{}
	for _, r := range ofKind(objs, "Role") {
		roles[r.GetNamespace()+"/"+r.GetName()] = r.Unstructured
	}
	accounts := map[string]bool{}
	for _, sa := range ofKind(objs, "ServiceAccount") {
		accounts[sa.GetNamespace()+"/"+sa.GetName()] = true
	}
	out := map[*unstructured.Unstructured][]string{}
	for _, rb := range ofKind(objs, "RoleBinding") {
		kind, _, _ := unstructured.NestedString(rb.Object, "roleRef", "kind")
		ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name")
		role := roles[rb.GetNamespace()+"/"+ref]
		if kind != "Role" || role == nil {
			t.Errorf("RoleBinding %s/%s: roleRef %s %s, want a Role of the manifests in its namespace", rb.GetNamespace(), rb.GetName(), kind, ref)
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
		if len(subjects) == 0 {
			t.Errorf("RoleBinding %s/%s binds nobody", rb.GetNamespace(), rb.GetName())
		}
		for _, s := range subjects {
			m := s.(map[string]any)
			sa := fmt.Sprint(m["namespace"], "/", m["name"])
			if m["kind"] != "ServiceAccount" || !accounts[sa] {
				t.Errorf("RoleBinding %s/%s: subject %v, want a ServiceAccount of the manifests", rb.GetNamespace(), rb.GetName(), m)
				continue
			}
			out[role] = append(out[role], sa)
		}
	}
	for key, r := range roles {
		if len(out[r]) == 0 {
			t.Errorf("Role %s is bound to no ServiceAccount", key)
		}
	}
	return out
}

// TestRolesAreNamespacedAndBound: nothing is cluster-wide; every Role names
// its groups, resources and verbs (no wildcard) and is bound to
// ServiceAccounts of the manifests, which the handler's Service, the TES
// API's and the ApiServerSource run as. That each Role grants exactly what
// its ServiceAccounts use is test/e2e's TestRolesAreExactlyWhatIsUsed,
// from the API server's audit log.
func TestRolesAreNamespacedAndBound(t *testing.T) {
	objs := loadObjects(t)
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		if got := ofKind(objs, kind); len(got) > 0 {
			t.Errorf("config/knative has a %s (%s): the project needs nothing cluster-wide", kind, got[0])
		}
	}
	bound := boundRoles(t, objs)
	if len(bound) == 0 {
		t.Fatal("config/knative binds no Role")
	}
	ns, err := layoutOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	// Every Role is in the tasks' namespace, bound to ServiceAccounts of the
	// platform's (which has no Role: its ServiceAccounts have no rights in
	// it).
	for role, sas := range bound {
		if len(roleRules(t, role)) == 0 {
			t.Errorf("Role %s grants nothing", role.GetName())
		}
		if role.GetNamespace() != ns.tasks {
			t.Errorf("Role %s is in %q, want the tasks' namespace %q", role.GetName(), role.GetNamespace(), ns.tasks)
		}
		for _, sa := range sas {
			if saNS, _, _ := strings.Cut(sa, "/"); saNS != ns.platform {
				t.Errorf("Role %s is bound to %s, want a ServiceAccount of the platform's namespace %q", role.GetName(), sa, ns.platform)
			}
		}
	}
	boundAccounts := map[string]bool{}
	for _, sas := range bound {
		for _, sa := range sas {
			_, name, _ := strings.Cut(sa, "/")
			boundAccounts[name] = true
		}
	}
	for _, c := range []struct{ kind, name, want string }{
		{"Service", "tesk-handler", "tesk-handler"}, {"Service", "tesk-tes", "tesk-tes"}, {"ApiServerSource", "tesk-events", "tesk-apiserversource"},
	} {
		path := []string{"spec", "template", "spec", "serviceAccountName"}
		if c.kind == "ApiServerSource" {
			path = []string{"spec", "serviceAccountName"}
		}
		sa, _, _ := unstructured.NestedString(find(t, objs, c.kind, c.name).Object, path...)
		if sa != c.want || !boundAccounts[sa] {
			t.Errorf("%s %s runs as %q, want %s, bound to its Role", c.kind, c.name, sa, c.want)
		}
	}
	src := find(t, objs, "ApiServerSource", "tesk-events")
	// It watches the tasks' namespace, and only that one.
	sel, _, _ := unstructured.NestedStringMap(src.Object, "spec", "namespaceSelector", "matchLabels")
	if !reflect.DeepEqual(sel, map[string]string{"kubernetes.io/metadata.name": ns.tasks}) {
		t.Errorf("the ApiServerSource watches the namespaces %v, want only %s", sel, ns.tasks)
	}
}

// TestRolesAsTheAPIServerAuthorizesThem applies the ServiceAccounts, Roles
// and RoleBindings into a namespace of their own and asks the API server's
// authorizer (SubjectAccessReview) what each account may do.
func TestRolesAsTheAPIServerAuthorizesThem(t *testing.T) {
	objs := loadObjects(t)
	c := liveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "tesk-rbac-check"
	if err := ensureNamespace(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, kind := range []string{"ServiceAccount", "Role", "RoleBinding"} {
		for _, o := range ofKind(objs, kind) {
			u := o.DeepCopy()
			u.SetNamespace(ns)
			if subjects, ok, _ := unstructured.NestedSlice(u.Object, "subjects"); ok {
				for _, s := range subjects {
					s.(map[string]any)["namespace"] = ns
				}
				_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
			}
			b, err := yaml.Marshal(u.Object)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, b)
		}
	}
	if err := c.Apply(ctx, []byte(strings.Join(stringsOf(docs), "\n---\n"))); err != nil {
		t.Fatal(err)
	}

	type ask struct {
		ns, group, resource, sub, verb string
	}
	// The RoleBindings take a moment to reach the authorizer's cache.
	allowed := func(sa string, a ask) bool {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok := allowedNow(ctx, t, c, ns, sa, a.ns, a.group, a.resource, a.sub, a.verb)
			if ok || time.Now().After(deadline) {
				return ok
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	split := func(key string) (group, resource, sub string) {
		group, resource, _ = strings.Cut(key, "/")
		resource, sub, _ = strings.Cut(resource, "/")
		return
	}
	// Every rule of every Role, for each ServiceAccount bound to it.
	for role, sas := range boundRoles(t, objs) {
		for key, verbs := range roleRules(t, role) {
			g, r, s := split(key)
			for _, sa := range sas {
				_, name, _ := strings.Cut(sa, "/")
				for _, v := range verbs {
					if !allowed(name, ask{ns, g, r, s, v}) {
						t.Errorf("%s may not %s %s in its namespace (Role %s)", name, v, key, role.GetName())
					}
				}
			}
		}
	}
	// What neither account may do: secrets, watching or changing what it
	// only reads, other namespaces, anything cluster-wide, granting rights.
	denied := []ask{
		{ns, "", "secrets", "", "get"},
		{ns, "", "secrets", "", "list"},
		{ns, "", "configmaps", "", "update"},
		{ns, "", "pods", "", "create"},
		{ns, "", "pods", "", "delete"},
		{ns, "", "pods", "exec", "create"},
		{ns, "", "persistentvolumeclaims", "", "get"},
		{ns, "", "serviceaccounts", "token", "create"},
		{ns, "rbac.authorization.k8s.io", "roles", "", "create"},
		{ns, "rbac.authorization.k8s.io", "rolebindings", "", "create"},
		{"default", "", "configmaps", "", "get"},
		{"default", "batch", "jobs", "", "create"},
		{"", "", "namespaces", "", "delete"},
		{"", "", "nodes", "", "list"},
		{"", "", "persistentvolumes", "", "delete"},
	}
	for _, sa := range []string{"tesk-handler", "tesk-apiserversource"} {
		for _, a := range denied {
			if allowedNow(ctx, t, c, ns, sa, a.ns, a.group, a.resource, a.sub, a.verb) {
				t.Errorf("%s may %s %s/%s %s in namespace %q", sa, a.verb, a.group, a.resource, a.sub, a.ns)
			}
		}
	}
	// The handler only patches what it reads; the source never writes.
	for _, a := range []ask{{ns, "", "configmaps", "", "watch"}, {ns, "batch", "jobs", "", "watch"}, {ns, "", "pods", "", "get"}} {
		if allowedNow(ctx, t, c, ns, "tesk-handler", a.ns, a.group, a.resource, a.sub, a.verb) {
			t.Errorf("tesk-handler may %s %s/%s", a.verb, a.group, a.resource)
		}
	}
	for _, a := range []ask{{ns, "batch", "jobs", "", "create"}, {ns, "", "configmaps", "", "patch"}, {ns, "", "pods", "log", "get"}} {
		if allowedNow(ctx, t, c, ns, "tesk-apiserversource", a.ns, a.group, a.resource, a.sub, a.verb) {
			t.Errorf("tesk-apiserversource may %s %s/%s %s", a.verb, a.group, a.resource, a.sub)
		}
	}
}

// allowedNow asks the authorizer once.
func allowedNow(ctx context.Context, t *testing.T, c *cluster.Cluster, saNamespace, sa, ns, group, resource, sub, verb string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + saNamespace + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Group: group, Resource: resource, Subresource: sub, Verb: verb,
		},
	}}
	res, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status.Allowed
}

func stringsOf(docs [][]byte) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

// variablesRead lists the environment variables the handler reads: the
// string literal passed first to getenv and to the constructors of the
// settings' tables in cmd/handler/main.go (internal/settings') and
// steps/env.go (envSettings': its own and internal/settings'), and
// backendparams.EnvVar where backendparams.FromEnv is called.
func variablesRead(t *testing.T) map[string]bool {
	t.Helper()
	readers := map[string]bool{"getenv": true,
		"setting": true, "settingEvenEmpty": true, "text": true, "untrimmed": true, "wholeNumber": true, "k8sObject": true,
		"settings.Text": true, "settings.RawText": true, "settings.Bool": true, "settings.Port": true, "settings.Int": true,
		"settings.IntFunc": true, "settings.Float": true}
	found := map[string]bool{}
	for _, f := range []string{"cmd/handler/main.go", "steps/env.go"} {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", f), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			if readerName(call.Fun) == "backendparams.FromEnv" {
				found[backendparams.EnvVar] = true
				return true
			}
			if !readers[readerName(call.Fun)] {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if name, err := strconv.Unquote(lit.Value); err == nil {
				found[name] = true
			}
			return true
		})
	}
	if len(found) < 20 {
		t.Fatalf("found only %d variables read by the handler (%v): the scan of the sources no longer works", len(found), sortedKeys(found))
	}
	return found
}

// readerName is the name of a called function: f, or pkg.f for a function
// of the package pkg (settings.Text).
func readerName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
	}
	return ""
}

// notConfigured are variables the handler reads that the deployment must
// not set: Knative sets PORT, a SinkBinding sets K_SINK (the chart's
// stateEvents.enabled), and in the cluster the handler uses its
// ServiceAccount, not a kubeconfig.
var notConfigured = map[string]bool{"PORT": true, "K_SINK": true, "KUBECONFIG": true}

// fromSecret are set from the secret tesk-ftp rather than the ConfigMap.
var fromSecret = map[string]string{"TESK_FTP_USERNAME": "username", "TESK_FTP_PASSWORD": "password"}

// TestConfigMapHoldsEveryVariableWithItsDefault: every variable the handler
// reads is set by the deployment (the ConfigMap, or the FTP secret), the
// ConfigMap holds nothing else, and its values are the code's defaults, so
// that the file documents them truthfully.
func TestConfigMapHoldsEveryVariableWithItsDefault(t *testing.T) {
	objs := loadObjects(t)
	cm := find(t, objs, "ConfigMap", "tesk-handler-config")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	read := variablesRead(t)
	for name := range read {
		_, inConfig := data[name]
		_, inSecret := fromSecret[name]
		switch {
		case notConfigured[name]:
			if inConfig {
				t.Errorf("the ConfigMap sets %s, which the deployment must not set", name)
			}
		case inSecret:
			if inConfig {
				t.Errorf("the ConfigMap sets %s, which comes from the secret tesk-ftp", name)
			}
		case !inConfig:
			t.Errorf("the handler reads %s, but the ConfigMap does not list it", name)
		}
	}
	for name := range data {
		if !read[name] {
			t.Errorf("the ConfigMap sets %s, which the handler does not read", name)
		}
	}

	// The defaults: the taskmaster's variables through the code's own
	// parser, the options as main.go reads them.
	getenv := func(name string) string { return data[name] }
	cfg, issues := steps.LoadEnv(steps.DefaultConfig(), getenv)
	if len(issues) > 0 {
		t.Errorf("the ConfigMap's values are not valid: %v", issues)
	}
	// Five values are the deployment's own: the executors' ServiceAccount
	// that tasks.yaml creates, the audience of the Triggers' tokens (the
	// handler takes only their events; a handler run by hand takes any),
	// and the bounds a shared cluster needs where the code, for TESK's
	// compatibility, has none: a task's pod waits a day for a node at
	// most, a task runs 7 days at most, and an ended task is kept 30 days.
	want := steps.DefaultConfig()
	want.ExecutorServiceAccount = "tesk-executor"
	want.EventsAudience = "tesk-handler"
	want.MaxQueue = 24 * time.Hour
	want.MaxRun = 7 * 24 * time.Hour
	ttl := 30 * 24 * time.Hour
	want.TaskTTL = &ttl
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("the ConfigMap's values are not the defaults:\n got %+v\nwant %+v", cfg, want)
	}
	executor := find(t, objs, "ServiceAccount", "tesk-executor")
	if auto, ok, _ := unstructured.NestedBool(executor.Object, "automountServiceAccountToken"); !ok || auto {
		t.Error("the ServiceAccount tesk-executor mounts its token by default")
	}
	if d, err := steps.ParsePodTimeout(data["POD_TIMEOUT"]); err != nil || d != steps.DefaultPodTimeout {
		t.Errorf("POD_TIMEOUT %q: %v, %v; want the default %v", data["POD_TIMEOUT"], d, err, steps.DefaultPodTimeout)
	}
	if data["FILER_NAME"] != jobspec.DefaultFilerName || data["FILER_VERSION"] != jobspec.DefaultFilerVersion {
		t.Errorf("the filer image is %s:%s, want the default %s:%s", data["FILER_NAME"], data["FILER_VERSION"], jobspec.DefaultFilerName, jobspec.DefaultFilerVersion)
	}
	for _, name := range []string{"PULL_POLICY_ALWAYS", "DEBUG"} {
		if b, err := strconv.ParseBool(data[name]); err != nil || b {
			t.Errorf("%s=%q, want false", name, data[name])
		}
	}
	ns, err := layoutOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	if data["NAMESPACE"] != ns.tasks || executor.GetNamespace() != ns.tasks {
		t.Errorf("NAMESPACE=%q, the executors' ServiceAccount in %q: want both the tasks' namespace %q", data["NAMESPACE"], executor.GetNamespace(), ns.tasks)
	}
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServiceRunsTheHandler: the Service's container is the handler built
// by ko, takes its environment from the ConfigMap and the optional FTP
// secret, and is probed on the handler's health endpoints.
func TestServiceRunsTheHandler(t *testing.T) {
	objs := loadObjects(t)
	svc := find(t, objs, "Service", "tesk-handler")
	containers, _, _ := unstructured.NestedSlice(svc.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("the handler's Service has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(c, path...)
		return s
	}
	if got, want := str("image"), "ko://github.com/elixir-cloud-aai/tesk-knative/cmd/handler"; got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	envFrom, _, _ := unstructured.NestedSlice(c, "envFrom")
	if len(envFrom) != 1 || toYAML(t, envFrom) != "- configMapRef:\n    name: tesk-handler-config\n" {
		t.Errorf("envFrom %v, want the ConfigMap tesk-handler-config, required", envFrom)
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	got := map[string]string{}
	for _, e := range env {
		m := e.(map[string]any)
		name, _ := m["name"].(string)
		ref, _, _ := unstructured.NestedMap(m, "valueFrom", "secretKeyRef")
		if ref["name"] != "tesk-ftp" || ref["optional"] != true {
			t.Errorf("env %s: %v, want a key of the optional secret tesk-ftp", name, m)
		}
		got[name], _ = ref["key"].(string)
	}
	if !reflect.DeepEqual(got, fromSecret) {
		t.Errorf("env from the secret: %v, want %v", got, fromSecret)
	}
	if p := str("readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readiness probe on %q, want /readyz", p)
	}
	if p := str("livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("liveness probe on %q, want /healthz", p)
	}
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	if len(ports) != 1 || ports[0].(map[string]any)["containerPort"] != int64(8080) {
		t.Errorf("ports %v, want 8080 (the handler's default PORT)", ports)
	}
	ann, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "template", "metadata", "annotations")
	if ann["autoscaling.knative.dev/min-scale"] != "0" || ann["autoscaling.knative.dev/max-scale"] == "" {
		t.Errorf("scale annotations %v: want min-scale 0 and a max-scale", ann)
	}
	for _, f := range []string{"containerConcurrency", "timeoutSeconds"} {
		if v, ok, _ := unstructured.NestedInt64(svc.Object, "spec", "template", "spec", f); !ok || v <= 0 {
			t.Errorf("%s is %d, want it set", f, v)
		}
	}
}

// apiServerTypes are the ApiServerSource's event types in Resource mode.
var apiServerTypes = []string{
	"dev.knative.apiserver.resource.add",
	"dev.knative.apiserver.resource.update",
	"dev.knative.apiserver.resource.delete",
}

// TestEventsReachTheHandler: the Triggers route exactly the event types the
// handler takes to it, each with retries, exponential backoff and a dead
// letter sink of the manifests; the sources send to the Broker the Triggers
// listen to, the ApiServerSource in Resource mode over the task's Jobs, Pods
// and ConfigMaps, the PingSource every minute.
func TestEventsReachTheHandler(t *testing.T) {
	objs := loadObjects(t)
	brokers := ofKind(objs, "Broker")
	if len(brokers) != 1 {
		t.Fatalf("%d Brokers, want 1", len(brokers))
	}
	broker := brokers[0].GetName()
	services := map[string]bool{}
	for _, s := range ofKind(objs, "Service") {
		if s.GetAPIVersion() == "serving.knative.dev/v1" {
			services[s.GetName()] = true
		}
	}
	wantTypes := append([]string{events.TypeTaskSubmitted, events.TypeTaskCancelled, events.TypeJobFinished, events.TypePodStuck, events.TypePing}, apiServerTypes...)
	routed := map[string]int{}
	for _, tr := range ofKind(objs, "Trigger") {
		spec, _, _ := unstructured.NestedMap(tr.Object, "spec")
		if spec["broker"] != broker {
			t.Errorf("%s: broker %v, want %s", tr, spec["broker"], broker)
		}
		attrs, _, _ := unstructured.NestedStringMap(spec, "filter", "attributes")
		if len(attrs) != 1 || attrs["type"] == "" {
			t.Errorf("%s: filter %v, want one event type", tr, attrs)
		}
		routed[attrs["type"]]++
		sub, _, _ := unstructured.NestedMap(spec, "subscriber", "ref")
		if sub["apiVersion"] != "serving.knative.dev/v1" || sub["kind"] != "Service" || sub["name"] != "tesk-handler" {
			t.Errorf("%s: subscriber %v, want the Service tesk-handler", tr, sub)
		}
		retry, _, _ := unstructured.NestedInt64(spec, "delivery", "retry")
		policy, _, _ := unstructured.NestedString(spec, "delivery", "backoffPolicy")
		delay, _, _ := unstructured.NestedString(spec, "delivery", "backoffDelay")
		dls, _, _ := unstructured.NestedMap(spec, "delivery", "deadLetterSink", "ref")
		if retry < 1 || policy != "exponential" || delay == "" {
			t.Errorf("%s: delivery retry %d, backoff %q %q; want retries with exponential backoff", tr, retry, policy, delay)
		}
		name, _ := dls["name"].(string)
		if dls["kind"] != "Service" || !services[name] || name == "tesk-handler" {
			t.Errorf("%s: dead letter sink %v, want a Service of the manifests other than the handler", tr, dls)
		}
	}
	for _, typ := range wantTypes {
		if routed[typ] != 1 {
			t.Errorf("event type %s is routed by %d Triggers, want 1", typ, routed[typ])
		}
	}
	if len(routed) != len(wantTypes) {
		t.Errorf("Triggers route %v, want exactly %v", sortedKeys(routed), wantTypes)
	}

	sinkIsBroker := func(o *unstructured.Unstructured) {
		ref, _, _ := unstructured.NestedMap(o.Object, "spec", "sink", "ref")
		if ref["apiVersion"] != "eventing.knative.dev/v1" || ref["kind"] != "Broker" || ref["name"] != broker {
			t.Errorf("%s %s: sink %v, want the Broker %s", o.GetKind(), o.GetName(), ref, broker)
		}
	}
	src := find(t, objs, "ApiServerSource", "tesk-events")
	sinkIsBroker(src)
	if mode, _, _ := unstructured.NestedString(src.Object, "spec", "mode"); mode != "Resource" {
		t.Errorf("ApiServerSource mode %q, want Resource (the handler classifies changes from the objects)", mode)
	}
	resources, _, _ := unstructured.NestedSlice(src.Object, "spec", "resources")
	kinds := map[string]bool{}
	for _, r := range resources {
		m := r.(map[string]any)
		kinds[m["apiVersion"].(string)+" "+m["kind"].(string)] = true
		want := "matchExpressions:\n- key: " + taskmeta.LabelTask + "\n  operator: Exists\n"
		if m["kind"] == "ConfigMap" {
			// Only cancelled anchors: the others' changes ask for nothing,
			// and would carry the task's JSON to the handler.
			want += "matchLabels:\n  " + taskmeta.LabelStatus + ": " + taskmeta.StatusCancelled + "\n"
		}
		if got := toYAML(t, m["selector"]); got != want {
			t.Errorf("ApiServerSource resource %v: selector\n%s\nwant\n%s", m["kind"], got, want)
		}
	}
	if want := map[string]bool{"batch/v1 Job": true, "v1 Pod": true, "v1 ConfigMap": true}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("ApiServerSource watches %v, want %v", sortedKeys(kinds), sortedKeys(want))
	}
	for _, p := range ofKind(objs, "PingSource") {
		sinkIsBroker(p.Unstructured)
		if s, _, _ := unstructured.NestedString(p.Object, "spec", "schedule"); s != "* * * * *" {
			t.Errorf("PingSource %s: schedule %q, want every minute", p.GetName(), s)
		}
	}
	if len(ofKind(objs, "PingSource")) != 1 {
		t.Errorf("%d PingSources, want 1 (the sweep)", len(ofKind(objs, "PingSource")))
	}
}
