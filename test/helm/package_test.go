package helm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

func TestChartVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.0":                  "0.3.0",
		"0.3.0":                   "0.3.0",
		"v1.2.3-rc.1":             "1.2.3-rc.1",
		"v0.3.0-4-gabc1234-dirty": "0.3.0-4-gabc1234-dirty",
		"abc1234":                 "0.0.0-dev+abc1234",
		"abc1234-dirty":           "0.0.0-dev+abc1234-dirty",
		"0.0.0-dev":               "0.0.0-dev",
		"v1.2":                    "0.0.0-dev+v1.2",
		"":                        "0.0.0-dev",
	} {
		if got := ChartVersion(in); got != want {
			t.Errorf("ChartVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// The packaged chart carries the build's version: the chart's version,
// appVersion and the three images' tags; the rest of values.yaml is the
// repository's, byte for byte.
func TestPackage(t *testing.T) {
	for _, c := range []struct{ version, chartVersion string }{
		{"v0.3.0", "0.3.0"},
		{"v0.3.0-4-gabc1234-dirty", "0.3.0-4-gabc1234-dirty"},
		{"abc1234", "0.0.0-dev+abc1234"},
	} {
		t.Run(c.version, func(t *testing.T) {
			path, err := Package(t.TempDir(), c.version)
			if err != nil {
				t.Fatal(err)
			}
			if want := "tesk-knative-" + c.chartVersion + ".tgz"; filepath.Base(path) != want {
				t.Errorf("package %s, want %s", filepath.Base(path), want)
			}
			pkg, err := loader.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if pkg.Metadata.Version != c.chartVersion || pkg.Metadata.AppVersion != c.version {
				t.Errorf("version %q appVersion %q, want %q and %q", pkg.Metadata.Version, pkg.Metadata.AppVersion, c.chartVersion, c.version)
			}
			var raw []byte
			for _, f := range pkg.Raw {
				if f.Name == chartutil.ValuesfileName {
					raw = f.Data
				}
			}
			var vals map[string]any
			if err := yaml.Unmarshal(raw, &vals); err != nil {
				t.Fatal(err)
			}
			images := vals["images"].(map[string]any)
			for _, name := range []string{"handler", "tes", "filer"} {
				if tag := images[name].(map[string]any)["tag"]; tag != c.version {
					t.Errorf("images.%s.tag = %v, want %s", name, tag, c.version)
				}
			}
			if tag := images["eventDisplay"].(map[string]any)["tag"]; tag != "" {
				t.Errorf("images.eventDisplay.tag = %v, want it as values.yaml has it", tag)
			}
			orig, err := os.ReadFile(filepath.Join(ChartDir(), chartutil.ValuesfileName))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := dropTagLines(raw), dropTagLines(orig); !bytes.Equal(got, want) {
				t.Errorf("values.yaml differs beyond the image tags")
			}
			if n := strings.Count(string(raw), `tag: "`+c.version+`"`); n != 3 {
				t.Errorf("%d tag lines set, want 3", n)
			}
			// The packaged chart renders with the versioned images.
			manifest, err := renderChart(pkg, map[string]any{"auth": map[string]any{"mode": "none"}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(manifest, "tesk-knative-handler:"+c.version) || !strings.Contains(manifest, "tesk-knative-tes:"+c.version) {
				t.Errorf("the packaged chart's manifest does not name the images as %s", c.version)
			}
		})
	}
}

func TestPackageRefusesBadVersions(t *testing.T) {
	for _, v := range []string{"", " ", "v1 2", "v1/2", `v1"`} {
		if path, err := Package(t.TempDir(), v); err == nil {
			t.Errorf("version %q packaged as %s", v, path)
		}
	}
}

func dropTagLines(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "    tag: ") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}
