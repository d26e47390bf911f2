package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// ConfigObjects reads every object of config/knative under root: the
// documents of the files kustomization.yaml lists, in its order, as they
// are written (kustomize's namespace and replacements not applied).
func ConfigObjects(root string) ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(root, "config", "knative")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("kustomization.yaml: %w", err)
	}
	if len(k.Resources) == 0 {
		return nil, errors.New("kustomization.yaml lists no resources")
	}
	var out []*unstructured.Unstructured
	for _, f := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		objs, err := cluster.DecodeManifest(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// IsRBAC says whether an object is a ServiceAccount, a Role or a
// RoleBinding.
func IsRBAC(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "ServiceAccount", "Role", "RoleBinding":
		return true
	}
	return false
}

// InNamespace returns copies of objs with each of their namespaces made
// ns, as a test deploys the platform's and the tasks' objects into one
// namespace of its own: the objects', the RoleBindings' subjects', and the
// namespaces an ApiServerSource's namespaceSelector selects. The
// Namespace objects stay as they are.
func InNamespace(objs []*unstructured.Unstructured, ns string) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetKind() != "Namespace" {
			o.SetNamespace(ns)
		}
		if subs, ok := o.Object["subjects"].([]any); ok {
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					m["namespace"] = ns
				}
			}
		}
		if o.GetKind() == "ApiServerSource" {
			if _, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "namespaceSelector"); ok {
				_ = unstructured.SetNestedField(o.Object, map[string]any{
					"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns},
				}, "spec", "namespaceSelector")
			}
		}
		out = append(out, o)
	}
	return out
}

// HandlerRoleOf returns the handler's Role (HandlerRole) of objs.
func HandlerRoleOf(objs []*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Role" && o.GetName() == HandlerRole {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("config/knative has %d Roles named %s, want 1", len(found), HandlerRole)
	}
	return found[0], nil
}

// ApplyRBACObjects applies the ServiceAccounts, Roles and RoleBindings of
// objs.
func ApplyRBACObjects(ctx context.Context, c *cluster.Cluster, objs []*unstructured.Unstructured) error {
	var docs [][]byte
	for _, o := range objs {
		if !IsRBAC(o) {
			continue
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	if len(docs) == 0 {
		return errors.New("no ServiceAccount, Role or RoleBinding to apply")
	}
	return c.Apply(ctx, bytes.Join(docs, []byte("\n---\n")))
}

// SourceServiceAccount is the ServiceAccount that the ApiServerSource of
// objs runs its adapter as.
func SourceServiceAccount(objs []*unstructured.Unstructured) (string, error) {
	var names []string
	for _, o := range objs {
		if o.GetKind() == "ApiServerSource" {
			sa, _, _ := unstructured.NestedString(o.Object, "spec", "serviceAccountName")
			if sa == "" {
				sa = "default"
			}
			names = append(names, sa)
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("config/knative has %d ApiServerSources, want 1", len(names))
	}
	return names[0], nil
}
