package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func msd(v float64) time.Duration { return time.Duration(v*1000) * time.Microsecond }

// run1203 is the run of 2026-12-03 that BENCHMARKS.md records, as the
// program collects it.
func run1203() *Summary {
	return &Summary{
		Start: time.Date(2026, 12, 3, 12, 18, 4, 0, time.UTC), End: time.Date(2026, 12, 3, 12, 26, 41, 0, time.UTC),
		Cores: 2, GoVersion: "go1.26.8", LoadMin: 16.2, LoadMax: 21.3, Command: "`make bench`",
		Steps: &StepsSummary{Tasks: 40, Executors: 4, Parallel: 4,
			Gap:        Pcts{N: 120, P50: msd(30.1), P90: msd(99.8), P99: msd(608.9)},
			CreateNext: EventFigure{N: 120, P50: msd(26.9), Requests: 3},
			Ignored:    EventFigure{N: 900, P50: msd(0.3)},
			Submit:     EventFigure{N: 40, P50: msd(22.5), Requests: 4}},
		Baseline: &BaselineSummary{Gap: Pcts{N: 120, P50: msd(3905.9), P90: msd(4577.0), P99: msd(4733.1)},
			Pollers: 1000, Window: 30*time.Second + 40*time.Millisecond, PerMinute: 25.38, KeptKiB: 41.9, GoroutinesPerPoller: 1},
		Sweeps: []SweepSummary{
			{Tasks: 1000, InProcess: EventFigure{P50: msd(237.7)}, Requests: 5, Process: EventFigure{P50: msd(149.3)}, ReadyKiB: 25293, PeakKiB: 40340, ProcessMeasured: true},
			{Tasks: 10000, InProcess: EventFigure{P50: msd(3293.4)}, Requests: 41, Process: EventFigure{P50: msd(2412.7)}, ReadyKiB: 25293, PeakKiB: 47800, ProcessMeasured: true},
		},
		Load:     &LoadSummary{Senders: 64, NothingDue: 284.3, NothingDueReqs: 2, Ignored: 965.7, IgnoredReqs: 0},
		TES:      &TESSummary{Tasks: 300, Create: EventFigure{P50: msd(6.3), Requests: 1}, GetMinimal: EventFigure{P50: msd(6.1), Requests: 3}, GetFull: EventFigure{P50: msd(6.1), Requests: 3}, ListMinimal: EventFigure{P50: msd(11.2), Requests: 1}},
		TESPages: []TESPageSummary{{Tasks: 10000, Minimal: EventFigure{P50: msd(230.3), Requests: 10, KiB: 4943}, Basic: EventFigure{P50: msd(296.6), Requests: 13, KiB: 5168}}},
		Cold:     &ColdStartSummary{Starts: 7, P50: msd(15.2), P90: msd(34.4)},
	}
}

// The summary of a run is BENCHMARKS.md's section: the run of 2026-12-03
// renders as recorded (testdata/summary-2026-12-03.md).
func TestSummaryMarkdown(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "summary-2026-12-03.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := run1203().Markdown(); got != string(want) || !runLine.MatchString(strings.Join(strings.Fields(got), " ")) {
		t.Errorf("Markdown() =\n%s\nwant\n%s", got, want)
	}
}

