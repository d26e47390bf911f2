package docs

import (
	"regexp"
	"strings"
	"testing"
)

var settingRE = regexp.MustCompile("(?m)^  ([A-Z][A-Z0-9_]+):")

// docs/configuration.md documents every setting of the shipped ConfigMaps
// in one row of its tables, and no setting twice.
func TestConfigurationListsEverySettingOnce(t *testing.T) {
	doc := read(t, "docs/configuration.md")
	rows := map[string]int{}
	for _, l := range strings.Split(doc, "\n") {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "| ") || len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile("`([A-Z][A-Z0-9_]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]]++
		}
	}
	settings := map[string]bool{}
	for _, f := range []string{"config/knative/config.yaml", "config/knative/tes.yaml"} {
		for _, m := range settingRE.FindAllStringSubmatch(read(t, f), -1) {
			settings[m[1]] = true
		}
	}
	if len(settings) < 60 {
		t.Fatalf("found %d settings in config/knative, want the handler's and the TES API's", len(settings))
	}
	for s := range settings {
		if rows[s] == 0 {
			t.Errorf("docs/configuration.md has no row for %s (config/knative sets it)", s)
		}
	}
	for s, n := range rows {
		if n > 1 {
			t.Errorf("docs/configuration.md documents %s in %d rows, want one", s, n)
		}
	}
}
