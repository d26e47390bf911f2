//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// stateRecorder is a subscriber's sink: it keeps the state change events it
// takes, in the order they came, and answers 503 while down.
type stateRecorder struct {
	mu     sync.Mutex
	down   bool
	events map[string][]events.StateChangedData // by task
	ids    []string
	tries  int
}

func (s *stateRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ev, err := cehttp.NewEventFromHTTPRequest(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var d events.StateChangedData
	if err != nil || ev.Type() != events.TypeTaskStateChanged || ev.DataAs(&d) != nil || ev.Subject() != d.ID {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.events[d.ID] = append(s.events[d.ID], d)
	s.ids = append(s.ids, ev.ID())
	w.WriteHeader(http.StatusAccepted)
}

func (s *stateRecorder) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *stateRecorder) of(task string) []events.StateChangedData {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events[task])
}

// toldToTheEnd waits until the sink took the task's final state (a step
// tells it just after it wrote it, which GET may show first) and returns
// the changes it took.
func (e *env) toldToTheEnd(rec *stateRecorder, task string) []events.StateChangedData {
	e.t.Helper()
	e.waitFor("the sink to take task "+task+"'s final state", 10*time.Second, func() bool {
		told := rec.of(task)
		return len(told) > 0 && tesv1.IsFinal(told[len(told)-1].NewState)
	})
	return rec.of(task)
}

// followStates polls the task's TES view until it shows the state until
// (any final state if empty), and returns the states it showed, each once,
// in order, after those of seen, and the last view.
func (e *env) followStates(task, until string, seen []string, timeout time.Duration) ([]string, tesv1.Task) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		v, code := e.view(task)
		if code == http.StatusOK {
			if len(seen) == 0 || seen[len(seen)-1] != v.State {
				seen = append(seen, v.State)
			}
			if v.State == until || until == "" && tesv1.IsFinal(v.State) {
				return seen, v
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("task %s: states %v, not %q after %s; jobs: %s", task, seen, until, timeout, e.describeJobs(task))
	return nil, tesv1.Task{}
}

// checkTold holds a task's recorded state changes to what GET showed: the
// new states, in order, are want, and GET showed them in that order (all of
// them, or with exact false, those it caught: a task is CANCELING for a
// moment only); each change starts where the one before ended, from QUEUED;
// each has the namespace and the task; the final one's reason is the task's
// system_logs and its time GET's end_time.
func (e *env) checkTold(task string, told []events.StateChangedData, want, shown []string, exact bool, last tesv1.Task) {
	e.t.Helper()
	var news []string
	old := tesv1.StateQueued
	for _, d := range told {
		news = append(news, d.NewState)
		if d.OldState != old || d.ID != task || d.Namespace != e.ns || d.Time == "" {
			e.t.Errorf("task %s: change %+v, want one from %s", task, d, old)
		}
		old = d.NewState
	}
	if !slices.Equal(news, want) {
		e.t.Errorf("task %s: told %v, want %v", task, news, want)
	}
	if exact && !slices.Equal(shown, want) || !isSubsequence(shown, news) {
		e.t.Errorf("task %s: GET showed %v, told %v", task, shown, news)
	}
	if len(told) > 0 {
		end := told[len(told)-1]
		if want := strings.Join(last.Logs[0].SystemLogs, "\n"); end.Reason != want {
			e.t.Errorf("task %s: the end told with reason %q, GET's system_logs %q", task, end.Reason, want)
		}
		if end.Time != last.Logs[0].EndTime {
			e.t.Errorf("task %s: the end told at %s, GET's end_time %s", task, end.Time, last.Logs[0].EndTime)
		}
	}
}

// isSubsequence reports whether sub's elements are in seq, in order.
func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

// Behaviour §5.8: a subscriber's sink receives each task's states in order,
// as GET showed them: a task that completes, and one cancelled, told as
// they go; a task whose executor fails, whose changes the sink refused
// while it was down, told by the sweep once it is back, in order, each
// once.
func TestStateEventsTellWhatGETShows(t *testing.T) {
	rec := &stateRecorder{events: map[string][]events.StateChangedData{}}
	hs := httptest.NewServer(rec)
	defer hs.Close()
	sink, err := eventserver.NewStateSink(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{states: sink})
	e.slowPods("1500ms")

	ok := "task-states01"
	e.setLogs(ok+"-outputs-filer", "TESK_OUTPUT_FILE_LOGS [{\"output\":0,\"path\":\"/data/out/out.txt\",\"size_bytes\":\"5\"}]\n")
	e.submit(ok, taskJSON(executor(ok, 0, nil, nil), executor(ok, 1, nil, nil)))
	shown, last := e.followStates(ok, "", nil, taskTimeout)
	e.checkTold(ok, e.toldToTheEnd(rec, ok), []string{tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateComplete}, shown, true, last)

	// A task cancelled while its executor runs: CANCELING, then CANCELED.
	// GET shows RUNNING as soon as the inputs filer's Job ends (the state
	// once the next step is applied); the cancel waits for that step, the
	// one that starts the executor and tells RUNNING, or it would race it.
	gone := "task-states03"
	e.submit(gone, taskJSON(executor(gone, 0, runFor("20s"), nil)))
	shown, _ = e.followStates(gone, tesv1.StateRunning, nil, taskTimeout)
	e.waitFor("the step that starts the executor to tell RUNNING", taskTimeout, func() bool {
		told := rec.of(gone)
		return len(told) > 0 && told[len(told)-1].NewState == tesv1.StateRunning
	})
	if code, body := e.post("task.cancelled", map[string]any{"task": gone}); code != http.StatusOK {
		t.Fatalf("task.cancelled: %d %s", code, body)
	}
	shown, last = e.followStates(gone, "", shown, taskTimeout)
	e.checkTold(gone, e.toldToTheEnd(rec, gone), []string{tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling, tesv1.StateCanceled}, shown, false, last)

	// The sink goes down: the failing task's changes are owed on its
	// anchor, none lost, none told out of order.
	rec.setDown(true)
	bad := "task-states02"
	e.submit(bad, taskJSON(executor(bad, 0, fail(3), nil), executor(bad, 1, nil, nil)))
	shown, last = e.followStates(bad, "", nil, taskTimeout)
	if got := rec.of(bad); len(got) != 0 {
		t.Fatalf("a sink that is down took %v", got)
	}
	e.waitFor("the anchor to record the three changes as owed", 10*time.Second, func() bool {
		a, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(t.Context(), bad, metav1.GetOptions{})
		return err == nil && strings.Count(a.Annotations[taskmeta.AnnotationStateEventsOwed], `"new"`) == 3
	})
	e.sweep() // still down: kept
	rec.setDown(false)
	e.sweep()
	e.checkTold(bad, rec.of(bad), []string{tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateExecutorError}, shown, true, last)
	a, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(t.Context(), bad, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if owed, ok := a.Annotations[taskmeta.AnnotationStateEventsOwed]; ok {
		t.Errorf("owed %s after the sweep told them", owed)
	}
	e.sweep()
	if n := len(rec.of(bad)); n != 3 {
		t.Errorf("%d changes of the failing task told after another sweep, want the 3", n)
	}
	if n := len(rec.of(ok)) + len(rec.of(gone)); n != 7 {
		t.Errorf("%d changes of the completed and the cancelled task told, want 7", n)
	}
	seen := map[string]bool{}
	for _, id := range rec.ids {
		if seen[id] || !strings.HasPrefix(id, e.ns+"/task-states0") {
			t.Errorf("id %q told twice or not the namespace/task/state", id)
		}
		seen[id] = true
	}
}
