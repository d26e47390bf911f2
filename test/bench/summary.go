package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
)

// Summary is what one run of the benchmark records for BENCHMARKS.md: the
// run (when, on what, under what load, by which command) and the figures
// of each part that ran (nil or empty: the part did not run).
type Summary struct {
	Start, End time.Time
	Cores      int
	GoVersion  string
	// LoadMin and LoadMax are the 1-minute load average's extremes,
	// sampled at the start and every 10 s.
	LoadMin, LoadMax float64
	// Command is how the run was started.
	Command string
	// Commit is the checkout's commit ("-dirty" with changes not
	// committed); "" where not recorded.
	Commit string

	Steps    *StepsSummary
	Baseline *BaselineSummary
	Sweeps   []SweepSummary
	Load     *LoadSummary
	TES      *TESSummary
	TESPages []TESPageSummary
	Cold     *ColdStartSummary
}

// Pcts are percentiles of a set of durations, with its extremes.
type Pcts struct {
	N             int
	P50, P90, P99 time.Duration
	Min, Max      time.Duration
}

func pcts(ds []time.Duration) Pcts {
	s := sortedDurations(ds)
	if len(s) == 0 {
		return Pcts{}
	}
	return Pcts{N: len(s), P50: benchkit.Percentile(s, 0.5), P90: benchkit.Percentile(s, 0.9), P99: benchkit.Percentile(s, 0.99), Min: s[0], Max: s[len(s)-1]}
}

// EventFigure is the median time of a kind of event (or request), with
// the count and the extremes of its samples, and its median count of API
// requests.
type EventFigure struct {
	N        int
	P50      time.Duration
	Min, Max time.Duration
	Requests int64
	// KiB is the median of the KiB read, where it is measured.
	KiB int64
}

// figureOf is the figure of a set of durations (requests and KiB apart).
func figureOf(ds []time.Duration) EventFigure {
	p := pcts(ds)
	return EventFigure{N: p.N, P50: p.P50, Min: p.Min, Max: p.Max}
}

// central states a set of n durations: its p50 and count from 100 samples
// up; below, its median and count with its extremes (a p90 or p99 of
// fewer samples would be their maximum); the median and count alone where
// the extremes were not recorded, and "p50" alone where the count was not
// (runs recorded before either was).
func central(n int, p50, lo, hi time.Duration) string {
	switch {
	case n == 0:
		return "p50 " + msText(p50)
	case n >= percentileSamples:
		return fmt.Sprintf("p50 %s of %s", msText(p50), num(n))
	case lo == 0 && hi == 0:
		return fmt.Sprintf("median %s of %d", msText(p50), n)
	}
	return fmt.Sprintf("median %s of %d (min %s, max %s)", msText(p50), n, msText(lo), msText(hi))
}

// Text is the figure's time as central states it.
func (e EventFigure) Text() string { return central(e.N, e.P50, e.Min, e.Max) }

// StepsSummary: tasks through the adapter into the handler.
type StepsSummary struct {
	Tasks, Executors, Parallel int
	Gap                        Pcts
	// The handler's time per event: a step that creates the next job, an
	// event that asks for nothing, a submission.
	CreateNext, Ignored, Submit EventFigure
}

// BaselineSummary: the polling baseline on the same tasks, and its pollers
// of waiting tasks.
type BaselineSummary struct {
	Gap Pcts // the steps' gap; N 0 if the steps did not run
	// Pollers of waiting tasks, counted over Window: GETs per task-minute,
	// memory kept per poller (KiB) and goroutines per poller.
	Pollers             int
	Window              time.Duration
	PerMinute, KeptKiB  float64
	GoroutinesPerPoller float64
}

// SweepSummary: sweeps over Tasks waiting tasks, in process and by
// bin/handler as a process.
type SweepSummary struct {
	Tasks              int
	InProcess, Process EventFigure // the sweeps' times
	Requests           int64       // median per sweep
	ReadyKiB, PeakKiB  int64       // bin/handler's RSS at ready and peak
	// ProcessMeasured: bin/handler swept, Process and the RSS are set.
	ProcessMeasured bool
}

