package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The documents hold to the runs: BENCHMARKS.md's block of make bench is
// one run's, README.md quotes it in its own block, and neither README.md
// nor docs/performance.md quotes anything that BENCHMARKS.md does not
// record.

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runLine is how a summary starts: the run's date and time, machine, load
// and command.
var runLine = regexp.MustCompile(`Run of \d{4}-\d{2}-\d{2} \d{2}:\d{2}((–| – \d{4}-\d{2}-\d{2} )\d{2}:\d{2})? UTC( at [0-9a-f]{7,}(-dirty)?)?, \d+ cores, Go [0-9.]+, load average [0-9.]+(–[0-9.]+)?, ` + "`" + `[^` + "`" + `]+` + "`" + `\.`)

// BENCHMARKS.md holds the block of one run, as the program writes it, so
// that make bench can replace it.
func TestBENCHMARKSHoldsTheBlock(t *testing.T) {
	block := SummaryBlock.Of(readDoc(t, "BENCHMARKS.md"))
	if block == "" {
		t.Fatal("BENCHMARKS.md has not exactly one block of make bench's summary")
	}
	if !runLine.MatchString(strings.Join(strings.Fields(block), " ")) { // the paragraph's wrapping aside
		t.Errorf("the block does not start with the run's date, time, machine, load and command:\n%s", block)
	}
}

// README.md's headline and BENCHMARKS.md's summary are of one run: the same
// run line, and every figure the headline quotes is in the summary.
func TestREADMEQuotesBENCHMARKS(t *testing.T) {
	summary, headline := SummaryBlock.Of(readDoc(t, "BENCHMARKS.md")), HeadlineBlock.Of(readDoc(t, "README.md"))
	if summary == "" || headline == "" {
		t.Fatalf("BENCHMARKS.md's summary block (%d bytes) or README.md's headline block (%d bytes) is missing", len(summary), len(headline))
	}
	runOf := regexp.MustCompile(`(?i)run of (\d{4}-\d{2}-\d{2} [^,]*UTC)`)
	s, h := runOf.FindStringSubmatch(summary), runOf.FindStringSubmatch(strings.Join(strings.Fields(headline), " "))
	if s == nil || h == nil || s[1] != h[1] {
		t.Errorf("BENCHMARKS.md's summary is of the run %v, README.md's headline of %v", s, h)
	}
	if m := missing(headline, summary); len(m) > 0 {
		t.Errorf("README.md's headline quotes %v, which BENCHMARKS.md's summary does not give", m)
	}
}

// sectionOf is the text of a "## title" section of a Markdown document.
func sectionOf(doc, title string) string {
	i := strings.Index(doc, "\n## "+title+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+1:]
	if j := strings.Index(rest[3:], "\n## "); j >= 0 {
		return rest[:j+3]
	}
	return rest
}

// figureSections are the sections that quote runs: README.md's
// Performance (the headline) and docs/performance.md's Performance and
// Robustness, where the rest of the figures moved.
var figureSections = []struct{ doc, title string }{
	{"README.md", "Performance"},
	{"docs/performance.md", "Performance"},
	{"docs/performance.md", "Robustness"},
}

// The README and docs/performance.md quote only figures of runs that
// BENCHMARKS.md records: every number of their sections of figures, and of
// the README's opening (the first run's timings), is one of BENCHMARKS.md's.
func TestREADMEFiguresAreInBENCHMARKS(t *testing.T) {
	benchmarks := readDoc(t, "BENCHMARKS.md")
	for _, f := range figureSections {
		sec := sectionOf(readDoc(t, f.doc), f.title)
		if len(numbersOf(sec)) < 10 {
			t.Fatalf("%s's section %s has %d figures: the section was not found", f.doc, f.title, len(numbersOf(sec)))
		}
		if m := missing(sec, benchmarks); len(m) > 0 {
			sort.Strings(m)
			t.Errorf("%s's section %s quotes %v, which BENCHMARKS.md does not record", f.doc, f.title, m)
		}
	}
	readme := readDoc(t, "README.md")
	opening := readme[:max(strings.Index(readme, "\n## "), 0)]
	if len(numbersOf(opening)) < 5 {
		t.Fatalf("README.md's opening has %d figures: the first run's timings were not found", len(numbersOf(opening)))
	}
	if m := missing(opening, benchmarks); len(m) > 0 {
		sort.Strings(m)
		t.Errorf("README.md's opening quotes %v, which BENCHMARKS.md does not record", m)
	}
}

// benchLink is a link to a section of BENCHMARKS.md.
var benchLink = regexp.MustCompile(`\((?:\.\./)?BENCHMARKS\.md#([a-z0-9-]+)\)`)

// slugOf is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens left out.
func slugOf(heading string) string {
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

// sectionsBySlug are BENCHMARKS.md's sections by their anchors: each from
// its heading to the next heading of its level or above.
func sectionsBySlug(doc string) map[string]string {
	lines := strings.Split(doc, "\n")
	out := map[string]string{}
	for i, l := range lines {
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || !strings.HasPrefix(l[level:], " ") {
			continue
		}
		end := len(lines)
		for j := i + 1; j < len(lines); j++ {
			lv := len(lines[j]) - len(strings.TrimLeft(lines[j], "#"))
			if lv > 0 && lv <= level && strings.HasPrefix(lines[j][lv:], " ") {
				end = j
				break
			}
		}
		out[slugOf(strings.TrimSpace(l[level:]))] = strings.Join(lines[i:end], "\n")
	}
	return out
}

// Each row of docs/performance.md's table of runs names its run's section
// of BENCHMARKS.md, and every figure of the row is in that section: a
// figure another run recorded, or the same run's stale figure, does not
// pass. So does every line of the sections of figures that links a
// section (README.md's headline aside, held to the summary above).
func TestREADMERowsQuoteTheRunTheyName(t *testing.T) {
	sections := sectionsBySlug(readDoc(t, "BENCHMARKS.md"))
	rows := 0
	for _, f := range figureSections {
		doc := readDoc(t, f.doc)
		sec := strings.Replace(sectionOf(doc, f.title), HeadlineBlock.Of(doc), "", 1)
		for _, line := range strings.Split(sec, "\n") {
			links := benchLink.FindAllStringSubmatch(line, -1)
			isRow := strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| run ")
			if isRow {
				rows++
				if len(links) == 0 {
					t.Errorf("a row of %s's %s names no section of BENCHMARKS.md: %.120s", f.doc, f.title, line)
					continue
				}
			}
			for _, l := range links {
				text, ok := sections[l[1]]
				if !ok {
					t.Errorf("%s's %s links BENCHMARKS.md#%s, which is no section of it", f.doc, f.title, l[1])
					continue
				}
				if m := missing(line, text); len(m) > 0 {
					sort.Strings(m)
					t.Errorf("%s's %s quotes %v from BENCHMARKS.md#%s, which that section does not record: %.120s", f.doc, f.title, m, l[1], line)
				}
			}
		}
	}
	if rows < 5 {
		t.Fatalf("docs/performance.md's table of runs has %d rows: the table was not found", rows)
	}
}
