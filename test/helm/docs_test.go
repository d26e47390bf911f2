package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// docs/helm.md's production.yaml renders, and sets what it says it does.
func TestDocsProductionValues(t *testing.T) {
	out, err := Render(productionValues(t))
	if err != nil {
		t.Fatalf("production.yaml: %v", err)
	}
	for _, w := range []string{`STORAGE_CLASS_NAME: "fast-ssd"`, `DEFAULT_DISK_GB: "10"`, `TASK_TTL_SECONDS: "2592000"`, "kind: DomainMapping",
		`AWS_SECRET_NAME: "tesk-s3"`, "eventing.knative.dev/broker.class: Kafka", `autoscaling.knative.dev/min-scale: "1"`,
		`\"tracing-endpoint\":\"http://otel-collector.observability:4318/v1/traces\"`} {
		if !strings.Contains(out, w) {
			t.Errorf("production.yaml's rendering lacks %q", w)
		}
	}
}
