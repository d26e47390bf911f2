//go:build e2e

package manifests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// kubectl returns the kubectl that `make cluster-bins` builds with the local
// control plane: building the kustomization needs kubectl's kustomize.
func kubectl(t *testing.T) string {
	t.Helper()
	path, err := cluster.Kubectl()
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	return path
}

func run(t *testing.T, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// checkRendered checks what kustomize built, and dry-runs it: every object
// of the files, each in one of config/knative's namespaces, the Roles'
// subjects in the platform's, the services' NAMESPACE the tasks'.
func checkRendered(t *testing.T, out []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(loadObjects(t)); len(objs) != want {
		t.Errorf("the build has %d objects, the files %d", len(objs), want)
	}
	ns, err := layoutOf(objs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Namespace" && !ns.has(o.GetNamespace()) {
			t.Errorf("%s %s in namespace %q, want one of %v", o.GetKind(), o.GetName(), o.GetNamespace(), ns.all)
		}
		if subjects, ok, _ := unstructured.NestedSlice(o.Object, "subjects"); ok {
			for _, s := range subjects {
				if got := s.(map[string]any)["namespace"]; got != ns.platform {
					t.Errorf("RoleBinding %s: subject in namespace %v, want %s", o.GetName(), got, ns.platform)
				}
			}
		}
		if o.GetKind() == "ConfigMap" && (o.GetName() == "tesk-handler-config" || o.GetName() == "tesk-tes-config") {
			if got, _, _ := unstructured.NestedString(o.Object, "data", "NAMESPACE"); got != ns.tasks {
				t.Errorf("%s: NAMESPACE=%q, want %q", o.GetName(), got, ns.tasks)
			}
		}
	}
	c := liveCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range ns.all {
		if err := ensureNamespace(ctx, c, n); err != nil {
			t.Fatal(err)
		}
	}
	mapper := newMapper(c)
	for _, o := range objs {
		if _, err := dryRun(ctx, c, mapper, o); err != nil {
			t.Errorf("built %s %s rejected: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return objs
}

// TestKustomizeBuild builds config/knative as kubectl apply -k does and
// dry-runs the result.
func TestKustomizeBuild(t *testing.T) {
	checkRendered(t, run(t, nil, kubectl(t), "kustomize", configDir))
}

// TestDeployScriptSetsTheImages: make deploy (hack/deploy.sh) replaces the
// ko:// reference with the handler's image and sets the filer image in the
// ConfigMap, and what it would apply is accepted.
func TestDeployScriptSetsTheImages(t *testing.T) {
	k8s := kubectl(t)
	out := run(t, []string{
		"PRINT_ONLY=1", "KUBECTL=" + k8s, "KO_DOCKER_REPO=",
		"HANDLER_IMAGE=registry.example:5000/tesk/handler:v1.2.3",
		"TES_IMAGE=registry.example:5000/tesk/tes:v1.2.3",
		"FILER_IMAGE=registry.example:5000/tesk/filer:1.2",
	}, filepath.Join("..", "..", "hack", "deploy.sh"))
	if bytes.Contains(out, []byte("ko://")) {
		t.Error("a ko:// reference is left")
	}
	objs := checkRendered(t, out)
	for _, o := range objs {
		switch {
		case o.GetKind() == "Service" && o.GetName() == "tesk-handler":
			var image string
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				image, _ = containers[0].(map[string]any)["image"].(string)
			}
			if image != "registry.example:5000/tesk/handler:v1.2.3" {
				t.Errorf("handler image %q", image)
			}
		case o.GetKind() == "Service" && o.GetName() == "tesk-tes":
			var image string
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 {
				image, _ = containers[0].(map[string]any)["image"].(string)
			}
			if image != "registry.example:5000/tesk/tes:v1.2.3" {
				t.Errorf("TES API image %q", image)
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "tesk-handler-config":
			data, _, _ := unstructured.NestedStringMap(o.Object, "data")
			if data["FILER_NAME"] != "registry.example:5000/tesk/filer" || data["FILER_VERSION"] != "1.2" {
				t.Errorf("filer image %s:%s, want registry.example:5000/tesk/filer:1.2", data["FILER_NAME"], data["FILER_VERSION"])
			}
		}
	}
}
