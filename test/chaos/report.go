package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Print writes the figures of both runs side by side and the verdict.
func (r *Report) Print(w io.Writer) {
	runs := []*Result{r.Clean, r.Chaos}
	row := func(label string, f func(*Result) string) {
		fmt.Fprintf(w, "  %-44s", label)
		for _, x := range runs {
			fmt.Fprintf(w, " %18s", f(x))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\n  %-44s %18s %18s\n", "", "clean", "chaos")
	row("tasks ended", func(x *Result) string { return fmt.Sprint(len(x.States)) })
	for _, st := range states(runs) {
		row("  "+st, func(x *Result) string { return fmt.Sprint(count(x.States, st)) })
	}
	row("time to converge (first submit -> last end)", func(x *Result) string { return fmt.Sprintf("%.1fs", x.Converged.Seconds()) })
	row("then until nothing was left (TTL)", func(x *Result) string { return fmt.Sprintf("%.1fs", x.Cleared.Seconds()) })
	row("events received by the delivery proxy", func(x *Result) string { return fmt.Sprint(x.Delivery.Received) })
	row("  dropped", func(x *Result) string { return fmt.Sprint(x.Delivery.Dropped) })
	row("  delivered more than once", func(x *Result) string { return fmt.Sprint(x.Delivery.Duplicated) })
	row("  copies delayed", func(x *Result) string { return fmt.Sprint(x.Delivery.Delayed) })
	row("  copies sent / not taken (handler down...)", func(x *Result) string {
		return fmt.Sprintf("%d / %d", x.Delivery.Forwarded, x.Delivery.Failed)
	})
	for _, typ := range droppedTypes(runs) {
		row("  dropped "+strings.TrimPrefix(typ, "dev.knative."), func(x *Result) string { return fmt.Sprint(x.Delivery.DroppedByType[typ]) })
	}
	row("handler SIGKILLed and restarted", func(x *Result) string { return fmt.Sprint(x.Kills) })
	row("handler writes through the fault proxy", func(x *Result) string { return fmt.Sprint(x.API.Writes) })
	for _, k := range faultKinds(runs) {
		row("  answered "+k+" by the proxy", func(x *Result) string { return fmt.Sprint(x.API.Faulted[k]) })
	}
	row("  done, then answered 500 (answer lost)", func(x *Result) string { return fmt.Sprint(x.API.Lost()) })
	row("  reads delayed", func(x *Result) string { return fmt.Sprint(x.API.ReadsDelay) })
	row("  requests the client gave up on", func(x *Result) string { return fmt.Sprint(x.API.ProxyErrors) })
	row("sweeps posted / not answered 200", func(x *Result) string { return fmt.Sprintf("%d / %d", x.Sweeps, x.SweepsFailed) })
	for _, k := range []string{"Created job", "Deleted job", "Task ended"} {
		row("  by the sweep (its event lost): "+strings.ToLower(k), func(x *Result) string { return fmt.Sprint(x.SweepSteps[k]) })
	}
	row("recorded jobs never created, created later", func(x *Result) string { return fmt.Sprint(x.Redone) })
	row("TES API calls retried by the harness", func(x *Result) string { return fmt.Sprint(x.Retries) })
	row("handler API requests (audit log)", func(x *Result) string { return fmt.Sprint(x.Audit.Total) })
	row("  jobs created / created twice", func(x *Result) string {
		return fmt.Sprintf("%d / %d", len(x.Audit.JobCreates), len(x.Audit.CreatedTwice()))
	})
	row("  job creates answered 409 AlreadyExists", func(x *Result) string { return fmt.Sprint(x.Audit.JobCreateConflicts) })
	row("PVCs not deleted at the end / Terminating", func(x *Result) string {
		return fmt.Sprintf("%d / %d", len(x.PVCsLeft), x.PVCsTerminating)
	})
	row("objects of the tasks left past the TTL", func(x *Result) string { return fmt.Sprint(len(x.Left)) })
	fmt.Fprintf(w, "\n  faults of the chaos run (each kind asked for must fire)\n")
	for _, f := range r.Faults {
		fired := fmt.Sprint(f.Fired)
		if !f.Asked {
			fired += " (not asked for)"
		}
		fmt.Fprintf(w, "  %-44s %18s\n", f.Kind, fired)
	}
	if r.Passed() {
		fmt.Fprintf(w, "\nPASS: every task ended as it must, the same in both runs; no job created twice; nothing left.\n")
		return
	}
	fmt.Fprintf(w, "\nFAIL: %d problems\n", len(r.Problems))
	for _, p := range r.Problems {
		fmt.Fprintln(w, "  - "+p)
	}
}

func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

func states(runs []*Result) []string {
	return union(runs, func(r *Result) []string { return slices.Collect(maps.Values(r.States)) })
}

func droppedTypes(runs []*Result) []string {
	return union(runs, func(r *Result) []string { return slices.Collect(maps.Keys(r.Delivery.DroppedByType)) })
}

func faultKinds(runs []*Result) []string {
	return union(runs, func(r *Result) []string { return slices.Collect(maps.Keys(r.API.Faulted)) })
}

// union is the sorted set of what f gives for each run.
func union(runs []*Result, f func(*Result) []string) []string {
	set := map[string]bool{}
	for _, r := range runs {
		for _, k := range f(r) {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
