package helm

import (
	"strings"
	"testing"
)

// config/knative is the chart's rendering with config/knative/values.yaml,
// file by file, and kustomization.yaml lists exactly the rendered files.
func TestConfigKnativeIsTheChartsRendering(t *testing.T) {
	files, err := Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("the rendering has %d files", len(files))
	}
	problems, err := ManifestsDiffer(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("config/knative is not the chart's rendering (run make manifests):\n%s", strings.Join(problems, "\n"))
	}
}

func TestFirstDifference(t *testing.T) {
	cases := []struct{ have, want, diff string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nb\n", "a\nc\n", `line 2: the file has "b", the rendering "c"`},
		{"a\n", "a\nb\n", `line 2: the file has "", the rendering "b"`},
		{"a", "a\nb", `line 2: the file ends, the rendering has "b"`},
		{"a\nb", "a", `line 2: the rendering ends, the file has "b"`},
	}
	for _, c := range cases {
		if got := firstDifference(c.have, c.want); got != c.diff {
			t.Errorf("firstDifference(%q, %q) = %q, want %q", c.have, c.want, got, c.diff)
		}
	}
}
