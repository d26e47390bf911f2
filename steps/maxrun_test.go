package steps

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestTimeLimit: with TASK_MAX_RUN_SECONDS, a submission records when the
// task began; a part started within the limit carries the time left as the
// plan's deadline, and none starts past it: the task stops in the state of
// the part that could not start, saying why.
func TestTimeLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRun = time.Hour
	parts := []string{"ex-00", "ex-01"}

	p := Decide(Observed{Anchor: anchorWith(nil), Spec: taskWith(2)}, cfg, t0)
	if p.Progress == nil || p.Progress.Began == nil || !p.Progress.Began.Equal(t0.Truncate(time.Second)) {
		t.Fatalf("submission: progress %+v, want began at %s", p.Progress, t0)
	}
	if !p.Deadline.Equal(p.Progress.Began.Add(time.Hour)) {
		t.Errorf("submission: deadline %s, want an hour after it began", p.Deadline)
	}

	prog := func(began time.Time) *taskmeta.Progress {
		pr := progressOf(parts, "ev-1", began, "ex-00")
		pr.Began = &began
		return &pr
	}
	within := Decide(Observed{Event: "ev-2", Anchor: anchorWith(prog(ago(30 * time.Minute))), Jobs: jobsOf(completed("ex-00"))}, cfg, t0)
	if !slices.Contains(within.Actions, act(CreateJob, "ex-01")) || within.Final != nil || !within.Deadline.Equal(ago(30*time.Minute).Add(time.Hour)) {
		t.Errorf("within the limit: %+v", within)
	}
	past := Decide(Observed{Event: "ev-2", Anchor: anchorWith(prog(ago(2 * time.Hour))), Jobs: jobsOf(completed("ex-00"))}, cfg, t0)
	if past.Final == nil || past.Final.State != tesv1.StateExecutorError || !strings.Contains(past.Final.Reason, "time limit of 3600 s") {
		t.Errorf("past the limit: %+v", past.Final)
	}
	for _, a := range past.Actions {
		if a.Kind == CreateJob {
			t.Errorf("past the limit, a job is created: %+v", a)
		}
	}
	// Without a limit, or on a task that began before one was recorded,
	// nothing bounds it.
	for name, c := range map[string]struct {
		cfg  Config
		prog *taskmeta.Progress
	}{
		"no limit":        {DefaultConfig(), prog(ago(48 * time.Hour))},
		"no record of it": {cfg, func() *taskmeta.Progress { pr := progressOf(parts, "ev-1", ago(48*time.Hour), "ex-00"); return &pr }()},
	} {
		p := Decide(Observed{Event: "ev-2", Anchor: anchorWith(c.prog), Jobs: jobsOf(completed("ex-00"))}, c.cfg, t0)
		if p.Final != nil || !p.Deadline.IsZero() {
			t.Errorf("%s: final %+v, deadline %s", name, p.Final, p.Deadline)
		}
	}
}
