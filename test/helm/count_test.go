package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var kindName = regexp.MustCompile(`(?m)^kind: (\S+)\nmetadata:\n  name: (\S+)`)

// The chart with config/knative's namespaces installs every object
// config/knative holds, under the same kinds and names.
func TestChartHoldsConfigKnative(t *testing.T) {
	out, err := Render(map[string]any{"auth": map[string]any{"mode": "none"}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	files, _ := filepath.Glob(filepath.Join(ChartDir(), "..", "..", "config", "knative", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range kindName.FindAllStringSubmatch(string(b), -1) {
			want = append(want, m[1]+"/"+m[2])
		}
	}
	var got []string
	for _, m := range kindName.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+"/"+m[2])
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(want, " ") != strings.Join(got, " ") || len(want) < 20 {
		t.Errorf("objects differ:\nconfig/knative %v\nchart          %v", want, got)
	}
}
