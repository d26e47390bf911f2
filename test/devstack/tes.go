package devstack

import (
	"bytes"
	"context"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// TESRole is the name of the TES API's ServiceAccount, Role and RoleBinding
// in config/knative/tes-rbac.yaml.
const TESRole = "tesk-tes"

// ApplyTESRBAC applies the TES API's ServiceAccount, Role and RoleBinding of
// config/knative/tes-rbac.yaml (at path) in the namespace.
func ApplyTESRBAC(ctx context.Context, c *cluster.Cluster, path, ns string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	objs, err := cluster.DecodeManifest(data)
	if err != nil {
		return err
	}
	var docs [][]byte
	roles := 0
	for _, o := range objs {
		o.SetNamespace(ns)
		if subs, ok := o.Object["subjects"].([]any); ok {
			for _, s := range subs {
				if m, ok := s.(map[string]any); ok {
					m["namespace"] = ns
				}
			}
		}
		if o.GetKind() == "Role" && o.GetName() == TESRole {
			roles++
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	if roles != 1 {
		return fmt.Errorf("%s has %d Roles named %s, want 1", path, roles, TESRole)
	}
	return c.Apply(ctx, bytes.Join(docs, []byte("\n---\n")))
}
