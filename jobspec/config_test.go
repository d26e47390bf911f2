package jobspec

import "testing"

func TestFilerImage(t *testing.T) {
	c := DefaultConfig()
	c.FilerName, c.FilerVersion = "registry.example.org/filer", "0.11.0"
	if got := c.FilerImage(); got != "registry.example.org/filer:0.11.0" {
		t.Errorf("FilerImage = %q", got)
	}
}
