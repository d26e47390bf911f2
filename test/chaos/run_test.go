package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/test/benchkit"
)

func TestCompare(t *testing.T) {
	tasks := []Task{{Name: "a", Want: "COMPLETE"}, {Name: "b", Want: "CANCELED"}}
	good := func(name string) *Result {
		return &Result{Name: name, States: map[string]string{"a": "COMPLETE", "b": "CANCELED"}, Reasons: map[string]string{},
			Audit: benchkit.AuditCounts{JobCreates: map[string]int{"a-ex-00": 1}}}
	}
	cases := []struct {
		name  string
		chaos func(*Result)
		want  []string // a substring of each problem, in order
	}{
		{"the same ends, one create each, nothing left", func(*Result) {}, nil},
		{"a task ended otherwise, with its reason", func(r *Result) {
			r.States["a"], r.Reasons["a"] = "SYSTEM_ERROR", "Job 'a-ex-00' was deleted while it ran"
		}, []string{`task a: want COMPLETE, got clean COMPLETE, chaos SYSTEM_ERROR chaos: "Job 'a-ex-00' was deleted while it ran"`}},
		{"a task that never ended", func(r *Result) { delete(r.States, "b") }, []string{"task b: want CANCELED, got clean CANCELED, chaos no end"}},
		{"a job created twice", func(r *Result) { r.Audit.JobCreates["a-ex-00"] = 2 }, []string{"chaos run: 1 jobs created more than once: a-ex-00"}},
		{"no job creation in the audit log", func(r *Result) { r.Audit.JobCreates = map[string]int{} }, []string{"the audit log holds no job creation"}},
		{"a PVC not deleted and objects past the TTL", func(r *Result) {
			r.PVCsLeft, r.Left = []string{"persistentvolumeclaims/a-pvc"}, []string{"pods/a-ex-00-x"}
		}, []string{"PVCs of ended tasks not deleted: persistentvolumeclaims/a-pvc", "past their TTL left: pods/a-ex-00-x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chaos := good("chaos")
			c.chaos(chaos)
			got := compare(tasks, good("clean"), chaos)
			if len(got) != len(c.want) {
				t.Fatalf("problems %q, want %d", got, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q, want it to say %q", got[i], w)
				}
			}
		})
	}
}

// every is a chaos result in which every kind of fault fired once, and the
// handler was killed 3 times.
func every() *Result {
	return &Result{
		Kills:    3,
		Delivery: DeliveryCounts{Dropped: 1, Duplicated: 1, Delayed: 1},
		API: APIFaultCounts{
			Faulted:     map[string]int{"POST 429": 1, "PATCH 500": 1, "DELETE 409": 1},
			LostAnswers: map[string]int{"PATCH": 1},
			ReadsDelay:  1,
		},
	}
}