// LoadSummary: events per second of one handler with 64 senders.
type LoadSummary struct {
	Senders                     int
	NothingDue, Ignored         float64 // events/s
	NothingDueReqs, IgnoredReqs float64 // API requests per event
}

// TESSummary: the TES API's create, get and list, Tasks created one after
// another.
type TESSummary struct {
	Tasks                                    int
	Create, GetMinimal, GetFull, ListMinimal EventFigure
}

// TESPageSummary: a page of 256 in a namespace of Tasks tasks: the first
// page in MINIMAL and BASIC; where measured, the pages that follow (each
// from the token of the one before), a page of a filter the API server
// cannot apply, and the Go heap a MINIMAL page allocates (KiB, median).
type TESPageSummary struct {
	Tasks                           int
	Minimal, Basic, Later, Filtered EventFigure
	AllocKiB                        int64
}

// ColdStartSummary: exec of bin/handler to /readyz 200.
type ColdStartSummary struct {
	Starts   int
	P50, P90 time.Duration
	Min, Max time.Duration
}

// Block is a part of a document that the program writes, between two
// markers.
type Block struct{ Begin, End string }

// The summary's block in BENCHMARKS.md and the headline's in README.md.
var (
	SummaryBlock = Block{
		"<!-- make bench summary: begin (written by `go run ./test/bench -summary BENCHMARKS.md`; edit the program, not the block) -->",
		"<!-- make bench summary: end -->"}
	HeadlineBlock = Block{
		"<!-- make bench headline: begin (written by `go run ./test/bench -readme README.md`, from the run of BENCHMARKS.md; edit the program, not the block) -->",
		"<!-- make bench headline: end -->"}
)

