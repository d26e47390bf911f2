package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestFaultsMissing(t *testing.T) {
	o := Options{Kills: 3, DropRate: 0.1, MaxCopies: 3, WriteFaultRate: 0.05}
	full := &Result{Kills: 3, Delivery: DeliveryCounts{Dropped: 1, Duplicated: 1}, API: APIFaultCounts{Faulted: map[string]int{"POST 500": 1}}}
	if p := faultsMissing(o, full); len(p) != 0 {
		t.Errorf("every fault injected, problems %q", p)
	}
	if p := faultsMissing(o, &Result{}); len(p) != 4 {
		t.Errorf("no fault injected: %d problems %q, want 4", len(p), p)
	}
	if p := faultsMissing(Options{MaxCopies: 1}, &Result{}); len(p) != 0 {
		t.Errorf("no fault asked for, problems %q", p)
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
