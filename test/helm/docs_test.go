package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// docs/helm.md's table names every value of values.yaml, and no other.
func TestDocsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(ChartDir(), "..", "..", "docs", "helm.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	defaults := map[string]any{}
	if err := yamlUnmarshalFile(filepath.Join(ChartDir(), "values.yaml"), &defaults); err != nil {
		t.Fatal(err)
	}
	all := map[string]bool{}
	leaves("", defaults, all)
	for k := range all {
		if !documented[k] {
			t.Errorf("value %s is not in docs/helm.md's table", k)
		}
	}
	for k := range documented {
		if !all[k] {
			t.Errorf("docs/helm.md's table names %s, which values.yaml does not hold", k)
		}
	}
}