// Markdown renders the summary as BENCHMARKS.md's section of `make bench`
// shows it, between the block's markers.
func (s *Summary) Markdown() string {
	var b strings.Builder
	b.WriteString(SummaryBlock.Begin + "\n")
	para(&b, "Run of "+s.runLine()+".")

	if s.Steps != nil {
		st := s.Steps
		b.WriteString("\n### Steps\n\n")
		para(&b, fmt.Sprintf("%s tasks of %d executors (no PVC), %d at once, through the adapter into the handler. "+
			"The step gap is the time from a job's terminal condition to the next job's creation, both seen by one watch of the namespace.",
			num(st.Tasks), st.Executors, st.Parallel))
		b.WriteString("\n| | event-driven handler | polling baseline |\n|---|---|---|\n")
		base := "not run"
		if s.Baseline != nil && s.Baseline.Gap.N > 0 {
			base = pctsText(s.Baseline.Gap)
		}
		fmt.Fprintf(&b, "| step gap, %s | %s | %s |\n", stepsCount(st.Gap.N, s.Baseline), pctsText(st.Gap), base)
		if s.Baseline != nil && s.Baseline.Gap.N > 0 && st.Gap.P50 > 0 {
			fmt.Fprintf(&b, "| ratio of the p50s, baseline / handler | | %s× |\n", num(ratio(float64(s.Baseline.Gap.P50), float64(st.Gap.P50))))
		}
		b.WriteString("\n")
		para(&b, fmt.Sprintf("Handler time per event: a step that creates the next job %s, "+
			"an event that asks for nothing (a job running, a pod starting) %s, a submission %s.",
			eventText(st.CreateNext, "API request"), eventText(st.Ignored, "request"), eventText(st.Submit, "request")))
	}

	if bl := s.Baseline; bl != nil && bl.Pollers > 0 && len(s.Sweeps) > 0 {
		b.WriteString("\n### Waiting tasks\n\n")
		para(&b, fmt.Sprintf("A waiting task is one whose executor job runs (here: %s tasks, each an anchor and a suspended executor job). "+
			"%s pollers poll %s of them, counted for %s after each has polled once.",
			joinCounts(s.Sweeps), num(bl.Pollers), num(bl.Pollers), secs(bl.Window)))
		b.WriteString("\n| | polling baseline | event-driven handler | ratio, baseline / handler |\n|---|---|---|---|\n")
		for i, sw := range s.Sweeps {
			per := float64(sw.Requests) / float64(sw.Tasks)
			if i == 0 {
				fmt.Fprintf(&b, "| API requests per waiting task-minute, %s tasks | %.1f GETs | %.4f (one sweep a minute, %d LIST requests, / %s tasks) | %s× |\n",
					num(sw.Tasks), bl.PerMinute, per, sw.Requests, num(sw.Tasks), num(ratio(bl.PerMinute, per)))
			} else {
				fmt.Fprintf(&b, "| same, %s tasks | %.1f | %.4f (%d LIST requests / %s) | %s× |\n",
					num(sw.Tasks), bl.PerMinute, per, sw.Requests, num(sw.Tasks), num(ratio(bl.PerMinute, per)))
			}
		}
		for i, sw := range s.Sweeps {
			if !sw.ProcessMeasured {
				continue
			}
			during := float64(sw.PeakKiB-sw.ReadyKiB) / float64(sw.Tasks)
			r := num(ratio(bl.KeptKiB, math.Max(during, 0.001)))
			if i == 0 {
				fmt.Fprintf(&b, "| memory per waiting task, %s tasks | %.1f KiB kept (Go heap + stacks in use after GC, per poller; %s) | 0 kept between events; %.1f KiB during a sweep ((peak RSS − RSS at ready) / tasks) | %s× |\n",
					num(sw.Tasks), bl.KeptKiB, goroutines(bl.GoroutinesPerPoller), during, r)
			} else {
				fmt.Fprintf(&b, "| same, %s tasks | %.1f KiB | 0 kept; %.1f KiB during a sweep | %s× |\n", num(sw.Tasks), bl.KeptKiB, during, r)
			}
		}
	}

	var rows [][2]string
	if len(s.Sweeps) > 0 {
		var counts, inProc, reqs, proc, ready, peak []string
		for _, sw := range s.Sweeps {
			counts = append(counts, num(sw.Tasks))
			inProc = append(inProc, sw.InProcess.Text())
			reqs = append(reqs, strconv.FormatInt(sw.Requests, 10))
			if sw.ProcessMeasured {
				proc = append(proc, sw.Process.Text())
				ready = append(ready, mb(sw.ReadyKiB))
				peak = append(peak, mb(sw.PeakKiB))
			}
		}
		rows = append(rows, [2]string{"sweep over " + strings.Join(counts, " / ") + " waiting tasks, in process",
			strings.Join(inProc, " / ") + "; " + strings.Join(reqs, " / ") + " LIST requests"})
		if len(proc) == len(s.Sweeps) {
			rows = append(rows, [2]string{"same, bin/handler as a process",
				strings.Join(proc, " / ") + "; RSS at ready " + strings.Join(oneIfSame(ready), " / ") + " MB, peak " + strings.Join(peak, " / ") + " MB"})
		}
	}
	if l := s.Load; l != nil {
		rows = append(rows, [2]string{fmt.Sprintf("one handler, %d concurrent senders", l.Senders),
			fmt.Sprintf("%s events/s that read the task and find nothing due (%s each), %s ignored events/s (%s)",
				num(math.Round(l.NothingDue)), plural(l.NothingDueReqs, "request"), num(math.Round(l.Ignored)), plural(l.IgnoredReqs, "request"))})
	}
	if t := s.TES; t != nil {
		get := fmt.Sprintf("get MINIMAL %s, FULL %s (%s each)", t.GetMinimal.Text(), t.GetFull.Text(), plural(float64(t.GetFull.Requests), "request"))
		if t.GetMinimal.Requests != t.GetFull.Requests {
			get = fmt.Sprintf("get MINIMAL %s, FULL %s", eventText(t.GetMinimal, "request"), eventText(t.GetFull, "request"))
		}
		rows = append(rows, [2]string{fmt.Sprintf("TES API, %s tasks one after another", num(t.Tasks)),
			fmt.Sprintf("create %s; %s; list of 256 MINIMAL %s", eventText(t.Create, "request"), get, eventText(t.ListMinimal, "request"))})
	}
	for _, p := range s.TESPages {
		f := fmt.Sprintf("MINIMAL %s (%s, %s KiB read); BASIC %s (%s, %s KiB)",
			p.Minimal.Text(), plural(float64(p.Minimal.Requests), "request"), num(p.Minimal.KiB),
			p.Basic.Text(), plural(float64(p.Basic.Requests), "request"), num(p.Basic.KiB))
		if p.Later.N > 0 {
			f += fmt.Sprintf("; the pages after the first, MINIMAL %s (%s, %s KiB)", p.Later.Text(), plural(float64(p.Later.Requests), "request"), num(p.Later.KiB))
		}
		if p.Filtered.N > 0 {
			f += fmt.Sprintf("; a tag filter, %s (%s, %s KiB)", p.Filtered.Text(), plural(float64(p.Filtered.Requests), "request"), num(p.Filtered.KiB))
		}
		if p.AllocKiB > 0 {
			f += fmt.Sprintf("; %s KiB allocated a MINIMAL page", num(p.AllocKiB))
		}
		rows = append(rows, [2]string{fmt.Sprintf("TES API, a page of 256 in a namespace of %s tasks", num(p.Tasks)), f})
	}
	if c := s.Cold; c != nil {
		rows = append(rows, [2]string{fmt.Sprintf("cold start, exec of bin/handler to `/readyz` 200, %d starts", c.Starts),
			c.text()})
	}
	if len(rows) > 0 {
		b.WriteString("\n### Sweep, load, TES API, cold start\n\n| what | figure |\n|---|---|\n")
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s | %s |\n", r[0], r[1])
		}
	}
	b.WriteString(SummaryBlock.End + "\n")
	return b.String()
}