// Parts that did not run are left out, not shown as zeros.
func TestSummaryMarkdownOfParts(t *testing.T) {
	full := run1203()
	cases := []struct {
		name       string
		s          *Summary
		want, lack []string
	}{
		{"-only tes", &Summary{Start: full.Start, End: full.End, Cores: 2, GoVersion: "go1.26.8", LoadMin: 3, LoadMax: 3, Command: "`go run ./test/bench -only=tes`",
			TES: full.TES, TESPages: full.TESPages},
			[]string{"load average 3.0, `go run ./test/bench -only=tes`.", "| TES API, 300 tasks one after another |", "4,943 KiB read"},
			[]string{"### Steps", "### Waiting tasks", "sweep over", "cold start, exec", "events/s"}},
		{"-baseline=false", &Summary{Start: full.Start, End: full.End.Add(24 * time.Hour), Commit: "1f897b6", Cores: 2, GoVersion: "go1.26.8", LoadMin: 0.5, LoadMax: 9.96, Command: "`go run ./test/bench -baseline=false`",
			Steps: full.Steps, Sweeps: full.Sweeps, Load: full.Load, Cold: full.Cold},
			[]string{"2026-12-03 12:18 – 2026-12-04 12:26 UTC at 1f897b6, 2 cores", "load average 0.5–10,", "| step gap, 120 steps | p50 30.1 ms, p90 99.8 ms, p99 608.9 ms | not run |", "sweep over 1,000 / 10,000"},
			[]string{"ratio of the p50s", "### Waiting tasks", "TES API, 300", "a page of 256"}},
		{"-skip-steps", &Summary{Start: full.Start, End: full.End, Cores: 2, GoVersion: "go1.26.8", LoadMin: 16, LoadMax: 21, Command: "`make bench`",
			Baseline: &BaselineSummary{Pollers: 1000, Window: 30 * time.Second, PerMinute: 24, KeptKiB: 40, GoroutinesPerPoller: 2}, Sweeps: full.Sweeps[:1]},
			[]string{"### Waiting tasks", "here: 1,000 tasks,", "| 24.0 GETs | 0.0050 (one sweep a minute, 5 LIST requests, / 1,000 tasks) | 4,800× |", "per poller; 2 goroutines)"},
			[]string{"### Steps", "same, 10,000 tasks"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.s.Markdown()
			flat := strings.Join(strings.Fields(got), " ") // the paragraphs' wrapping aside
			if !strings.HasPrefix(got, SummaryBlock.Begin+"\n") || !strings.HasSuffix(got, SummaryBlock.End+"\n") {
				t.Errorf("not one block between the markers:\n%s", got)
			}
			if !runLine.MatchString(flat) {
				t.Errorf("no run line:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(flat, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, l := range c.lack {
				if strings.Contains(flat, l) {
					t.Errorf("has %q, of a part that did not run:\n%s", l, got)
				}
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{num(0), "0"}, {num(999), "999"}, {num(1000), "1,000"}, {num(int64(1234567)), "1,234,567"}, {num(5075.6), "5,076"}, {num(-1500), "-1,500"},
		{msText(msd(0.3)), "0.3 ms"}, {msText(msd(3905.94)), "3,905.9 ms"}, {msText(msd(99.96)), "100.0 ms"}, {msText(msd(1000)), "1,000.0 ms"},
		{plural(1, "request"), "1 request"}, {plural(0, "request"), "0 requests"}, {plural(1.974, "request"), "1.97 requests"}, {plural(3, "API request"), "3 API requests"},
		{loadText(1.44), "1.4"}, {loadText(9.94), "9.9"}, {loadText(9.96), "10"}, {loadText(21.3), "21"}, {loadRange(16.2, 21.3), "16–21"}, {loadRange(2, 2.04), "2.0"},
		{central(0, msd(6.1), 0, 0), "p50 6.1 ms"}, {central(300, msd(4.5), msd(2), msd(30)), "p50 4.5 ms of 300"},
		{central(7, msd(26.9), msd(25.04), msd(1030)), "median 26.9 ms of 7 (min 25.0 ms, max 1,030.0 ms)"}, {central(40, msd(22.5), 0, 0), "median 22.5 ms of 40"},
		{figureOf([]time.Duration{msd(3), msd(1), msd(2)}).Text(), "median 2.0 ms of 3 (min 1.0 ms, max 3.0 ms)"},
		{mb(25293), "24.7"}, {secs(30*time.Second + 400*time.Millisecond), "30 s"},
		{span(time.Date(2026, 12, 4, 17, 20, 1, 0, time.UTC), time.Date(2026, 12, 4, 17, 20, 59, 0, time.UTC)), "2026-12-04 17:20 UTC"},
		{span(time.Date(2026, 12, 4, 17, 20, 1, 0, time.UTC), time.Date(2026, 12, 4, 17, 31, 0, 0, time.UTC)), "2026-12-04 17:20–17:31 UTC"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// The block replaces the one between the markers, and only it; a document
// without exactly one block is left alone with an error.
func TestBlockReplace(t *testing.T) {
	block := run1203().Markdown()
	doc := "# Benchmarks\n\nbefore\n\n" + SummaryBlock.Begin + "\nold figures\n" + SummaryBlock.End + "\n\nafter\n"
	got, err := SummaryBlock.Replace(doc, block)
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Benchmarks\n\nbefore\n\n" + block + "\nafter\n"; got != want {
		t.Errorf("ReplaceBlock =\n%s\nwant\n%s", got, want)
	}
	again, err := SummaryBlock.Replace(got, block)
	if err != nil || again != got {
		t.Errorf("replacing the block again changed the document (%v):\n%s", err, again)
	}
	for _, bad := range []string{
		"no block\n",
		SummaryBlock.Begin + "\nx\n",
		SummaryBlock.End + "\nx\n" + SummaryBlock.Begin + "\n",
		doc + doc,
	} {
		if _, err := SummaryBlock.Replace(bad, block); err == nil {
			t.Errorf("Replace(%q): no error", bad)
		}
	}
}

// WriteSummary writes the block into BENCHMARKS.md's place for it, or the
// block alone into a new file.
func TestBlockWrite(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(doc, []byte("head\n"+SummaryBlock.Begin+"\nold\n"+SummaryBlock.End+"\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := run1203()
	if err := SummaryBlock.Write(doc, s.Markdown()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if want := "head\n" + s.Markdown() + "tail\n"; string(b) != want {
		t.Errorf("written:\n%s\nwant\n%s", b, want)
	}
	fresh := filepath.Join(dir, "summary.md")
	if err := SummaryBlock.Write(fresh, s.Markdown()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(fresh); err != nil || string(b) != s.Markdown() {
		t.Errorf("new file: %v\n%s", err, b)
	}
	other := filepath.Join(dir, "README.md")
	if err := os.WriteFile(other, []byte("no block here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SummaryBlock.Write(other, s.Markdown()); err == nil {
		t.Error("a file without the block was written")
	}
	if b, _ := os.ReadFile(other); string(b) != "no block here\n" {
		t.Errorf("a file without the block was changed: %q", b)
	}
}

// README.md's headline of the run of 2026-12-03, as recorded
// (testdata/headline-2026-12-03.md).
func TestHeadline(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "headline-2026-12-03.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := run1203().Headline(); got != string(want) {
		t.Errorf("Headline() =\n%s\nwant\n%s", got, want)
	}
}

var figureRE = regexp.MustCompile(`\d[\d,]*(\.\d+)?`)

// numbersOf are the numbers of a text, as written ("3,905.9").
func numbersOf(text string) map[string]bool {
	set := map[string]bool{}
	for _, f := range figureRE.FindAllString(text, -1) {
		set[strings.TrimRight(f, ",")] = true
	}
	return set
}

// missing lists the figures of quote that text does not have.
func missing(quote, text string) []string {
	have := numbersOf(text)
	var out []string
	for f := range numbersOf(quote) {
		if !have[f] {
			out = append(out, f)
		}
	}
	return out
}

// Every figure of the headline is one of the summary's, whatever ran.
func TestHeadlineQuotesTheSummary(t *testing.T) {
	full := run1203()
	parts := []*Summary{full, {Start: full.Start, End: full.End, Cores: 2, GoVersion: "go1.26.8", LoadMin: 1, LoadMax: 2, Command: "`make bench`", TES: full.TES},
		{Start: full.Start, End: full.End, Cores: 2, GoVersion: "go1.26.8", LoadMin: 1, LoadMax: 2, Command: "`make bench`", Steps: full.Steps, Sweeps: full.Sweeps, Cold: full.Cold}}
	for i, s := range parts {
		h := s.Headline()
		if !strings.HasPrefix(h, HeadlineBlock.Begin+"\n") || !strings.HasSuffix(h, HeadlineBlock.End+"\n") {
			t.Errorf("summary %d: the headline is not one block:\n%s", i, h)
		}
		if m := missing(h, s.Markdown()); len(m) > 0 {
			t.Errorf("summary %d: the headline quotes %v, which the summary does not give:\n%s", i, m, h)
		}
	}
	if m := missing("p50 9.9 ms", full.Markdown()); len(m) != 1 {
		t.Errorf("missing found %v, want [9.9]", m)
	}
}
