package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// slug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores left out.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are a Markdown document's heading anchors, a repeated heading's
// numbered as GitHub numbers them (-1, -2, ...).
func anchors(doc string) map[string]bool {
	out, seen, fence := map[string]bool{}, map[string]int{}, false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		lv := headingLevel(l)
		if fence || lv == 0 {
			continue
		}
		s := slug(strings.TrimSpace(l[lv:]))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// withoutCode is doc with its fenced blocks and inline code left out.
func withoutCode(doc string) string {
	var b strings.Builder
	fence := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if !fence {
			b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "") + "\n")
		}
	}
	return b.String()
}

// Every relative link of the README and of docs/ leads to a file of the
// repository, and to a heading of it where it names one: the pages moved,
// and a reader follows these links to find the topic.
func TestLinksLeadSomewhere(t *testing.T) {
	pages := []string{"README.md"}
	md, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, p := range md {
		pages = append(pages, "docs/"+filepath.Base(p))
	}
	if len(pages) < 15 {
		t.Fatalf("found %d pages, want README.md and docs/'s", len(pages))
	}
	for _, page := range pages {
		doc := read(t, page)
		for _, m := range linkRE.FindAllStringSubmatch(withoutCode(doc), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = path.Clean(path.Join(path.Dir(page), file))
			}
			st, err := os.Stat(filepath.Join(root, resolved))
			if err != nil {
				t.Errorf("%s links %s: no such file (%s)", page, target, resolved)
				continue
			}
			if anchor == "" || st.IsDir() || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if !anchors(read(t, resolved))[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", page, target, resolved, anchor)
			}
		}
	}
}