// runLine is the run's date and time, machine, load and command.
func (s *Summary) runLine() string {
	at := ""
	if s.Commit != "" {
		at = " at " + s.Commit
	}
	return fmt.Sprintf("%s%s, %d cores, %s, load average %s, %s", span(s.Start, s.End), at, s.Cores, goVersion(s.GoVersion), loadRange(s.LoadMin, s.LoadMax), s.Command)
}

// Headline renders the figures README.md quotes from the run, with the
// run and a link to BENCHMARKS.md, between the headline's markers. Every
// figure in it is one of Markdown's, as given there.
func (s *Summary) Headline() string {
	var b strings.Builder
	b.WriteString(HeadlineBlock.Begin + "\n")
	b.WriteString("| run of " + s.runLine() + " ([BENCHMARKS.md](BENCHMARKS.md#make-bench-event-driven-handler-and-polling-baseline)) | figure |\n|---|---|\n")
	row := func(what, figure string) { fmt.Fprintf(&b, "| %s | %s |\n", what, figure) }
	if st := s.Steps; st != nil {
		f := fmt.Sprintf("p50 %s, p99 %s", msText(st.Gap.P50), msText(st.Gap.P99))
		if fewSamples(st.Gap) {
			f = central(st.Gap.N, st.Gap.P50, st.Gap.Min, st.Gap.Max)
		}
		if bl := s.Baseline; bl != nil && bl.Gap.N > 0 && st.Gap.P50 > 0 {
			f += fmt.Sprintf("; the polling baseline (a poller per task, as TESK's taskmaster) p50 %s, %s× the handler's p50",
				msText(bl.Gap.P50), num(ratio(float64(bl.Gap.P50), float64(st.Gap.P50))))
		}
		row(fmt.Sprintf("step gap: a job's terminal condition → the next job created, %s steps", num(st.Gap.N)), f)
		row("handler time of a step that creates the next job", fmt.Sprintf("%s (%s made within the step; the Kubernetes Events it records in the background are not counted)",
			st.CreateNext.Text(), plural(float64(st.CreateNext.Requests), "API request")))
	}
	if bl := s.Baseline; bl != nil && bl.Pollers > 0 && len(s.Sweeps) > 0 {
		var counts, handler, ratios []string
		for _, sw := range s.Sweeps {
			per := float64(sw.Requests) / float64(sw.Tasks)
			counts = append(counts, num(sw.Tasks))
			handler = append(handler, fmt.Sprintf("%.4f", per))
			ratios = append(ratios, num(ratio(bl.PerMinute, per))+"×")
		}
		row("API requests per waiting task-minute, "+strings.Join(counts, " / ")+" tasks",
			fmt.Sprintf("%s (the sweep's LIST requests, once a minute); the polling baseline %.1f GETs: %s the handler's",
				strings.Join(handler, " / "), bl.PerMinute, strings.Join(ratios, " / ")))
	}
	var counts, proc, peak []string
	for _, sw := range s.Sweeps {
		if sw.ProcessMeasured {
			counts = append(counts, num(sw.Tasks))
			proc = append(proc, sw.Process.Text())
			peak = append(peak, mb(sw.PeakKiB))
		}
	}
	if len(counts) > 0 {
		row("sweep over "+strings.Join(counts, " / ")+" waiting tasks, bin/handler as a process",
			strings.Join(proc, " / ")+"; peak RSS "+strings.Join(peak, " / ")+" MB")
	}
	if l := s.Load; l != nil {
		row(fmt.Sprintf("one handler, %d concurrent senders", l.Senders),
			fmt.Sprintf("%s events/s that read the task, %s ignored events/s", num(math.Round(l.NothingDue)), num(math.Round(l.Ignored))))
	}
	if t := s.TES; t != nil {
		f := fmt.Sprintf("create %s; get %s (MINIMAL), %s (FULL)", t.Create.Text(), t.GetMinimal.Text(), t.GetFull.Text())
		if len(s.TESPages) > 0 {
			var tasks, p50s []string
			for _, p := range s.TESPages {
				tasks, p50s = append(tasks, num(p.Tasks)), append(p50s, p.Minimal.Text())
			}
			f += fmt.Sprintf("; a page of 256 in %s tasks %s (MINIMAL)", strings.Join(tasks, " / "), strings.Join(p50s, " / "))
		}
		row("TES API", f)
	}
	if c := s.Cold; c != nil {
		row("cold start, exec of bin/handler to `/readyz` 200", c.headline())
	}
	b.WriteString(HeadlineBlock.End + "\n")
	return b.String()
}

