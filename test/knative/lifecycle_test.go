//go:build knative

package knative

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// jobAdds watches the tasks' Jobs from before a task is created and counts
// how often each of the task's is created.
type jobAdds struct {
	mu    sync.Mutex
	task  string
	adds  map[string]int
	first chan struct{}
	stop  func()
}

func watchJobs(ctx context.Context, t *testing.T) *jobAdds {
	t.Helper()
	w, err := env.C.Client.BatchV1().Jobs(Tasks).Watch(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
	if err != nil {
		t.Fatal(err)
	}
	j := &jobAdds{adds: map[string]int{}, first: make(chan struct{}), stop: w.Stop}
	go func() {
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type != watch.Added {
				continue
			}
			j.mu.Lock()
			j.adds[job.Name]++
			if j.task != "" && strings.HasPrefix(job.Name, j.task+"-ex-") {
				select {
				case <-j.first:
				default:
					close(j.first)
				}
			}
			j.mu.Unlock()
		}
	}()
	return j
}

// of names the task whose Jobs count.
func (j *jobAdds) of(task string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.task = task
	for name := range j.adds {
		if strings.HasPrefix(name, task+"-ex-") {
			close(j.first)
			return
		}
	}
}

func (j *jobAdds) counts() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	m := map[string]int{}
	for k, v := range j.adds {
		if strings.HasPrefix(k, j.task+"-") {
			m[k] = v
		}
	}
	return m
}

