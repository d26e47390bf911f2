package docs

import (
	"strings"
	"testing"
)

// The README is the newcomer's page: at most 150 lines, and its first
// block is the two commands that work on a fresh machine.
func TestREADMEIsShort(t *testing.T) {
	readme := read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > 150 {
		t.Errorf("README.md has %d lines, more than 150: move the detail into docs/", n)
	}
	bs := blocks(readme)
	if len(bs) == 0 {
		t.Fatal("README.md has no fenced block")
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(bs[0].text), "\n") {
		cmds = append(cmds, strings.Join(strings.Fields(strings.SplitN(l, "#", 2)[0]), " "))
	}
	if strings.Join(cmds, "; ") != "make demo; make test" {
		t.Errorf("README.md's first block runs %q, want make demo, then make test", cmds)
	}
	if i, j := strings.Index(readme, "```"), strings.Index(readme, "\n## "); j >= 0 && i > j {
		t.Error("README.md's two commands come after its first section; they come first")
	}
}