// Replace returns doc with its block between bl's markers replaced by
// block (which holds the markers); a doc without exactly one such block is
// an error, so that nothing else of it is overwritten.
func (bl Block) Replace(doc, block string) (string, error) {
	if strings.Count(doc, bl.Begin) != 1 || strings.Count(doc, bl.End) != 1 {
		return "", errors.New("the document has not exactly one block between the markers " + bl.Begin + " and " + bl.End)
	}
	i := strings.Index(doc, bl.Begin)
	j := strings.Index(doc, bl.End)
	if j < i {
		return "", errors.New("the block's end marker comes before its begin marker")
	}
	return doc[:i] + block + strings.TrimPrefix(doc[j+len(bl.End):], "\n"), nil
}

// Of returns the block of doc, markers included, or "" if it has not
// exactly one.
func (bl Block) Of(doc string) string {
	if strings.Count(doc, bl.Begin) != 1 || strings.Count(doc, bl.End) != 1 {
		return ""
	}
	i, j := strings.Index(doc, bl.Begin), strings.Index(doc, bl.End)
	if j < i {
		return ""
	}
	return doc[i:j+len(bl.End)] + "\n"
}

// Write replaces the block of the file at path by block, or writes the
// block alone to a file that does not exist.
func (bl Block) Write(path, block string) error {
	doc, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return os.WriteFile(path, []byte(block), 0o644)
	}
	if err != nil {
		return err
	}
	out, err := bl.Replace(string(doc), block)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// para writes text wrapped at 76 columns, as BENCHMARKS.md is, and a
