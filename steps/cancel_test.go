package steps

import (
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
	batchv1 "k8s.io/api/batch/v1"
)

// Cancellation racing another step (behaviour §1.18): a cancelled task
// starts no other job and deletes, by name, its jobs that still run, also
// those another step started.
func TestCancelRaces(t *testing.T) {
	parts := []string{"ex-00", "ex-01"}
	cases := []struct {
		name      string
		prog      taskmeta.Progress
		jobs      []string // parts whose jobs exist, running
		now       time.Time
		state     string
		deletes   int
		endedRecs int
	}{
		{
			name:  "a part recorded moments ago whose job is not there yet may still be created: CANCELING",
			prog:  progressOf(parts, "ev-2", t0.Add(-5*time.Second), "ex-00", "ex-01").WithDone("ex-00"),
			now:   t0,
			state: tesv1.StateCanceling,
		},
		{
			name:  "past the grace period, a recorded part without a job was never created: CANCELED",
			prog:  progressOf(parts, "ev-2", t0.Add(-2*recordedMissingGrace), "ex-00", "ex-01").WithDone("ex-00"),
			now:   t0,
			state: tesv1.StateCanceled,
		},
		{
			name:      "a running job is recorded as ended by the service before it is deleted",
			prog:      progressOf(parts, "ev-1", t0.Add(-time.Minute), "ex-00"),
			jobs:      []string{"ex-00"},
			now:       t0,
			state:     tesv1.StateCanceling,
			deletes:   1,
			endedRecs: 1,
		},
		{
			name:      "a job the cancel deleted is not waited for as one being created",
			prog:      progressOf(parts, "ev-1", t0.Add(-time.Second), "ex-00").WithEnded("ex-00", "Task cancelled"),
			now:       t0,
			state:     tesv1.StateCanceled,
			endedRecs: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs := map[string]*batchv1.Job{}
			for _, p := range c.jobs {
				jobs[p] = running(p)
			}
			p := c.prog
			plan := Decide(Observed{Event: "ev-cancel", Anchor: cancelled(anchorWith(&p)), Jobs: jobs}, DefaultConfig(), c.now)
			if plan.State != c.state {
				t.Fatalf("state %s, want %s (plan %+v)", plan.State, c.state, plan)
			}
			deletes := 0
			for _, a := range plan.Actions {
				if a.Kind == CreateJob || a.Kind == CreatePVC {
					t.Errorf("a cancelled task starts %s", a.Part)
				}
				if a.Kind == DeleteJob {
					deletes++
				}
			}
			if deletes != c.deletes {
				t.Errorf("%d deletions, want %d", deletes, c.deletes)
			}
			ended := len(p.Ended)
			if plan.Progress != nil {
				ended = len(plan.Progress.Ended)
			}
			if ended != c.endedRecs {
				t.Errorf("%d ended records, want %d", ended, c.endedRecs)
			}
			if (c.state == tesv1.StateCanceled) != (plan.Final != nil) {
				t.Errorf("final %v with state %s", plan.Final, c.state)
			}
		})
	}
}

// A cancel racing the task's last step is decided by what the cluster
// shows (behaviour §1.18): once the last part has passed, the task ends
// COMPLETE and nothing is deleted but its volume; while a part still runs,
// the cancel wins.
func TestCancelAfterTheLastStep(t *testing.T) {
	withOutputs := []string{"pvc", "inputs-filer", "ex-00", "outputs-filer"}
	noFilers := []string{"pvc", "ex-00", "ex-01"}
	cases := []struct {
		name      string
		parts     []string
		started   []string
		done      []string
		completed []string // parts whose jobs exist, complete
		running   []string // parts whose jobs exist, running
		state     string
		deletes   int
	}{
		{
			name:    "the outputs filer done, COMPLETE not yet written: COMPLETE",
			parts:   withOutputs,
			started: withOutputs, done: []string{"inputs-filer", "ex-00"},
			completed: []string{"inputs-filer", "ex-00", "outputs-filer"},
			state:     tesv1.StateComplete,
		},
		{
			name:    "no filers, the last executor done: COMPLETE",
			parts:   noFilers,
			started: noFilers, done: []string{"ex-00"},
			completed: []string{"ex-00", "ex-01"},
			state:     tesv1.StateComplete,
		},
		{
			name:    "the outputs filer still running: the cancel wins",
			parts:   withOutputs,
			started: withOutputs, done: []string{"inputs-filer", "ex-00"},
			completed: []string{"inputs-filer", "ex-00"},
			running:   []string{"outputs-filer"},
			state:     tesv1.StateCanceling,
			deletes:   1,
		},
		{
			name:    "the last executor done, the outputs filer not started: the cancel wins",
			parts:   withOutputs,
			started: []string{"pvc", "inputs-filer", "ex-00"}, done: []string{"inputs-filer"},
			completed: []string{"inputs-filer", "ex-00"},
			state:     tesv1.StateCanceled,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := progressOf(c.parts, "ev-1", t0.Add(-time.Minute), c.started...).WithDone(c.done...)
			jobs := map[string]*batchv1.Job{}
			for _, part := range c.completed {
				jobs[part] = completed(part)
			}
			for _, part := range c.running {
				jobs[part] = running(part)
			}
			plan := Decide(Observed{Event: "ev-cancel", Anchor: cancelled(anchorWith(&p)), Jobs: jobs}, DefaultConfig(), t0)
			if plan.State != c.state {
				t.Fatalf("state %s, want %s (plan %+v)", plan.State, c.state, plan)
			}
			deletes := 0
			for _, a := range plan.Actions {
				switch a.Kind {
				case CreateJob, CreatePVC:
					t.Errorf("a cancelled task starts %s", a.Part)
				case DeleteJob:
					deletes++
				}
			}
			if deletes != c.deletes {
				t.Errorf("%d job deletions, want %d", deletes, c.deletes)
			}
			if c.state == tesv1.StateComplete {
				if plan.Final == nil || plan.Final.State != tesv1.StateComplete {
					t.Fatalf("final %+v, want COMPLETE", plan.Final)
				}
				said := false
				for _, n := range plan.Notes {
					said = said || strings.Contains(n.Msg, "cancelled after its last step")
				}
				if !said {
					t.Errorf("notes %+v do not say the cancel came after the last step", plan.Notes)
				}
			}
		})
	}
}
