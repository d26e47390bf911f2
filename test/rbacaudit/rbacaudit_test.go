package rbacaudit

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// manifests: a handler with a Role in its namespace and one in the tasks'
// namespace, an API with a Role, and an ApiServerSource with its own.
const manifests = `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: handler, namespace: svc}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, delete]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: handler, namespace: svc}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: handler}
subjects: [{kind: ServiceAccount, name: handler, namespace: svc}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: handler-tasks, namespace: tasks}
rules:
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: handler-tasks, namespace: tasks}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: handler-tasks}
subjects: [{kind: ServiceAccount, name: handler, namespace: svc}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: source, namespace: tasks}
rules:
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: source, namespace: tasks}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: source}
subjects: [{kind: ServiceAccount, name: source, namespace: svc}]
---
apiVersion: sources.knative.dev/v1
kind: ApiServerSource
metadata: {name: events, namespace: svc}
spec:
  serviceAccountName: source
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: tasks}
  resources:
  - {apiVersion: batch/v1, kind: Job}
---
apiVersion: v1
kind: Namespace
metadata: {name: svc}
---
apiVersion: v1
kind: Namespace
metadata: {name: tasks, labels: {tasks: "yes"}}
`

func decode(t *testing.T, y string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := cluster.DecodeManifest([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func perm(sa, ns, group, resource, verb string) Permission {
	return Permission{ServiceAccount: sa, Namespace: ns, Group: group, Resource: resource, Verb: verb}
}

func TestGranted(t *testing.T) {
	got, err := Granted(decode(t, manifests))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Permission][]string{
		perm("svc/handler", "svc", "", "configmaps", "get"):     {"Role svc/handler"},
		perm("svc/handler", "svc", "", "configmaps", "delete"):  {"Role svc/handler"},
		perm("svc/handler", "svc", "", "pods/log", "get"):       {"Role svc/handler"},
		perm("svc/handler", "tasks", "batch", "jobs", "create"): {"Role tasks/handler-tasks"},
		perm("svc/source", "tasks", "batch", "jobs", "get"):     {"Role tasks/source"},
		perm("svc/source", "tasks", "batch", "jobs", "list"):    {"Role tasks/source"},
		perm("svc/source", "tasks", "batch", "jobs", "watch"):   {"Role tasks/source"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Granted =\n%v\nwant\n%v", got, want)
	}
}

func TestGrantedRefusesWhatItCannotCheck(t *testing.T) {
	role := func(rule string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: ns1}\nrules:\n- " + rule + "\n---\n" +
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: r, namespace: ns1}\nroleRef: {kind: Role, name: r}\nsubjects: [{kind: ServiceAccount, name: a}]\n"
	}
	for name, c := range map[string][2]string{
		"wildcard verb":     {role("{apiGroups: [''], resources: [pods], verbs: ['*']}"), "wildcard"},
		"wildcard resource": {role("{apiGroups: [''], resources: ['*'], verbs: [get]}"), "wildcard"},
		"wildcard group":    {role("{apiGroups: ['*'], resources: [pods], verbs: [get]}"), "wildcard"},
		"resourceNames":     {role("{apiGroups: [''], resources: [pods], verbs: [get], resourceNames: [p]}"), "resourceNames"},
		"missing role":      {"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: r, namespace: ns1}\nroleRef: {kind: Role, name: gone}\nsubjects: [{kind: ServiceAccount, name: a}]\n", "lack"},
		"a user":            {strings.Replace(role("{apiGroups: [''], resources: [pods], verbs: [get]}"), "kind: ServiceAccount", "kind: User", 1), "binds a User"},
		"cluster-wide":      {"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: c}\nroleRef: {kind: ClusterRole, name: c}\nsubjects: [{kind: ServiceAccount, name: a, namespace: ns1}]\n", "cluster-wide"},
	} {
		if _, err := Granted(decode(t, c[0])); err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c[1])
		}
	}
}