// newline.
func para(b *strings.Builder, text string) {
	col := 0
	for i, w := range strings.Fields(text) {
		if i > 0 {
			if col+1+len(w) > 76 {
				b.WriteString("\n")
				col = 0
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(w)
		col += len(w)
	}
	b.WriteString("\n")
}

// span is "2026-12-03 12:18–12:26 UTC", one time within a minute, both
// dates across midnight.
func span(start, end time.Time) string {
	start, end = start.UTC(), end.UTC()
	if start.Format("2006-01-02 15:04") == end.Format("2006-01-02 15:04") {
		return start.Format("2006-01-02 15:04") + " UTC"
	}
	if start.Format("2006-01-02") == end.Format("2006-01-02") {
		return start.Format("2006-01-02 15:04") + "–" + end.Format("15:04") + " UTC"
	}
	return start.Format("2006-01-02 15:04") + " – " + end.Format("2006-01-02 15:04") + " UTC"
}

func goVersion(v string) string { return "Go " + strings.TrimPrefix(v, "go") }

func loadRange(lo, hi float64) string {
	a, b := loadText(lo), loadText(hi)
	if a == b {
		return a
	}
	return a + "–" + b
}

// loadText is a load average as BENCHMARKS.md gives it: one decimal below
// 10, whole numbers from 10.
func loadText(l float64) string {
	if l >= 9.95 {
		return strconv.Itoa(int(math.Round(l)))
	}
	return strconv.FormatFloat(l, 'f', 1, 64)
}

func stepsCount(n int, bl *BaselineSummary) string {
	if bl != nil && bl.Gap.N > 0 && bl.Gap.N != n {
		return fmt.Sprintf("%s / %s steps", num(n), num(bl.Gap.N))
	}
	return num(n) + " steps"
}

// fewSamples: p has fewer samples than percentiles need, and its extremes
// are recorded.
func fewSamples(p Pcts) bool { return p.N > 0 && p.N < percentileSamples && p.Max > 0 }

// pctsText gives percentiles from 100 samples up, and below the median
// with the extremes, where they were recorded.
func pctsText(p Pcts) string {
	if fewSamples(p) {
		return central(p.N, p.P50, p.Min, p.Max)
	}
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s", msText(p.P50), msText(p.P90), msText(p.P99))
}

func eventText(e EventFigure, unit string) string {
	return fmt.Sprintf("%s (%s)", e.Text(), plural(float64(e.Requests), unit))
}

// text is the cold starts as central states them, or their p50 and p90
// where the extremes were not recorded.
func (c *ColdStartSummary) text() string {
	if c.Max == 0 {
		return fmt.Sprintf("p50 %s, p90 %s", msText(c.P50), msText(c.P90))
	}
	return central(c.Starts, c.P50, c.Min, c.Max)
}

// headline is the cold starts' median, with their count and extremes
// where recorded.
func (c *ColdStartSummary) headline() string {
	if c.Max == 0 {
		return "p50 " + msText(c.P50)
	}
	return central(c.Starts, c.P50, c.Min, c.Max)
}

// msText is a duration in milliseconds with one decimal and thousands
// separators: "3,905.9 ms".
func msText(d time.Duration) string {
	v := math.Round(float64(d)/float64(time.Millisecond)*10) / 10
	whole := math.Floor(v)
	return num(whole) + "." + strconv.Itoa(int(math.Round((v-whole)*10))) + " ms"
}

func secs(d time.Duration) string { return strconv.Itoa(int(math.Round(d.Seconds()))) + " s" }

func mb(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) }

// plural is "3 API requests", "1 request", "1.97 requests".
func plural(n float64, unit string) string {
	s := strconv.FormatFloat(n, 'f', -1, 64)
	if n != math.Round(n) {
		s = strconv.FormatFloat(n, 'f', 2, 64)
	}
	if n == 1 {
		return s + " " + unit
	}
	return s + " " + unit + "s"
}

func goroutines(n float64) string {
	if n == 1 {
		return "1 goroutine"
	}
	return strconv.FormatFloat(n, 'f', -1, 64) + " goroutines"
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return math.Round(a / b)
}

// num writes a whole number with thousands separators: 10,000.
func num[T int | int64 | float64](v T) string {
	f := float64(v)
	if math.IsInf(f, 1) {
		return "∞"
	}
	s := strconv.FormatInt(int64(math.Round(f)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func joinCounts(sw []SweepSummary) string {
	var parts []string
	for _, s := range sw {
		parts = append(parts, num(s.Tasks))
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// oneIfSame is s, or its one value if all of s are the same.
func oneIfSame(s []string) []string {
	for _, v := range s {
		if v != s[0] {
			return s
		}
	}
	return s[:min(len(s), 1)]
}

// loadAverage reads the 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("/proc/loadavg is empty")
	}
	return strconv.ParseFloat(f[0], 64)
}
