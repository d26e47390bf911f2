// Package rbacaudit holds the Roles of a set of manifests to the requests
// that an API server's audit log shows their ServiceAccounts making, both
// ways: every request must be granted by a Role bound to its
// ServiceAccount, and every permission a Role grants must be used by a
// request, or be required by something other than a request (the
// ApiServerSource controller's access check).
package rbacaudit

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
)

// Permission is one verb on one resource in one namespace for one
// ServiceAccount, or one verb on a non-resource URL.
type Permission struct {
	// ServiceAccount is "namespace/name".
	ServiceAccount string
	// Namespace is where the permission applies ("" for a cluster-scoped
	// object or a non-resource URL).
	Namespace string
	// Group ("" for the core group) and Resource, with its subresource
	// ("pods/log").
	Group, Resource string
	// URL is the path of a non-resource request (no Group and Resource).
	URL  string
	Verb string
}

func (p Permission) String() string {
	if p.URL != "" {
		return fmt.Sprintf("%s: %s %s", p.ServiceAccount, p.Verb, p.URL)
	}
	where := "cluster-wide"
	if p.Namespace != "" {
		where = "in " + p.Namespace
	}
	return fmt.Sprintf("%s: %s %s/%s %s", p.ServiceAccount, p.Verb, p.Group, p.Resource, where)
}

// Granted lists every permission that the RoleBindings of objs give to
// ServiceAccounts, each with the Roles (namespace/name) that grant it. A
// binding or rule this check cannot hold to requests is an error: a
// ClusterRoleBinding, a subject other than a ServiceAccount, a role that
// objs lack, a wildcard, resourceNames, nonResourceURLs in a Role.
func Granted(objs []*unstructured.Unstructured) (map[Permission][]string, error) {
	roles := map[string]*unstructured.Unstructured{} // "Role ns/name", "ClusterRole name"
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			roles["Role "+o.GetNamespace()+"/"+o.GetName()] = o
		case "ClusterRole":
			roles["ClusterRole "+o.GetName()] = o
		case "ClusterRoleBinding":
			return nil, fmt.Errorf("ClusterRoleBinding %s: cluster-wide bindings are not checked here", o.GetName())
		}
	}
	out := map[Permission][]string{}
	for _, rb := range objs {
		if rb.GetKind() != "RoleBinding" {
			continue
		}
		ns := rb.GetNamespace()
		kind, _, _ := unstructured.NestedString(rb.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name")
		key := kind + " " + name
		if kind == "Role" {
			key = "Role " + ns + "/" + name
		}
		role, ok := roles[key]
		if !ok {
			return nil, fmt.Errorf("RoleBinding %s/%s refers to %s, which the manifests lack", ns, rb.GetName(), key)
		}
		subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, s := range subjects {
			sm, _ := s.(map[string]any)
			skind, _ := sm["kind"].(string)
			sname, _ := sm["name"].(string)
			sns, _ := sm["namespace"].(string)
			if skind != "ServiceAccount" {
				return nil, fmt.Errorf("RoleBinding %s/%s binds a %s: only ServiceAccounts are checked here", ns, rb.GetName(), skind)
			}
			if sns == "" {
				sns = ns
			}
			for i, r := range rules {
				rm, _ := r.(map[string]any)
				for _, bad := range []string{"resourceNames", "nonResourceURLs"} {
					if _, ok := rm[bad]; ok {
						return nil, fmt.Errorf("%s rule %d: %s are not checked here", key, i, bad)
					}
				}
				groups, _, _ := unstructured.NestedStringSlice(rm, "apiGroups")
				resources, _, _ := unstructured.NestedStringSlice(rm, "resources")
				verbs, _, _ := unstructured.NestedStringSlice(rm, "verbs")
				for _, g := range groups {
					for _, res := range resources {
						for _, v := range verbs {
							if g == "*" || v == "*" || strings.Contains(res, "*") {
								return nil, fmt.Errorf("%s rule %d: a wildcard (%s %s/%s) cannot be held to requests", key, i, v, g, res)
							}
							p := Permission{ServiceAccount: sns + "/" + sname, Namespace: ns, Group: g, Resource: res, Verb: v}
							out[p] = appendOnce(out[p], key)
						}
					}
				}
			}
		}
	}
	return out, nil
}