// Cancelling a running task through the TES API: the task.cancelled event
// goes through the Broker to the handler, the task ends CANCELED and none
// of its pods is left running.
func TestCancelThroughKnative(t *testing.T) {
	ctx := context.Background()
	api, err := env.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	id, err := api.Create(ctx, RepeatTask("cancel-me", 1, "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitState(ctx, api, id, "RUNNING", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := api.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	task, err := api.Wait(ctx, id, 2*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != "CANCELED" {
		t.Fatalf("after cancel: %s", task.State)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		running := livePods(ctx, t, id)
		if len(running) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods of the cancelled task still running after 2m: %v", running)
		}
		if err := sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("task %s CANCELED and its pods gone %s after the request", id, time.Since(t0).Round(time.Millisecond))
}

// The handler's process SIGKILLed in its container while the task's first
// executor runs: the kubelet starts the container again (or Knative another
// pod), the Broker redelivers what the killed process did not answer, the
// task reaches COMPLETE, and each of its Jobs was created once.
func TestHandlerKilledMidTask(t *testing.T) {
	ctx := context.Background()
	api, err := env.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	jobs := watchJobs(ctx, t)
	defer jobs.stop()
	id, err := api.Create(ctx, RepeatTask("killed-handler", 3, "sleep", "4"))
	if err != nil {
		t.Fatal(err)
	}
	jobs.of(id)
	select {
	case <-jobs.first:
	case <-time.After(4 * time.Minute):
		t.Fatalf("no executor job after 4m: %v", jobs.counts())
	}
	pods, err := env.Pods(ctx, "tesk-handler")
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, p := range pods {
		n, err := killContainerProcesses(string(p.UID), "handler")
		if err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	if killed == 0 {
		t.Fatalf("no handler process of the %d handler pods found on the node", len(pods))
	}
	t.Logf("SIGKILLed %d handler processes in %d pods while the first executor ran", killed, len(pods))
	task, err := api.Wait(ctx, id, 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != "COMPLETE" {
		t.Fatalf("task ended %s: %+v", task.State, task.Logs)
	}
	counts := jobs.counts()
	if len(counts) != 3 { // no inputs, no outputs: no filer
		t.Errorf("jobs created: %v, want the 3 executors'", counts)
	}
	for name, n := range counts {
		if n != 1 {
			t.Errorf("job %s created %d times", name, n)
		}
	}
}

// With the Triggers of every Job and Pod event filtering a type no event
// has, a task still ends: the PingSource's sweep, once a minute (at second
// 0), finds its finished Job and takes the next step. The task is created
// just after a minute begins, so that its Job completes well before the
// next: through events it would end within a second or two of the Job's
// completion; the sweep ends it at the next minute, which the anchor's end
// time shows. The Triggers' filters are put back afterwards. (Patched, not
// deleted: a Trigger deleted and created again leaves its old subscriber
// in the in-memory channel, which then dead-letters every event for it.)
func TestSweepCarriesATaskWhoseEventsAreLost(t *testing.T) {
	ctx := context.Background()
	triggers := env.C.Dynamic.Resource(TriggerGVR).Namespace(Platform)
	filters := map[string]string{}
	setType := func(name, typ string) error {
		patch := fmt.Sprintf(`{"spec":{"filter":{"attributes":{"type":%q}}}}`, typ)
		_, err := triggers.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() {
		for name, typ := range filters {
			if err := setType(name, typ); err != nil {
				t.Errorf("restoring trigger %s: %v", name, err)
			}
		}
	})
	for _, name := range []string{"tesk-job-finished", "tesk-pod-stuck", "tesk-apiserver-add", "tesk-apiserver-update", "tesk-apiserver-delete"} {
		o, err := triggers.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		typ, _, _ := unstructured.NestedString(o.Object, "spec", "filter", "attributes", "type")
		if typ == "" {
			t.Fatalf("trigger %s filters no type", name)
		}
		filters[name] = typ
		if err := setType(name, "tesk.test.never"); err != nil {
			t.Fatal(err)
		}
	}
	// Each Trigger reconciled at its new generation (the Broker's filter
	// reads the Triggers through an informer of its own).
	for name := range filters {
		for deadline := time.Now().Add(time.Minute); ; {
			o, err := triggers.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			observed, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
			if observed == o.GetGeneration() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trigger %s: generation %d observed %d after 1m", name, o.GetGeneration(), observed)
			}
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
	}
	api, err := env.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Up to three tasks: one whose Job completes before second 45 of its
	// minute decides (the sweep then comes 15 s or more after it).
	for attempt := 1; attempt <= 3; attempt++ {
		for s := time.Now().Second(); s < 1 || s > 5; s = time.Now().Second() {
			if err := sleep(ctx, 250*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		id, err := api.Create(ctx, RepeatTask("swept", 1, "sleep", "1"))
		if err != nil {
			t.Fatal(err)
		}
		task, err := api.Wait(ctx, id, 8*time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		if task.State != "COMPLETE" {
			t.Fatalf("task ended %s: %+v", task.State, task.Logs)
		}
		job, err := env.C.Client.BatchV1().Jobs(Tasks).Get(ctx, taskmeta.ObjectName(id, "ex-00"), metav1.GetOptions{})
		if err != nil || job.Status.CompletionTime == nil {
			t.Fatalf("the task's Job: %v (completion %v)", err, job.Status.CompletionTime)
		}
		anchor, err := env.C.Client.CoreV1().ConfigMaps(Tasks).Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ended, err := time.Parse(time.RFC3339, anchor.Annotations[taskmeta.AnnotationEnded])
		if err != nil {
			t.Fatal(err)
		}
		done := job.Status.CompletionTime.Time
		if done.Second() >= 45 {
			t.Logf("task %s: its Job completed at second %d, too close to the next sweep to tell; another", id, done.Second())
			continue
		}
		if gap := ended.Sub(done); gap < 10*time.Second || ended.Second() > 20 {
			t.Fatalf("task %s ended at %s, %s after its Job completed (%s): that was an event's step, not the sweep's at second 0",
				id, ended.Format("15:04:05"), gap, done.Format("15:04:05"))
		}
		t.Logf("task %s COMPLETE through the sweep alone in %s: Job completed %s, task ended %s", id, time.Since(t0).Round(time.Second),
			done.Format("15:04:05"), ended.Format("15:04:05"))
		return
	}
	t.Fatal("no task's Job completed early enough in its minute to tell the sweep from events")
}

// waitState polls until the task is in state (or final).
func waitState(ctx context.Context, api *TES, id, state string, timeout time.Duration) (*tesv1.Task, error) {
	deadline := time.Now().Add(timeout)
	for {
		v, err := api.Get(ctx, id, "MINIMAL")
		if err == nil && (v.State == state || tesv1.IsFinal(v.State)) {
			if v.State != state {
				return v, &stateError{id, state, v.State}
			}
			return v, nil
		}
		if time.Now().After(deadline) {
			return nil, &stateError{id, state, "not yet (" + timeout.String() + ")"}
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

type stateError struct{ id, want, got string }

func (e *stateError) Error() string { return "task " + e.id + ": want " + e.want + ", got " + e.got }

// livePods are the task's pods that run or wait to.
func livePods(ctx context.Context, t *testing.T, id string) []string {
	t.Helper()
	pods, err := env.C.Client.CoreV1().Pods(Tasks).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending {
			live = append(live, p.Name+" "+string(p.Status.Phase))
		}
	}
	return live
}

// An event the handler refuses (400: a task name that cannot be) is not
// retried but delivered to the dead letter sink, whose log shows it: what
// an operator reads to find refused events.
func TestRefusedEventIsDeadLettered(t *testing.T) {
	ctx := context.Background()
	id := fmt.Sprintf("refused-%d", time.Now().UnixNano())
	token, err := env.BrokerToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code, err := env.PostToBroker(ctx, token, BrokerEvent{ID: id, Type: "task.submitted", Source: "test/knative", Data: []byte(`{"task":"NOT A TASK/.."}`)})
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusAccepted {
		t.Fatalf("broker answered %d, want 202", code)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := env.Pods(ctx, "tesk-dead-letters")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			out, err := env.C.Client.CoreV1().Pods(Platform).GetLogs(p.Name, &corev1.PodLogOptions{Container: "display"}).DoRaw(ctx)
			if err != nil || !strings.Contains(string(out), id) {
				continue
			}
			// event_display prints one block per event, each starting
			// with a line "☁️  cloudevents.Event".
			var copies, with400 int
			var shown string
			for _, block := range strings.Split(string(out), "cloudevents.Event") {
				if strings.Contains(block, "id: "+id) {
					copies++
					if strings.Contains(block, "knativeerrorcode: 400") {
						with400++
						shown = block
					}
				}
			}
			if with400 == 0 {
				t.Fatalf("%d copies of the event in the dead letter sink, none with the handler's 400 (knativeerrorcode)", copies)
			}
			t.Logf("dead letter sink %s logged the event (%d copies, %d with the 400):%s", p.Name, copies, with400, shown)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s not in the dead letter sink's log after 3m (%d pods)", id, len(pods))
		}
		if err := sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// killContainerProcesses SIGKILLs, on this machine (the real node), the
// processes named comm in the containers of the pod with uid, found by
// their cgroup, and returns how many it killed.
func killContainerProcesses(uid, comm string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	underscored := strings.ReplaceAll(uid, "-", "_")
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(name)) != comm {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), uid) && !strings.Contains(string(cg), underscored) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return killed, fmt.Errorf("SIGKILL %d (%s): %w", pid, comm, err)
		}
		killed++
	}
	return killed, nil
}