// The verdict: every kind of fault the options ask for must fire; each
// kind that did not is one problem naming it, lost answers included.
func TestFaultsMissing(t *testing.T) {
	o := Options{Kills: 3, DropRate: 0.1, MaxCopies: 3, MaxDelay: time.Second, WriteFaultRate: 0.05, LostAnswerRate: 0.02, ReadDelayRate: 0.1}
	if p := faultsMissing(o, every()); len(p) != 0 {
		t.Errorf("every fault fired, problems %q", p)
	}
	for _, f := range Faults(o, every()) {
		if !f.Asked || f.Fired == 0 {
			t.Errorf("fault %q: asked %v, fired %d; want asked and fired", f.Kind, f.Asked, f.Fired)
		}
	}
	for _, c := range []struct {
		kind   string
		remove func(*Result)
	}{
		{"event dropped", func(r *Result) { r.Delivery.Dropped = 0 }},
		{"event delivered more than once", func(r *Result) { r.Delivery.Duplicated = 0 }},
		{"event copy delayed (reordered)", func(r *Result) { r.Delivery.Delayed = 0 }},
		{"handler SIGKILLed and restarted", func(r *Result) { r.Kills = 0 }},
		{"write answered 429 by the proxy", func(r *Result) { delete(r.API.Faulted, "POST 429") }},
		{"write answered 500 by the proxy", func(r *Result) { delete(r.API.Faulted, "PATCH 500") }},
		{"write answered 409 by the proxy", func(r *Result) { delete(r.API.Faulted, "DELETE 409") }},
		{"write done, then answered 500 (answer lost)", func(r *Result) { r.API.LostAnswers = map[string]int{} }},
		{"read delayed", func(r *Result) { r.API.ReadsDelay = 0 }},
	} {
		r := every()
		c.remove(r)
		p := faultsMissing(o, r)
		if len(p) != 1 || !strings.Contains(p[0], `"`+c.kind+`"`) {
			t.Errorf("no %s: problems %q, want one naming it", c.kind, p)
		}
	}
	// A lost answer is not a fault answered 500 by the proxy, nor the other
	// way round.
	r := every()
	r.API.Faulted = map[string]int{"POST 429": 1, "DELETE 409": 1}
	r.API.LostAnswers = map[string]int{"POST": 5}
	if p := faultsMissing(o, r); len(p) != 1 || !strings.Contains(p[0], "write answered 500 by the proxy") {
		t.Errorf("lost answers only, no 500 of the proxy: problems %q", p)
	}
	if p := faultsMissing(o, &Result{}); len(p) != 9 {
		t.Errorf("no fault fired: %d problems %q, want 9", len(p), p)
	}
	if p := faultsMissing(Options{MaxCopies: 1}, &Result{}); len(p) != 0 {
		t.Errorf("no fault asked for, problems %q", p)
	}
	r = every()
	r.Kills = 2
	if p := faultsMissing(o, r); len(p) != 1 || !strings.Contains(p[0], "killed 2 times, not 3") {
		t.Errorf("2 kills of 3: problems %q", p)
	}
}

// The report prints every kind of fault with its count.
func TestReportPrintsEveryFault(t *testing.T) {
	o := Options{Kills: 3, DropRate: 0.1, MaxCopies: 3, MaxDelay: time.Second, WriteFaultRate: 0.05, LostAnswerRate: 0.02}
	chaos := every()
	chaos.API.LostAnswers = map[string]int{"PATCH": 4, "POST": 3}
	rep := &Report{Clean: &Result{Name: "clean"}, Chaos: chaos, Faults: Faults(o, chaos)}
	rep.Problems = faultsMissing(o, chaos)
	var b strings.Builder
	rep.Print(&b)
	out := b.String()
	// Each fault line: the kind, then its count.
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		for _, f := range rep.Faults {
			if k, rest, ok := strings.Cut(strings.TrimSpace(l), f.Kind); ok && k == "" {
				lines[f.Kind] = strings.TrimSpace(rest)
			}
		}
	}
	for kind, want := range map[string]string{
		"event dropped": "1", "write answered 409 by the proxy": "1", "handler SIGKILLed and restarted": "3",
		"write done, then answered 500 (answer lost)": "7", "read delayed": "1 (not asked for)",
	} {
		if lines[kind] != want {
			t.Errorf("report: %q %q, want %q:\n%s", kind, lines[kind], want, out)
		}
	}
	if len(lines) != len(rep.Faults) || !strings.Contains(out, "PASS") {
		t.Errorf("report: fault lines %v of %d kinds, or no PASS:\n%s", lines, len(rep.Faults), out)
	}
}

func TestHandlerLogCounts(t *testing.T) {
	log := strings.Join([]string{
		`{"level":"info","msg":"Created job","type":"dev.knative.sources.ping","task":"t1"}`,
		`{"level":"info","msg":"Created job","type":"dev.knative.apiserver.resource.update","task":"t2"}`,
		`{"level":"info","msg":"Task ended","type":"dev.knative.sources.ping","task":"t3"}`,
		`{"level":"warn","msg":"Job 'x' recorded as started 61 s ago was never created (...); creating it now","type":"dev.knative.sources.ping"}`,
		`E1203 18:21:26.157224 1484 event_broadcaster.go:270] "Server rejected event"`,
	}, "\n")
	path := filepath.Join(t.TempDir(), "handler.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	sweep, redone, err := handlerLogCounts(path)
	if err != nil {
		t.Fatal(err)
	}
	if sweep["Created job"] != 1 || sweep["Task ended"] != 1 || len(sweep) != 2 || redone != 1 {
		t.Errorf("sweep %v, redone %d", sweep, redone)
	}
}
