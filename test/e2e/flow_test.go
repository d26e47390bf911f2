//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

const taskTimeout = 90 * time.Second

// A task with inputs, three executors of which the second ignores errors and
// fails, and outputs: it completes, the PVC is deleted, the failed executor's
// job is kept, and the uploaded files are recorded on the outputs filer's job.
func TestTaskCompletesPastIgnoredError(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-ignore01"
	e.setLogs(task+"-outputs-filer", "uploading /data/out/out.txt\nTESK_OUTPUT_FILE_LOGS [{\"output\":0,\"path\":\"/data/out/out.txt\",\"size_bytes\":\"5\"}]\n")
	e.submit(task, taskJSON(
		executor(task, 0, nil, nil),
		executor(task, 1, fail(3), map[string]string{"ignore-error": "true"}),
		executor(task, 2, nil, nil),
	))
	v := e.waitState(task, tesv1.StateComplete, taskTimeout)

	e.waitFor("the PVC to be deleted", 10*time.Second, func() bool { return e.pvcGone(task) })
	failed, err := e.job(task + "-ex-01")
	if err != nil {
		t.Fatalf("the failed executor's job is not kept: %v", err)
	}
	if !taskmeta.IsMarkedFailed(failed) {
		t.Errorf("job %s: conditions %v, want Failed", failed.Name, failed.Status.Conditions)
	}
	out, err := e.job(task + "-outputs-filer")
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"url":"s3://results/out.txt","path":"/data/out/out.txt","size_bytes":"5"}]`
	if got := out.Annotations[taskmeta.AnnotationOutputFileLogs]; got != want {
		t.Errorf("output-file-logs = %q, want %q", got, want)
	}
	if len(v.Logs) != 1 || len(v.Logs[0].Logs) != 3 {
		t.Fatalf("view logs: %+v", v.Logs)
	}
	for i, want := range []int32{0, 3, 0} {
		if got := v.Logs[0].Logs[i].ExitCode; got != want {
			t.Errorf("executor %d exit code %v, want %d", i, got, want)
		}
	}
	if len(v.Logs[0].Outputs) != 1 || v.Logs[0].Outputs[0].URL != "s3://results/out.txt" {
		t.Errorf("view outputs: %+v", v.Logs[0].Outputs)
	}
	cm, err := shared.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), task, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Annotations[taskmeta.AnnotationState] != tesv1.StateComplete {
		t.Errorf("final state on the anchor: %q", cm.Annotations[taskmeta.AnnotationState])
	}
	// The jobs and PVC are owned by the anchor.
	for _, name := range e.jobNames(task) {
		j, _ := e.job(name)
		if len(j.OwnerReferences) != 1 || j.OwnerReferences[0].UID != cm.UID {
			t.Errorf("job %s owners %v, want the anchor %s", name, j.OwnerReferences, cm.UID)
		}
	}
}

// An executor that fails stops the task: EXECUTOR_ERROR, no later executor,
// the PVC deleted.
func TestExecutorFailureStopsTask(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-exfail01"
	e.submit(task, taskJSON(
		executor(task, 0, fail(2), nil),
		executor(task, 1, nil, nil),
	))
	v := e.waitState(task, tesv1.StateExecutorError, taskTimeout)
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Errorf("a later executor was created: %v", err)
	}
	if _, err := e.job(task + "-outputs-filer"); !apierrors.IsNotFound(err) {
		t.Errorf("the outputs filer was created: %v", err)
	}
	e.waitFor("the PVC to be deleted", 10*time.Second, func() bool { return e.pvcGone(task) })
	if code := v.Logs[0].Logs[0].ExitCode; code != 2 {
		t.Errorf("exit code %v, want 2", code)
	}
	if len(v.Logs[0].SystemLogs) == 0 || !strings.Contains(v.Logs[0].SystemLogs[0], task+"-ex-00") {
		t.Errorf("system_logs %v should name the failed job", v.Logs[0].SystemLogs)
	}
}

// Every event delivered twice, the second copy concurrently: no job is
// created twice, and the task completes.
func TestDuplicateEventsCreateNothingTwice(t *testing.T) {
	twice := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, hdr := readAll(r), r.Header.Clone()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.ServeHTTP(discard{}, replay(r, hdr, body))
			}()
			h.ServeHTTP(w, replay(r, hdr, body))
			wg.Wait()
		})
	}
	e := newEnv(t, envOptions{sink: twice})
	adds := e.watchJobAdds()
	task := "task-dup01"
	spec := taskJSON(executor(task, 0, nil, nil), executor(task, 1, nil, nil))
	e.submit(task, spec)
	e.submit(task, spec)
	e.waitState(task, tesv1.StateComplete, taskTimeout)
	// Late duplicates: every event before the task's end handled, and
	// seen by the watch.
	adds.through(e, e.settle())
	want := []string{task + "-inputs-filer", task + "-ex-00", task + "-ex-01", task + "-outputs-filer"}
	got := adds.snapshot()
	for _, name := range want {
		if got[name] != 1 {
			t.Errorf("job %s created %d times, want once (all: %v)", name, got[name], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("jobs created: %v, want %v", got, want)
	}
}

// An executor job deleted by hand while it runs stops the task with
// SYSTEM_ERROR, and is not created again.
func TestDeletedJobIsNotRecreated(t *testing.T) {
	e := newEnv(t, envOptions{})
	adds := e.watchJobAdds()
	task := "task-deleted01"
	e.submit(task, noIO(taskJSON(executor(task, 0, runFor("60s"), nil), executor(task, 1, nil, nil))))
	name := task + "-ex-00"
	e.waitFor("the executor job", 30*time.Second, func() bool { _, err := e.job(name); return err == nil })
	bg := metav1.DeletePropagationBackground
	if err := shared.Client.BatchV1().Jobs(e.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	v := e.waitState(task, tesv1.StateSystemError, 30*time.Second)
	if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), "deleted") {
		t.Errorf("system_logs %v should say the job was deleted", v.Logs[0].SystemLogs)
	}
	e.sweep()
	adds.through(e, e.settle())
	if _, err := e.job(name); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted job exists again: %v", err)
	}
	if _, err := e.job(task + "-ex-01"); !apierrors.IsNotFound(err) {
		t.Errorf("the next executor was created: %v", err)
	}
	if n := adds.snapshot()[name]; n != 1 {
		t.Errorf("job %s created %d times", name, n)
	}
}

// Malformed events get 400 with a JSON error and create nothing; a task
// whose JSON can never run is answered 400 too, and ends at once with
// SYSTEM_ERROR and why, so that the view, the TTL and the sweep see it
// (behaviour §8.5).
func TestMalformedEventsChangeNothing(t *testing.T) {
	e := newEnv(t, envOptions{noAdapter: true})
	big := `{"task":"task-big","input":{"executors":[],"x":"` + strings.Repeat("a", 4<<20) + `"}}`
	cases := []struct {
		name, typ string
		data      any
	}{
		{"unknown type", "task.exploded", map[string]any{"task": "task-a"}},
		{"no task", "task.submitted", map[string]any{"input": taskJSON()}},
		{"not a DNS label", "task.submitted", map[string]any{"task": "Task_A", "input": taskJSON()}},
		{"input not JSON object", "task.submitted", `{"task":"task-b","input":"executors"}`},
		{"input does not fit the schema", "task.submitted", map[string]any{"task": "task-c", "input": map[string]any{"executors": "none"}}},
		{"no executors", "task.submitted", map[string]any{"task": "task-d", "input": map[string]any{"executors": []any{}}}},
		{"unknown field", "task.submitted", map[string]any{"task": "task-e", "inptu": map[string]any{}}},
		{"data not JSON", "task.cancelled", "task-f"},
		{"other namespace", "task.cancelled", map[string]any{"task": "task-g", "namespace": "kube-system"}},
		{"job.finished without job", "job.finished", map[string]any{"task": "task-h"}},
		{"body too large", "task.submitted", big},
		{"no ConfigMap and no input", "task.submitted", map[string]any{"task": "task-i"}},
		{"cancel of an unknown task", "task.cancelled", map[string]any{"task": "task-k"}},
	}
	for _, c := range cases {
		code, body := e.post(c.typ, c.data)
		if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s, want 400 with a JSON error", c.name, code, body)
		}
	}
	// Not a CloudEvent at all.
	resp, err := http.Post(e.url+"/", "application/json", strings.NewReader(`{"task":"task-j"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("not a CloudEvent: %d, want 400", resp.StatusCode)
	}
	cms, _ := shared.Client.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
	jobs, _ := shared.Client.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	pvcs, _ := shared.Client.CoreV1().PersistentVolumeClaims(e.ns).List(context.Background(), metav1.ListOptions{})
	var ended []string
	for _, cm := range cms.Items {
		ended = append(ended, cm.Name)
	}
	slices.Sort(ended)
	if !slices.Equal(ended, []string{"task-c", "task-d"}) || len(jobs.Items) != 0 || len(pvcs.Items) != 0 {
		t.Errorf("malformed events created anchors %v, %d jobs and %d PVCs; want only the anchors of the tasks that can never run", ended, len(jobs.Items), len(pvcs.Items))
	}
	for task, why := range map[string]string{"task-c": "cannot unmarshal", "task-d": "no executors"} {
		v, _ := e.view(task)
		if v.State != tesv1.StateSystemError || !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), why) {
			t.Errorf("%s: %s %v, want SYSTEM_ERROR saying %q", task, v.State, v.Logs[0].SystemLogs, why)
		}
	}
}

