package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

const fieldManager = "tesk-test-cluster"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// DecodeManifest splits a multi-document YAML or JSON manifest into objects,
// skipping empty documents.
func DecodeManifest(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Apply creates or updates every object of the manifest by server-side apply
// (forcing conflicts). Namespaced objects without a namespace go to
// "default".
func (c *Cluster) Apply(ctx context.Context, manifest []byte) error {
	return c.apply(ctx, manifest, false)
}

// DryRunApply submits every object of the manifest as a server-side dry run:
// the API server validates and admits it (schemas of CRDs included) without
// storing anything. It returns the first rejection.
func (c *Cluster) DryRunApply(ctx context.Context, manifest []byte) error {
	return c.apply(ctx, manifest, true)
}

func (c *Cluster) apply(ctx context.Context, manifest []byte, dryRun bool) error {
	objs, err := DecodeManifest(manifest)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(c.Config)))
	for _, obj := range objs {
		if err := applyOne(ctx, c.Dynamic, mapper, obj, dryRun); err != nil {
			return err
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = dyn.Resource(mapping.Resource).Namespace(ns)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	po := metav1.PatchOptions{FieldManager: fieldManager, Force: &force, FieldValidation: "Strict"}
	if dryRun {
		po.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, po); err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return nil
}

// applyFiles applies every *.yaml file of dir, in name order.
func (c *Cluster) applyFiles(ctx context.Context, dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, b); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(n), err)
		}
	}
	return nil
}

func (c *Cluster) applyEmbedded(ctx context.Context, name string) error {
	b, err := embedded.ReadFile(name)
	if err != nil {
		return err
	}
	return c.Apply(ctx, b)
}

// waitCRDsEstablished waits until each named CRD has condition Established.
func (c *Cluster) waitCRDsEstablished(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := c.waitFor(ctx, "CRD "+name+" established", func(ctx context.Context) (bool, error) {
			u, err := c.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// KnativeCRDs lists the names of the Knative CRDs extracted by build.sh.
func (c *Cluster) KnativeCRDs() ([]string, error) {
	names, err := filepath.Glob(filepath.Join(c.CacheDir, "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		objs, err := DecodeManifest(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(n), err)
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				out = append(out, o.GetName())
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// InstallKnativeCRDs installs the CRDs of knative.dev/serving and
// knative.dev/eventing (their config/core YAML, extracted by build.sh) and
// waits until they are established, so that Knative objects can be
// validated by a server-side dry run. Only the CRDs are installed: no
// Knative controller or webhook runs.
func (c *Cluster) InstallKnativeCRDs(ctx context.Context) error {
	if err := c.applyFiles(ctx, filepath.Join(c.CacheDir, "crds")); err != nil {
		return fmt.Errorf("install Knative CRDs: %w", err)
	}
	names, err := c.KnativeCRDs()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no CRDs in %s", filepath.Join(c.CacheDir, "crds"))
	}
	if err := c.waitCRDsEstablished(ctx, names...); err != nil {
		return err
	}
	// Discovery lags a little behind Established; wait until every group answers.
	return c.waitFor(ctx, "Knative API groups in discovery", func(ctx context.Context) (bool, error) {
		groups, err := c.Client.Discovery().ServerGroups()
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, g := range groups.Groups {
			seen[g.Name] = true
		}
		for _, n := range names {
			if _, group, ok := strings.Cut(n, "."); ok && !seen[group] {
				return false, nil
			}
		}
		return true, nil
	})
}