func TestRequiredBySources(t *testing.T) {
	objs := decode(t, manifests)
	got, err := RequiredBySources(objs, ManifestNamespaces(objs))
	if err != nil {
		t.Fatal(err)
	}
	want := map[Permission]string{}
	for _, v := range []string{"get", "list", "watch"} {
		want[perm("svc/source", "tasks", "batch", "jobs", v)] = WhyRequired
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RequiredBySources = %v, want %v", got, want)
	}
	// Without a namespaceSelector, the source's own namespace; the default
	// ServiceAccount; core resources.
	own := decode(t, "apiVersion: sources.knative.dev/v1\nkind: ApiServerSource\nmetadata: {name: s, namespace: ns1}\nspec:\n  resources: [{apiVersion: v1, kind: Pod}, {apiVersion: v1, kind: ConfigMap}]\n")
	pods, err := RequiredBySources(own, ManifestNamespaces(own))
	if err != nil || len(pods) != 6 || pods[perm("ns1/default", "ns1", "", "pods", "watch")] == "" || pods[perm("ns1/default", "ns1", "", "configmaps", "get")] == "" {
		t.Errorf("core resources, the default ServiceAccount: %v, %v", pods, err)
	}
	// A selector by another label, of two namespaces.
	two := decode(t, strings.Replace(manifests, "matchLabels: {kubernetes.io/metadata.name: tasks}", "matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [tasks, svc]}]", 1))
	both, err := RequiredBySources(two, ManifestNamespaces(two))
	if err != nil || len(both) != 6 || both[perm("svc/source", "svc", "batch", "jobs", "list")] == "" {
		t.Errorf("a selector of two namespaces: %v, %v", both, err)
	}
	// A selector that selects nothing is an error, not nothing required.
	none := decode(t, strings.Replace(manifests, "matchLabels: {kubernetes.io/metadata.name: tasks}", "matchLabels: {tasks: \"no\"}", 1))
	if _, err := RequiredBySources(none, ManifestNamespaces(none)); err == nil {
		t.Error("a namespaceSelector that selects no namespace: no error")
	}
}

const (
	handler = "system:serviceaccount:svc:handler"
	source  = "system:serviceaccount:svc:source"
)

// requests in the namespaces svc and tasks, as ReadAudit gives them.
func requests() []benchkit.AuditRequest {
	return []benchkit.AuditRequest{
		{User: handler, Verb: "get", Resource: "configmaps", Namespace: "svc", Name: "a", Code: 200},
		{User: handler, Verb: "get", Resource: "configmaps", Namespace: "svc", Name: "b", Code: 200},
		{User: handler, Verb: "delete", Resource: "configmaps", Namespace: "svc", Name: "a", Code: 200},
		{User: handler, Verb: "get", Resource: "pods/log", Namespace: "svc", Name: "p", Code: 200},
		{User: handler, Verb: "create", Group: "batch", Resource: "jobs", Namespace: "tasks", Code: 201},
		{User: source, Verb: "list", Group: "batch", Resource: "jobs", Namespace: "tasks", Code: 200},
		{User: source, Verb: "watch", Group: "batch", Resource: "jobs", Namespace: "tasks"},
		{User: handler, Verb: "get", URL: "/version", Code: 200},
		// Not of these ServiceAccounts: left out.
		{User: "system:admin", Verb: "delete", Resource: "secrets", Namespace: "svc"},
		{User: "system:serviceaccount:other:handler", Verb: "delete", Resource: "secrets", Namespace: "other"},
		{User: "system:serviceaccount:tasks:default", Verb: "delete", Resource: "secrets", Namespace: "tasks"},
	}
}

// The namespaces whose ServiceAccounts are checked.
var checked = map[string]bool{"svc": true}

func verdict(t *testing.T, y string, reqs []benchkit.AuditRequest) Verdict {
	t.Helper()
	objs := decode(t, y)
	granted, err := Granted(objs)
	if err != nil {
		t.Fatal(err)
	}
	required, err := RequiredBySources(objs, ManifestNamespaces(objs))
	if err != nil {
		t.Fatal(err)
	}
	return Compare(granted, required, Used(reqs, checked))
}

func TestUsed(t *testing.T) {
	used := Used(requests(), checked)
	want := map[Permission]int{
		perm("svc/handler", "svc", "", "configmaps", "get"):           2,
		perm("svc/handler", "svc", "", "configmaps", "delete"):        1,
		perm("svc/handler", "svc", "", "pods/log", "get"):             1,
		perm("svc/handler", "tasks", "batch", "jobs", "create"):       1,
		perm("svc/source", "tasks", "batch", "jobs", "list"):          1,
		perm("svc/source", "tasks", "batch", "jobs", "watch"):         1,
		{ServiceAccount: "svc/handler", URL: "/version", Verb: "get"}: 1,
	}
	if !reflect.DeepEqual(used, want) {
		t.Errorf("Used =\n%v\nwant\n%v", used, want)
	}
}

// Every request granted and every permission used (or required by the
// source's controller): no problem.
func TestCompareAgrees(t *testing.T) {
	v := verdict(t, manifests, requests())
	if p := v.Problems(); len(p) != 0 {
		t.Errorf("problems %q", p)
	}
	if len(v.Required) != 1 || v.Required[perm("svc/source", "tasks", "batch", "jobs", "get")] == "" {
		t.Errorf("required and unused: %v, want the source's get", v.Required)
	}
	if len(v.ByDefault) != 1 {
		t.Errorf("allowed to everyone: %v, want /version", v.ByDefault)
	}
}

