package steps

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// A task whose executor fails uploads the outputs that exist before it ends
// EXECUTOR_ERROR, when the operator's default or its tag says so: the
// executors after the failed one never run, the outputs filer leaves out
// what was not written, and the task ends EXECUTOR_ERROR with the
// executor's reason however the upload ends (behaviour §1.24).
func TestUploadOutputsOnFailure(t *testing.T) {
	prog := func(mod func(taskmeta.Progress) taskmeta.Progress, started ...string) *taskmeta.Progress {
		p := progressOf(fullParts, "ev-old", ago(10*time.Minute), started...)
		if mod != nil {
			p = mod(p)
		}
		return &p
	}
	upTo := []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"}
	failedEx := func(p taskmeta.Progress) taskmeta.Progress {
		return p.WithDone(taskmeta.PartInputsFiler).WithFailed("ex-00", "Job 'task-1234abcd-ex-00' failed: BackoffLimitExceeded")
	}
	uploading := prog(func(p taskmeta.Progress) taskmeta.Progress {
		return failedEx(p).WithStarted("ev-fail", ago(time.Minute), taskmeta.PartOutputsFiler)
	}, upTo...)
	tag := func(v string) []string {
		return []string{taskmeta.AnnotationTags, `{"` + TagUploadOutputsOnFailure + `":"` + v + `"}`}
	}
	exFailed := jobsOf(completed(taskmeta.PartInputsFiler), failed("ex-00"))
	on := func(c *Config) { c.UploadOutputsOnFailure = true }
	for _, c := range []struct {
		name    string
		obs     Observed
		cfg     func(*Config)
		actions []Action
		final   string
		reason  []string
		failed  bool // the record holds the failure
	}{
		{"on: the failure starts the outputs filer, partial; ex-01 never runs",
			Observed{Event: "ev-fail", Anchor: anchorWith(prog(nil, upTo...)), Jobs: exFailed}, on,
			[]Action{{Kind: CreateJob, Part: taskmeta.PartOutputsFiler, Partial: true}}, "", nil, true},
		{"off by default: EXECUTOR_ERROR at once",
			Observed{Event: "ev-fail", Anchor: anchorWith(prog(nil, upTo...)), Jobs: exFailed}, nil,
			[]Action{{Kind: DeletePVC, Part: taskmeta.PartPVC}}, tesv1.StateExecutorError, []string{"ex-00' failed"}, false},
		{"the task's tag turns it on",
			Observed{Event: "ev-fail", Anchor: anchorWith(prog(nil, upTo...), tag("true")...), Jobs: exFailed}, nil,
			[]Action{{Kind: CreateJob, Part: taskmeta.PartOutputsFiler, Partial: true}}, "", nil, true},
		{"the task's tag turns it off",
			Observed{Event: "ev-fail", Anchor: anchorWith(prog(nil, upTo...), tag("false")...), Jobs: exFailed}, on,
			[]Action{{Kind: DeletePVC, Part: taskmeta.PartPVC}}, tesv1.StateExecutorError, nil, false},
		{"past the time limit: EXECUTOR_ERROR at once",
			Observed{Event: "ev-fail", Anchor: anchorWith(prog(func(p taskmeta.Progress) taskmeta.Progress { b := ago(3 * time.Hour); p.Began = &b; return p }, upTo...)), Jobs: exFailed},
			func(c *Config) { on(c); c.MaxRun = time.Hour },
			[]Action{{Kind: DeletePVC, Part: taskmeta.PartPVC}}, tesv1.StateExecutorError, nil, false},
		{"while it uploads, RUNNING",
			Observed{Event: "ev-x", Anchor: anchorWith(uploading), Jobs: jobsOf(failed("ex-00"), running(taskmeta.PartOutputsFiler)), Pods: pods()}, on,
			nil, "", nil, true},
		{"the redelivery of the failure's event creates the filer again, partial",
			Observed{Event: "ev-fail", Anchor: anchorWith(uploading), Jobs: jobsOf(failed("ex-00"))}, on,
			[]Action{{Kind: CreateJob, Part: taskmeta.PartOutputsFiler, Partial: true}}, "", nil, true},
		{"uploaded: EXECUTOR_ERROR with the executor's reason, the files recorded",
			Observed{Event: "ev-up", Anchor: anchorWith(uploading), Jobs: jobsOf(failed("ex-00"), completed(taskmeta.PartOutputsFiler))}, on,
			[]Action{{Kind: RecordOutputFileLogs, Part: taskmeta.PartOutputsFiler}, {Kind: DeletePVC, Part: taskmeta.PartPVC}},
			tesv1.StateExecutorError, []string{"ex-00' failed", "outputs the executors wrote were uploaded"}, true},
		{"the upload failed: EXECUTOR_ERROR with both reasons",
			Observed{Event: "ev-up", Anchor: anchorWith(uploading), Jobs: jobsOf(failed("ex-00"), failed(taskmeta.PartOutputsFiler))}, on,
			[]Action{{Kind: DeletePVC, Part: taskmeta.PartPVC}},
			tesv1.StateExecutorError, []string{"ex-00' failed", "Uploading the outputs after the failure stopped", "outputs-filer"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			p := Decide(c.obs, cfg, t0)
			var got []Action
			for _, a := range p.Actions {
				if a.Kind != RecordExecutorLog {
					a.Reason = ""
					got = append(got, a)
				}
			}
			if !slices.Equal(got, c.actions) {
				t.Errorf("actions %+v, want %+v", got, c.actions)
			}
			final, reason := "", ""
			if p.Final != nil {
				final, reason = p.Final.State, p.Final.Reason
			}
			if final != c.final {
				t.Errorf("final %q (%s), want %q", final, reason, c.final)
			}
			for _, s := range c.reason {
				if !strings.Contains(reason, s) {
					t.Errorf("reason %q lacks %q", reason, s)
				}
			}
			if c.final == "" && p.State != tesv1.StateRunning {
				t.Errorf("state %s while it uploads, want RUNNING", p.State)
			}
			rec, _ := taskmeta.ParseProgress(c.obs.Anchor.Annotations[taskmeta.AnnotationProgress])
			if p.Progress != nil {
				rec = *p.Progress
			}
			if (rec.Failed != nil) != c.failed || rec.IsStarted("ex-01") {
				t.Errorf("record %s: failure recorded %v, want %v; ex-01 never starts", rec.String(), rec.Failed != nil, c.failed)
			}
		})
	}
}