// A wildcard in an output's first path component would need a mount at /:
// the task stops with SYSTEM_ERROR before the PVC or any job exists.
func TestWildcardAtRootIsRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-refused01"
	spec := taskJSON(executor(task, 0, nil, nil))
	spec["outputs"] = []any{map[string]any{"url": "s3://results/", "path": "/*.txt", "path_prefix": "/", "type": "FILE"}}
	e.submit(task, spec)
	v := e.waitState(task, tesv1.StateSystemError, 10*time.Second)
	if !strings.Contains(strings.Join(v.Logs[0].SystemLogs, " "), "first component") {
		t.Errorf("system_logs %v should say why", v.Logs[0].SystemLogs)
	}
	e.settle()
	if names := e.jobNames(task); len(names) != 0 {
		t.Errorf("jobs created for a refused task: %v", names)
	}
	if _, err := shared.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(context.Background(), taskmeta.PVCName(task), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PVC was created for a refused task: %v", err)
	}
}

// A task's story is told by Kubernetes Events on its anchor: started, each
// job created, and how it ended.
func TestEventsOnTheAnchor(t *testing.T) {
	e := newEnv(t, envOptions{})
	task := "task-events01"
	e.submit(task, noIO(taskJSON(executor(task, 0, nil, nil), executor(task, 1, fail(3), nil))))
	e.waitState(task, tesv1.StateExecutorError, 30*time.Second)
	want := []string{taskmeta.ReasonStarted, taskmeta.ReasonJobCreated, taskmeta.ReasonJobCreated, taskmeta.ReasonEnded}
	var got []string
	e.waitFor("the anchor's Events", 20*time.Second, func() bool {
		list, err := shared.Client.EventsV1().Events(e.ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "regarding.kind=ConfigMap,regarding.name=" + task,
		})
		if err != nil {
			return false
		}
		slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		got = got[:0]
		for _, ev := range list.Items {
			got = append(got, ev.Reason)
			if ev.Reason == taskmeta.ReasonEnded && (ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "EXECUTOR_ERROR: Job '"+task+"-ex-01' failed")) {
				t.Errorf("the Ended event: %s %q", ev.Type, ev.Note)
			}
			if ev.ReportingController != eventserver.ReportingController {
				t.Errorf("event %s reported by %q", ev.Reason, ev.ReportingController)
			}
		}
		return slices.Equal(got, want)
	})
}