// WhyRequired is why the ApiServerSource controller requires the
// permissions of RequiredBySources.
const WhyRequired = "the ApiServerSource controller checks that the source's ServiceAccount may get, list and watch each of its resources in each of its namespaces " +
	"(SubjectAccessReviews in knative.dev/eventing v0.50.0, pkg/reconciler/apiserversource/apiserversource.go, runAccessCheck) " +
	"and does not run the adapter otherwise, whatever the adapter requests itself (its reflectors stream their lists as watches where the API server can)"

// NamespaceLister lists the namespaces a label selector selects, as the
// ApiServerSource controller does for a source's namespaceSelector.
type NamespaceLister func(labels.Selector) ([]string, error)

// ManifestNamespaces lists the Namespaces of objs that a selector selects,
// by their labels and the name label Kubernetes gives every namespace.
func ManifestNamespaces(objs []*unstructured.Unstructured) NamespaceLister {
	return func(sel labels.Selector) ([]string, error) {
		var out []string
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				continue
			}
			l := labels.Set{"kubernetes.io/metadata.name": o.GetName()}
			for k, v := range o.GetLabels() {
				l[k] = v
			}
			if sel.Matches(l) {
				out = append(out, o.GetName())
			}
		}
		sort.Strings(out)
		return out, nil
	}
}

// RequiredBySources lists the permissions that the ApiServerSource
// controller requires of each ApiServerSource of objs before it runs the
// source's receive adapter, whether the adapter's requests use them or not:
// get, list and watch of each resource, for the source's ServiceAccount,
// in each namespace its namespaceSelector selects (listed by namespaces),
// or in its own without one (WhyRequired).
func RequiredBySources(objs []*unstructured.Unstructured, namespaces NamespaceLister) (map[Permission]string, error) {
	out := map[Permission]string{}
	for _, o := range objs {
		if o.GetKind() != "ApiServerSource" {
			continue
		}
		where := []string{o.GetNamespace()}
		if raw, ok, _ := unstructured.NestedMap(o.Object, "spec", "namespaceSelector"); ok {
			var ls metav1.LabelSelector
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
				return nil, fmt.Errorf("ApiServerSource %s: namespaceSelector: %w", o.GetName(), err)
			}
			sel, err := metav1.LabelSelectorAsSelector(&ls)
			if err != nil {
				return nil, fmt.Errorf("ApiServerSource %s: namespaceSelector: %w", o.GetName(), err)
			}
			if where, err = namespaces(sel); err != nil {
				return nil, fmt.Errorf("ApiServerSource %s: namespaces of %s: %w", o.GetName(), sel, err)
			}
			if len(where) == 0 {
				return nil, fmt.Errorf("ApiServerSource %s: its namespaceSelector %s selects no namespace", o.GetName(), sel)
			}
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "serviceAccountName")
		if sa == "" {
			sa = "default"
		}
		resources, _, _ := unstructured.NestedSlice(o.Object, "spec", "resources")
		for _, r := range resources {
			rm, _ := r.(map[string]any)
			apiVersion, _ := rm["apiVersion"].(string)
			kind, _ := rm["kind"].(string)
			gv, err := schema.ParseGroupVersion(apiVersion)
			if err != nil {
				return nil, fmt.Errorf("ApiServerSource %s: %w", o.GetName(), err)
			}
			// The controller names the resource as this does.
			gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
			for _, ns := range where {
				for _, v := range []string{"get", "list", "watch"} {
					out[Permission{ServiceAccount: o.GetNamespace() + "/" + sa, Namespace: ns, Group: gv.Group, Resource: gvr.Resource, Verb: v}] = WhyRequired
				}
			}
		}
	}
	return out, nil
}

