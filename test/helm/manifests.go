package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ConfigDir is config/knative, the manifests kubectl apply -k deploys: the
// chart's rendering with ConfigValues.
func ConfigDir() string {
	return filepath.Join(ChartDir(), "..", "..", "config", "knative")
}

// ConfigValues is the file of config/knative holding the chart's values it
// is rendered with.
const ConfigValues = "values.yaml"

// configHeader opens every rendered file of config/knative.
const configHeader = "# Rendered from charts/tesk-knative with config/knative/values.yaml by\n" +
	"# make manifests: change those and run it, not this file.\n"

// Manifests renders config/knative: the chart with config/knative's
// values.yaml, each template's text, under a header saying so, by file name.
func Manifests() (map[string]string, error) {
	vals := map[string]any{}
	if err := yamlUnmarshalFile(filepath.Join(ConfigDir(), ConfigValues), &vals); err != nil {
		return nil, fmt.Errorf("config/knative/%s: %w", ConfigValues, err)
	}
	files, err := RenderFiles(vals)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart with config/knative/%s: %w", ConfigValues, err)
	}
	for name, text := range files {
		files[name] = configHeader + strings.TrimLeft(text, "\n")
	}
	return files, nil
}

// ManifestsDiffer compares config/knative with the rendering: each file that
// is missing, differs (with its first differing line) or is left over, and
// a kustomization.yaml whose resources are not the rendered files.
func ManifestsDiffer(files map[string]string) ([]string, error) {
	dir := ConfigDir()
	var problems []string
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			problems = append(problems, fmt.Sprintf("config/knative/%s is missing", name))
			continue
		} else if err != nil {
			return nil, err
		}
		if d := firstDifference(string(b), files[name]); d != "" {
			problems = append(problems, fmt.Sprintf("config/knative/%s differs from the rendering: %s", name, d))
		}
	}
	on, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range on {
		name := filepath.Base(f)
		if _, ok := files[name]; !ok && name != ConfigValues && name != "kustomization.yaml" {
			problems = append(problems, fmt.Sprintf("config/knative/%s is not rendered by the chart", name))
		}
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yamlUnmarshalFile(filepath.Join(dir, "kustomization.yaml"), &k); err != nil {
		return nil, err
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	if !slices.Equal(listed, names) {
		problems = append(problems, fmt.Sprintf("config/knative/kustomization.yaml lists %v, the rendering is %v", listed, names))
	}
	return problems, nil
}

// firstDifference describes the first line where have and want differ, or
// is empty when they are the same.
func firstDifference(have, want string) string {
	if have == want {
		return ""
	}
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := 0; ; i++ {
		switch {
		case i >= len(h):
			return fmt.Sprintf("line %d: the file ends, the rendering has %q", i+1, w[i])
		case i >= len(w):
			return fmt.Sprintf("line %d: the rendering ends, the file has %q", i+1, h[i])
		case h[i] != w[i]:
			return fmt.Sprintf("line %d: the file has %q, the rendering %q", i+1, h[i], w[i])
		}
	}
}
