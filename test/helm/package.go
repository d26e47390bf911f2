package helm

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// DevChartVersion is the chart's version for a build version that is not
// SemVer (a commit outside any tag): 0.0.0-dev, with the build version as
// build metadata.
const DevChartVersion = "0.0.0-dev"

// ChartVersion is the chart's version for a build's version (git describe
// --tags --always --dirty): the tag without its v (v0.3.0: 0.3.0;
// v0.3.0-4-gabc1234-dirty: 0.3.0-4-gabc1234-dirty, a pre-release of
// 0.3.0 in SemVer), or DevChartVersion+<the version's characters that
// build metadata takes> for anything else.
func ChartVersion(version string) string {
	v := strings.TrimPrefix(strings.TrimSpace(version), "v")
	if sv, err := semver.StrictNewVersion(v); err == nil {
		return sv.String()
	}
	meta := strings.Trim(regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(strings.TrimSpace(version), "."), ".")
	if meta == "" {
		return DevChartVersion
	}
	return DevChartVersion + "+" + meta
}

// imageTagRE finds the tag of the handler's, the TES API's and the filer's
// image in values.yaml (each image's repository line, then its tag line).
var imageTagRE = regexp.MustCompile(`(?m)^(  (?:handler|tes|filer):\n    repository: [^\n]*\n    tag: )[^\n]*$`)

// releasedImages are the images whose tags Package sets.
var releasedImages = []string{"handler", "tes", "filer"}

// Package packages the chart into the folder out as the build's version:
// the chart's version is ChartVersion(version), its appVersion is version,
// and so are the tags of the handler's, the TES API's and the filer's
// images in its values.yaml (the rest of values.yaml as it is). It returns
// the package's path.
func Package(out, version string) (string, error) {
	version = strings.TrimSpace(version)
	if version == "" {
		return "", fmt.Errorf("package: no version")
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`).MatchString(version) {
		return "", fmt.Errorf("package: version %q is not an image tag", version)
	}
	c, err := loader.LoadDir(ChartDir())
	if err != nil {
		return "", err
	}
	if err := setVersion(c, version); err != nil {
		return "", err
	}
	return chartutil.Save(c, out)
}

func setVersion(c *chart.Chart, version string) error {
	c.Metadata.Version = ChartVersion(version)
	c.Metadata.AppVersion = version
	for _, f := range c.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if n := len(imageTagRE.FindAllIndex(f.Data, -1)); n != len(releasedImages) {
			return fmt.Errorf("package: values.yaml: found %d of the tags of images.{handler,tes,filer}, want %d", n, len(releasedImages))
		}
		f.Data = imageTagRE.ReplaceAll(f.Data, []byte("${1}"+fmt.Sprintf("%q", version)))
	}
	images, _ := c.Values["images"].(map[string]any)
	for _, name := range releasedImages {
		img, ok := images[name].(map[string]any)
		if !ok {
			return fmt.Errorf("package: values.yaml has no images.%s", name)
		}
		img["tag"] = version
	}
	return nil
}