// Used counts the permissions that requests exercise, for the requests of
// the ServiceAccounts of the given namespaces.
func Used(reqs []benchkit.AuditRequest, namespaces map[string]bool) map[Permission]int {
	out := map[Permission]int{}
	for _, r := range reqs {
		rest, ok := strings.CutPrefix(r.User, "system:serviceaccount:")
		if !ok {
			continue
		}
		saNS, name, ok := strings.Cut(rest, ":")
		if !ok || !namespaces[saNS] {
			continue
		}
		p := Permission{ServiceAccount: saNS + "/" + name, Verb: r.Verb}
		if r.Resource == "" {
			p.URL, _, _ = strings.Cut(r.URL, "?")
		} else {
			p.Group, p.Resource, p.Namespace = r.Group, r.Resource, r.Namespace
		}
		out[p]++
	}
	return out
}

// everyoneMay are what Kubernetes' default ClusterRoles (system:discovery,
// system:public-info-viewer, system:basic-user) let every authenticated
// user do: requests that no Role of the manifests needs to grant.
func everyoneMay(p Permission) bool {
	if p.URL != "" {
		if p.Verb != "get" {
			return false
		}
		for _, pattern := range []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version", "/version/", "/openapi", "/openapi/*"} {
			if ok, _ := path.Match(pattern, p.URL); ok || (strings.HasSuffix(pattern, "/*") && strings.HasPrefix(p.URL, strings.TrimSuffix(pattern, "*"))) {
				return true
			}
		}
		return false
	}
	return p.Verb == "create" && p.Namespace == "" &&
		(p.Group == "authorization.k8s.io" && (p.Resource == "selfsubjectaccessreviews" || p.Resource == "selfsubjectrulesreviews") ||
			p.Group == "authentication.k8s.io" && p.Resource == "selfsubjectreviews")
}

// Verdict is the comparison of what is granted with what is used.
type Verdict struct {
	// Uncovered are permissions requests used that no Role grants (nor
	// Kubernetes' defaults), with their request counts.
	Uncovered map[Permission]int
	// Unused are permissions Roles grant that no request used and nothing
	// requires, with the Roles that grant them.
	Unused map[Permission][]string
	// NotGranted are permissions required otherwise that no Role grants.
	NotGranted map[Permission]string
	// Required are permissions granted and required otherwise that no
	// request used: kept for their reason, listed so that a reader sees
	// them.
	Required map[Permission]string
	// ByDefault are requests Kubernetes' default ClusterRoles allow.
	ByDefault map[Permission]int
}

// Compare holds what is granted to what is used and what is required.
func Compare(granted map[Permission][]string, required map[Permission]string, used map[Permission]int) Verdict {
	v := Verdict{Uncovered: map[Permission]int{}, Unused: map[Permission][]string{}, NotGranted: map[Permission]string{},
		Required: map[Permission]string{}, ByDefault: map[Permission]int{}}
	for p, n := range used {
		switch {
		case granted[p] != nil:
		case everyoneMay(p):
			v.ByDefault[p] = n
		default:
			v.Uncovered[p] = n
		}
	}
	for p, roles := range granted {
		if used[p] > 0 {
			continue
		}
		if why, ok := required[p]; ok {
			v.Required[p] = why
			continue
		}
		v.Unused[p] = roles
	}
	for p, why := range required {
		if granted[p] == nil {
			v.NotGranted[p] = why
		}
	}
	return v
}

// Problems lists, sorted, every way the Roles and the requests disagree.
func (v Verdict) Problems() []string {
	var out []string
	for p, n := range v.Uncovered {
		out = append(out, fmt.Sprintf("requested, and granted by no Role: %s (%d requests)", p, n))
	}
	for p, roles := range v.Unused {
		out = append(out, fmt.Sprintf("granted by %s, and used by no request: %s", strings.Join(roles, ", "), p))
	}
	for p, why := range v.NotGranted {
		out = append(out, fmt.Sprintf("required, and granted by no Role: %s (%s)", p, why))
	}
	sort.Strings(out)
	return out
}

// Report lists, sorted, what each ServiceAccount used and what is kept
// though unused, for the test's log.
func Report(used map[Permission]int, v Verdict) string {
	var lines []string
	for p, n := range used {
		lines = append(lines, fmt.Sprintf("  used %6d× %s", n, p))
	}
	for p := range v.Required {
		lines = append(lines, fmt.Sprintf("  required, unused: %s", p))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
