//go:build e2e

package manifests

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTESAPIManifests: the TES API's Role is bound to the ServiceAccount its
// Service runs as (what the Role grants is held to the requests the TES API
// makes by test/e2e's TestRolesAreExactlyWhatIsUsed); the Service
// runs cmd/tes, is reachable from outside the cluster (unlike the handler),
// takes the handler's settings and its own; the SinkBinding binds it to the
// Broker.
func TestTESAPIManifests(t *testing.T) {
	objs := loadObjects(t)
	find(t, objs, "Role", "tesk-tes")
	find(t, objs, "ServiceAccount", "tesk-tes")
	rb := find(t, objs, "RoleBinding", "tesk-tes")
	ref, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name")
	subjects, _, _ := unstructured.NestedSlice(rb.Object, "subjects")
	if ref != "tesk-tes" || len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "tesk-tes" {
		t.Errorf("RoleBinding tesk-tes: roleRef %s, subjects %v", ref, subjects)
	}
	svc := find(t, objs, "Service", "tesk-tes")
	if sa, _, _ := unstructured.NestedString(svc.Object, "spec", "template", "spec", "serviceAccountName"); sa != "tesk-tes" {
		t.Errorf("the TES API's Service runs as %q, want tesk-tes", sa)
	}
	if v := svc.GetLabels()["networking.knative.dev/visibility"]; v != "" {
		t.Errorf("the TES API's Service is %s: it must be reachable from outside the cluster", v)
	}
	containers, _, _ := unstructured.NestedSlice(svc.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if c["image"] != "ko://github.com/elixir-cloud-aai/tesk-knative/cmd/tes" {
		t.Errorf("the TES API's image %v", c["image"])
	}
	var from []string
	for _, e := range c["envFrom"].([]any) {
		from = append(from, e.(map[string]any)["configMapRef"].(map[string]any)["name"].(string))
	}
	if !reflect.DeepEqual(from, []string{"tesk-handler-config", "tesk-tes-config"}) {
		t.Errorf("the TES API's envFrom %v", from)
	}
	sb := find(t, objs, "SinkBinding", "tesk-tes")
	subj, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "subject")
	sink, _, _ := unstructured.NestedStringMap(sb.Object, "spec", "sink", "ref")
	if subj["kind"] != "Service" || subj["name"] != "tesk-tes" || sink["kind"] != "Broker" || sink["name"] != "default" {
		t.Errorf("SinkBinding: subject %v, sink %v", subj, sink)
	}
}

// tesNotConfigured are variables the TES API reads that its ConfigMap must
// not set: Knative sets PORT, the SinkBinding K_SINK; in the cluster it uses
// its ServiceAccount; POD_TIMEOUT and the rules of the state come from the
// handler's ConfigMap.
var tesNotConfigured = map[string]bool{"PORT": true, "KUBECONFIG": true, "K_SINK": true, "POD_TIMEOUT": true}

// TestTESConfigMapHoldsEveryVariable: every variable cmd/tes/main.go reads is
// in tesk-tes-config (or set otherwise), and the ConfigMap holds nothing else.
func TestTESConfigMapHoldsEveryVariable(t *testing.T) {
	objs := loadObjects(t)
	data, _, _ := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "tesk-tes-config").Object, "data")
	read := tesVariablesRead(t)
	for name := range read {
		_, in := data[name]
		switch {
		case tesNotConfigured[name] && in:
			t.Errorf("tesk-tes-config sets %s, which comes from elsewhere", name)
		case !tesNotConfigured[name] && !in:
			t.Errorf("the TES API reads %s, but tesk-tes-config does not list it", name)
		}
	}
	for name := range data {
		if !read[name] {
			t.Errorf("tesk-tes-config sets %s, which the TES API does not read", name)
		}
	}
}

var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)

// tesVariablesRead lists the names passed to getenv and to the constructors
// of internal/settings, and the names of the settings.Setting literals, in
// cmd/tes's sources.
func tesVariablesRead(t *testing.T) map[string]bool {
	t.Helper()
	sources, err := filepath.Glob(filepath.Join("..", "..", "cmd", "tes", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]bool{"getenv": true, "settings.Text": true, "settings.RawText": true, "settings.Bool": true,
		"settings.Port": true, "settings.Int": true, "settings.IntFunc": true, "settings.Float": true}
	found := map[string]bool{}
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), src, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		inspectReads(file, readers, found)
	}
	if len(found) < 15 {
		t.Fatalf("found only %d variables read by the TES API (%v): the scan of the sources no longer works", len(found), found)
	}
	return found
}

// inspectReads adds to found the variable names that file passes as string
// literals to the functions readers names, or gives as the Name of a
// settings.Setting (in a table of them, its type left out).
func inspectReads(file *ast.File, readers, found map[string]bool) {
	ast.Inspect(file, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			key, isIdent := kv.Key.(*ast.Ident)
			lit, isLit := kv.Value.(*ast.BasicLit)
			if isIdent && key.Name == "Name" && isLit && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(name) {
					found[name] = true
				}
			}
			return true
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if !readers[readerName(call.Fun)] {
			return true
		}
		for _, a := range call.Args {
			if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(name) {
					found[name] = true
				}
			}
		}
		return true
	})
}
