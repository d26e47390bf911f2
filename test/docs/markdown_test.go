// Package docs holds the project's Markdown to what it says: the README's
// shape, the links between the pages, the one configuration reference, the
// workflow engines' configuration and the helm and kubectl commands' chart,
// values and objects. Plain go test, nothing started.
package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the module's root, two folders above this package's.
const root = "../.."

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of the section of doc under the heading line (e.g.
// "## Nextflow"), up to the next heading of its level or above.
func section(doc, heading string) string {
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if l != heading {
			continue
		}
		end, fence := len(lines), false
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], "```") {
				fence = !fence
			}
			if lv := headingLevel(lines[j]); !fence && lv > 0 && lv <= level {
				end = j
				break
			}
		}
		return strings.Join(lines[i+1:end], "\n")
	}
	return ""
}

// headingLevel is the level of a Markdown heading line, 0 for another line.
func headingLevel(l string) int {
	lv := len(l) - len(strings.TrimLeft(l, "#"))
	if lv == 0 || lv > 6 || !strings.HasPrefix(l[lv:], " ") {
		return 0
	}
	return lv
}

// block is a fenced block: its info string (the language) and its text.
type block struct{ lang, text string }

// blocks are the fenced blocks of text, in order.
func blocks(text string) []block {
	var out []block
	var cur *block
	for _, l := range strings.Split(text, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		case cur != nil && strings.HasPrefix(l, "```"):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}