// A permission no request used fails, whichever Role and namespace grant
// it.
func TestCompareFailsOnAPermissionNotUsed(t *testing.T) {
	for i, drop := range []int{2, 3, 4} { // the delete, the log, the create in the tasks' namespace
		reqs := requests()
		reqs = append(reqs[:drop], reqs[drop+1:]...)
		p := verdict(t, manifests, reqs).Problems()
		want := []string{"used by no request: svc/handler: delete /configmaps in svc", "used by no request: svc/handler: get /pods/log in svc", "used by no request: svc/handler: create batch/jobs in tasks"}[i]
		if len(p) != 1 || !strings.Contains(p[0], want) {
			t.Errorf("without request %d: problems %q, want one saying %q", drop, p, want)
		}
	}
}

// A request that no Role covers fails: another verb, another resource, a
// namespace no binding is in, a non-resource URL that is not everyone's, a
// ServiceAccount without a binding.
func TestCompareFailsOnARequestNotGranted(t *testing.T) {
	for _, c := range []struct {
		req  benchkit.AuditRequest
		want string
	}{
		{benchkit.AuditRequest{User: handler, Verb: "patch", Resource: "configmaps", Namespace: "svc", Code: 403}, "granted by no Role: svc/handler: patch /configmaps in svc (1 requests)"},
		{benchkit.AuditRequest{User: handler, Verb: "get", Resource: "secrets", Namespace: "svc", Code: 403}, "svc/handler: get /secrets in svc"},
		{benchkit.AuditRequest{User: handler, Verb: "get", Resource: "configmaps", Namespace: "kube-system", Code: 403}, "svc/handler: get /configmaps in kube-system"},
		{benchkit.AuditRequest{User: handler, Verb: "delete", Resource: "configmaps", Namespace: "tasks", Code: 403}, "svc/handler: delete /configmaps in tasks"},
		{benchkit.AuditRequest{User: handler, Verb: "list", Resource: "nodes", Code: 403}, "svc/handler: list /nodes cluster-wide"},
		{benchkit.AuditRequest{User: handler, Verb: "get", URL: "/metrics", Code: 403}, "svc/handler: get /metrics"},
		{benchkit.AuditRequest{User: "system:serviceaccount:svc:executor", Verb: "get", Resource: "pods", Namespace: "svc", Code: 403}, "svc/executor: get /pods in svc"},
		{benchkit.AuditRequest{User: source, Verb: "get", Group: "batch", Resource: "jobs/status", Namespace: "tasks", Code: 403}, "svc/source: get batch/jobs/status in tasks"},
		{benchkit.AuditRequest{User: source, Verb: "list", Group: "batch", Resource: "jobs", Namespace: "svc", Code: 403}, "svc/source: list batch/jobs in svc"},
	} {
		p := verdict(t, manifests, append(requests(), c.req)).Problems()
		if len(p) != 1 || !strings.Contains(p[0], c.want) {
			t.Errorf("with %+v: problems %q, want one saying %q", c.req, p, c.want)
		}
	}
}

// What the ApiServerSource's controller requires must be granted, used or
// not.
func TestCompareFailsOnARequiredPermissionNotGranted(t *testing.T) {
	noGet := strings.Replace(manifests, "verbs: [get, list, watch]", "verbs: [list, watch]", 1)
	p := verdict(t, noGet, requests()).Problems()
	if len(p) != 1 || !strings.Contains(p[0], "required, and granted by no Role: svc/source: get batch/jobs in tasks") {
		t.Errorf("problems %q", p)
	}
}

func TestEveryoneMay(t *testing.T) {
	for _, c := range []struct {
		p    Permission
		want bool
	}{
		{Permission{URL: "/api", Verb: "get"}, true},
		{Permission{URL: "/apis/batch/v1", Verb: "get"}, true},
		{Permission{URL: "/version", Verb: "get"}, true},
		{Permission{URL: "/openapi/v3", Verb: "get"}, true},
		{Permission{URL: "/metrics", Verb: "get"}, false},
		{Permission{URL: "/api", Verb: "post"}, false},
		{perm("a/b", "", "authorization.k8s.io", "selfsubjectaccessreviews", "create"), true},
		{perm("a/b", "", "authentication.k8s.io", "selfsubjectreviews", "create"), true},
		{perm("a/b", "", "authorization.k8s.io", "subjectaccessreviews", "create"), false},
		{perm("a/b", "n", "", "pods", "get"), false},
	} {
		if got := everyoneMay(c.p); got != c.want {
			t.Errorf("everyoneMay(%s) = %v, want %v", c.p, got, c.want)
		}
	}
}
