package events

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The cases check behaviour §5 (docs/behaviour.md, the event contract) and
// what is refused with 400 (§5.6): an unknown type, no task name, a name that is not
// a DNS-1123 label, data that does not parse.

const ns = "tesk"

// newEvent is a CloudEvent with raw JSON data.
func newEvent(typ, data string) *cloudevents.Event {
	ev := cloudevents.NewEvent()
	ev.SetID("ev-1")
	ev.SetSource("/test")
	ev.SetType(typ)
	if data != "" {
		_ = ev.SetData(cloudevents.ApplicationJSON, []byte(data))
	}
	return &ev
}

type classifyCase struct {
	name string
	ev   *cloudevents.Event
	want Step // compared without Why and Input; Kind "" means an invalid.Error
}

func runClassify(t *testing.T, cases []classifyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Classify(c.ev, ns)
			if c.want.Kind == "" {
				if err == nil || !invalid.Is(err) {
					t.Fatalf("Classify = %+v, %v; want an invalid.Error", got, err)
				}
				if err.Error() == "" {
					t.Error("an error without a message")
				}
				return
			}
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if c.want.Kind == KindIgnore && got.Why == "" {
				t.Error("ignored without saying why")
			}
			if got.Seen != nil && (got.Seen.Name != got.Job || taskmeta.StatusOf(got.Seen) == taskmeta.JobRunning || got.Deleted) {
				t.Errorf("Seen %s (%v) for job %s, deleted %v: only an ended job the event carried", got.Seen.Name, taskmeta.StatusOf(got.Seen), got.Job, got.Deleted)
			}
			got.Why, got.Input, got.Seen = "", nil, nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Classify = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestClassifySteps(t *testing.T) {
	long := strings.Repeat("t", MaxTaskNameLen+1)
	cases := []classifyCase{
		{"task.submitted with the task's JSON", newEvent(TypeTaskSubmitted, `{"task":"task-1","input":{"executors":[]}}`),
			Step{Kind: KindSubmit, Task: "task-1", Namespace: ns}},
		{"task.submitted without input (the ConfigMap holds it)", newEvent(TypeTaskSubmitted, `{"task":"task-1","namespace":"tesk"}`),
			Step{Kind: KindSubmit, Task: "task-1", Namespace: ns}},
		{"task.submitted without task", newEvent(TypeTaskSubmitted, `{"namespace":"tesk"}`), Step{}},
		{"task.submitted with a task that is not a DNS-1123 label", newEvent(TypeTaskSubmitted, `{"task":"Task_1"}`), Step{}},
		{"task.submitted with a task name too long for its jobs' names", newEvent(TypeTaskSubmitted, `{"task":"`+long+`"}`), Step{}},
		{"task.submitted with an unknown field", newEvent(TypeTaskSubmitted, `{"task":"task-1","inputs":{}}`), Step{}},
		{"task.submitted for another namespace", newEvent(TypeTaskSubmitted, `{"task":"task-1","namespace":"other"}`), Step{}},
		{"task.submitted with an input that is not an object", newEvent(TypeTaskSubmitted, `{"task":"task-1","input":"{}"}`), Step{}},
		{"task.submitted with a task of the wrong type", newEvent(TypeTaskSubmitted, `{"task":42}`), Step{}},
		{"task.submitted without data", newEvent(TypeTaskSubmitted, ""), Step{}},
		{"task.submitted with two JSON values", newEvent(TypeTaskSubmitted, `{"task":"task-1"} {"task":"task-2"}`), Step{}},
		{"task.submitted with data that is not an object", newEvent(TypeTaskSubmitted, `["task-1"]`), Step{}},
		{"task.submitted with data that is not JSON", func() *cloudevents.Event {
			ev := newEvent(TypeTaskSubmitted, "")
			_ = ev.SetData("text/plain", []byte("task-1"))
			return ev
		}(), Step{}},

		{"task.cancelled", newEvent(TypeTaskCancelled, `{"task":"task-1","namespace":"tesk"}`),
			Step{Kind: KindCancel, Task: "task-1", Namespace: ns}},
		{"task.cancelled without task", newEvent(TypeTaskCancelled, `{}`), Step{}},
		{"task.cancelled with a task that is not a DNS-1123 label", newEvent(TypeTaskCancelled, `{"task":"-task"}`), Step{}},
		{"task.cancelled with a task name too long", newEvent(TypeTaskCancelled, `{"task":"`+long+`"}`), Step{}},
		{"task.cancelled with an unknown field", newEvent(TypeTaskCancelled, `{"task":"task-1","reason":"x"}`), Step{}},
		{"task.cancelled for another namespace", newEvent(TypeTaskCancelled, `{"task":"task-1","namespace":"default"}`), Step{}},

		{"job.finished", newEvent(TypeJobFinished, `{"task":"task-1","job":"task-1-ex-00"}`),
			Step{Kind: KindReconcile, Task: "task-1", Namespace: ns, Job: "task-1-ex-00"}},
		{"job.finished without job", newEvent(TypeJobFinished, `{"task":"task-1"}`), Step{}},
		{"job.finished without task", newEvent(TypeJobFinished, `{"job":"task-1-ex-00"}`), Step{}},
		{"job.finished with a task that is not a DNS-1123 label", newEvent(TypeJobFinished, `{"task":"task.1","job":"j"}`), Step{}},
		{"job.finished with a task name too long", newEvent(TypeJobFinished, `{"task":"`+long+`","job":"j"}`), Step{}},
		{"job.finished with an unknown field", newEvent(TypeJobFinished, `{"task":"task-1","job":"j","status":"done"}`), Step{}},
		{"job.finished for another namespace", newEvent(TypeJobFinished, `{"task":"task-1","job":"j","namespace":"x"}`), Step{}},

		{"pod.stuck", newEvent(TypePodStuck, `{"task":"task-1","job":"task-1-ex-00","pod":"task-1-ex-00-abcde","reason":"ErrImagePull","message":"no such image"}`),
			Step{Kind: KindPods, Task: "task-1", Namespace: ns, Job: "task-1-ex-00", Pod: "task-1-ex-00-abcde", Reason: "ErrImagePull", Message: "no such image"}},
		{"pod.stuck without pod", newEvent(TypePodStuck, `{"task":"task-1","job":"task-1-ex-00"}`), Step{}},
		{"pod.stuck without job", newEvent(TypePodStuck, `{"task":"task-1","pod":"p"}`), Step{}},
		{"pod.stuck without task", newEvent(TypePodStuck, `{"job":"j","pod":"p"}`), Step{}},
		{"pod.stuck with a task that is not a DNS-1123 label", newEvent(TypePodStuck, `{"task":"TASK","job":"j","pod":"p"}`), Step{}},
		{"pod.stuck with a task name too long", newEvent(TypePodStuck, `{"task":"`+long+`","job":"j","pod":"p"}`), Step{}},
		{"pod.stuck with an unknown field", newEvent(TypePodStuck, `{"task":"task-1","job":"j","pod":"p","node":"n"}`), Step{}},
		{"pod.stuck for another namespace", newEvent(TypePodStuck, `{"task":"task-1","job":"j","pod":"p","namespace":"x"}`), Step{}},

		{"the PingSource's event is the sweep", newEvent(TypePing, `{"message":"sweep"}`), Step{Kind: KindSweep, Namespace: ns}},
		{"an unknown type", newEvent("task.started", `{"task":"task-1"}`), Step{}},
		{"an ApiServerSource type with an unknown verb", newEvent("dev.knative.apiserver.resource.patch", `{}`), Step{}},
		{"an ApiServerSource type of neither mode", newEvent("dev.knative.apiserver.other.add", `{}`), Step{}},
	}
	runClassify(t, cases)

	t.Run("task.submitted carries its input", func(t *testing.T) {
		s, err := Classify(newEvent(TypeTaskSubmitted, `{"task":"task-1","input":{"executors":[]}}`), ns)
		if err != nil || string(s.Input) != `{"executors":[]}` {
			t.Errorf("Classify = %+v (input %s), %v", s, s.Input, err)
		}
		s, err = Classify(newEvent(TypeTaskSubmitted, `{"task":"task-1","input":null}`), ns)
		if err != nil || s.Input != nil {
			t.Errorf("a null input: %+v (input %q), %v; want none", s, s.Input, err)
		}
	})
}

// apiServerEvent is an event as the ApiServerSource adapter makes it
// (knative.dev/eventing/pkg/adapter/apiserver/events): in resource mode the
// data is the object, in ref mode a reference to it.
func apiServerEvent(t *testing.T, verb string, ref bool, obj interface {
	metav1.Object
	runtime.Object
}) *cloudevents.Event {
	t.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	apiVersion, kind := gvk.GroupVersion().String(), gvk.Kind
	ev := cloudevents.NewEvent()
	ev.SetID("ev-api")
	ev.SetSource("https://10.0.0.1:443")
	ev.SetSubject("/apis/" + apiVersion + "/namespaces/" + obj.GetNamespace() + "/" + strings.ToLower(kind) + "s/" + obj.GetName())
	ev.SetExtension("kind", kind)
	ev.SetExtension("name", obj.GetName())
	ev.SetExtension("namespace", obj.GetNamespace())
	var data any = obj
	mode := "resource"
	if ref {
		mode = "ref"
		data = corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), Namespace: obj.GetNamespace()}
	}
	ev.SetType("dev.knative.apiserver." + mode + "." + verb)
	if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	return &ev
}

func taskJob(name string, conds ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{taskmeta.LabelTask: "task-1"}},
	}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return j
}

func taskPod(name, job string, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			taskmeta.LabelTask: "task-1", batchv1.JobNameLabel: job, "job-name": job,
		}},
		Status: status,
	}
}

func anchor(labels, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "task-1", Namespace: ns, Labels: labels, Annotations: annotations},
	}
}

func waitingPod(reason string, init bool) corev1.PodStatus {
	cs := []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "m"}}}}
	s := corev1.PodStatus{Phase: corev1.PodPending}
	if init {
		s.InitContainerStatuses = cs
	} else {
		s.ContainerStatuses = cs
	}
	return s
}

func TestClassifyAPIServer(t *testing.T) {
	reconcile := func(job string) Step {
		return Step{Kind: KindReconcile, Task: "task-1", Namespace: ns, Job: job}
	}
	deleted := func(job string) Step { s := reconcile(job); s.Deleted = true; return s }
	ignored := Step{Kind: KindIgnore}
	pods := func(pod, job, reason string) Step {
		return Step{Kind: KindPods, Task: "task-1", Namespace: ns, Job: job, Pod: pod, Reason: reason}
	}
	being := func(j *batchv1.Job) *batchv1.Job {
		now := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
		j.DeletionTimestamp = &now
		return j
	}
	otherNS := taskJob("task-1-ex-00", batchv1.JobComplete)
	otherNS.Namespace = "default"
	stuckMsg := func(s Step) Step { s.Message = "m"; return s }
	unschedulable := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes",
	}}}

	cases := []classifyCase{
		// Jobs, resource mode.
		{"a job that completed: look at its task", apiServerEvent(t, "update", false, taskJob("task-1-ex-00", batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)), reconcile("task-1-ex-00")},
		{"a job that failed: look at its task", apiServerEvent(t, "update", false, taskJob("task-1-inputs-filer", batchv1.JobFailed)), reconcile("task-1-inputs-filer")},
		{"a job that is FailureTarget: look at its task", apiServerEvent(t, "update", false, taskJob("task-1-ex-01", batchv1.JobFailureTarget)), reconcile("task-1-ex-01")},
		{"a job that runs: ignored", apiServerEvent(t, "update", false, taskJob("task-1-ex-00")), ignored},
		{"a job added: ignored", apiServerEvent(t, "add", false, taskJob("task-1-ex-00")), ignored},
		{"a Suspended job: ignored", apiServerEvent(t, "update", false, taskJob("task-1-ex-00", batchv1.JobSuspended)), ignored},
		{"a running job being deleted: look at its task", apiServerEvent(t, "update", false, being(taskJob("task-1-ex-00"))), reconcile("task-1-ex-00")},
		{"a job deleted: look at its task", apiServerEvent(t, "delete", false, taskJob("task-1-ex-00")), deleted("task-1-ex-00")},
		{"a job in another namespace: ignored", apiServerEvent(t, "update", false, otherNS), ignored},
		{"a job that is not a task's: ignored", apiServerEvent(t, "update", false, func() *batchv1.Job {
			j := taskJob("backup", batchv1.JobComplete)
			j.Labels = nil
			return j
		}()), ignored},
		// Jobs, ref mode.
		{"ref mode: a job updated: look at its task", apiServerEvent(t, "update", true, taskJob("task-1-ex-00")), reconcile("task-1-ex-00")},
		{"ref mode: a job deleted: look at its task", apiServerEvent(t, "delete", true, taskJob("task-1-outputs-filer")), deleted("task-1-outputs-filer")},
		{"ref mode: a job that is not a task's: ignored", apiServerEvent(t, "update", true, taskJob("backup")), ignored},

		// Pods, resource mode.
		{"a pod whose image can't be pulled: check the task's pods", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", waitingPod("ErrImagePull", false))),
			stuckMsg(pods("task-1-ex-00-abcde", "task-1-ex-00", "ErrImagePull"))},
		{"a pod in ImagePullBackOff: check", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", waitingPod("ImagePullBackOff", false))),
			stuckMsg(pods("task-1-ex-00-abcde", "task-1-ex-00", "ImagePullBackOff"))},
		{"a pod with InvalidImageName: check", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", waitingPod("InvalidImageName", false))),
			stuckMsg(pods("task-1-ex-00-abcde", "task-1-ex-00", "InvalidImageName"))},
		{"a pod whose init container's configuration is broken: check", apiServerEvent(t, "update", false, taskPod("task-1-inputs-filer-abcde", "task-1-inputs-filer", waitingPod("CreateContainerConfigError", true))),
			stuckMsg(pods("task-1-inputs-filer-abcde", "task-1-inputs-filer", "CreateContainerConfigError"))},
		{"an unschedulable pod: check", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", unschedulable)),
			func() Step {
				s := pods("task-1-ex-00-abcde", "task-1-ex-00", corev1.PodReasonUnschedulable)
				s.Message = "0/1 nodes"
				return s
			}()},
		{"a pod the cluster evicts: check the task's pods", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "m"}}})),
			stuckMsg(pods("task-1-ex-00-abcde", "task-1-ex-00", "EvictionByEvictionAPI"))},
		{"a pod that runs: ignored", apiServerEvent(t, "update", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", corev1.PodStatus{Phase: corev1.PodRunning})), ignored},
		{"a pod being created: ignored", apiServerEvent(t, "add", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", waitingPod("ContainerCreating", false))), ignored},
		{"a pod deleted: ignored", apiServerEvent(t, "delete", false, taskPod("task-1-ex-00-abcde", "task-1-ex-00", waitingPod("ErrImagePull", false))), ignored},
		{"a stuck pod that is not a task's: ignored", apiServerEvent(t, "update", false, func() *corev1.Pod {
			p := taskPod("web-5d8f7", "", waitingPod("ErrImagePull", false))
			p.Labels = nil
			return p
		}()), ignored},
		// Pods, ref mode.
		{"ref mode: a task's pod changed: check the task's pods", apiServerEvent(t, "update", true, taskPod("task-1-ex-00-abcde", "task-1-ex-00", corev1.PodStatus{})),
			pods("task-1-ex-00-abcde", "task-1-ex-00", "")},
		{"ref mode: a pod that is not a task's: ignored", apiServerEvent(t, "update", true, taskPod("web-5d8f7", "", corev1.PodStatus{})), ignored},

		// The anchor.
		{"the anchor labelled task-status: Cancelled: cancel the task", apiServerEvent(t, "update", false, anchor(
			map[string]string{taskmeta.LabelTask: "task-1", taskmeta.LabelStatus: taskmeta.StatusCancelled}, nil)),
			Step{Kind: KindCancel, Task: "task-1", Namespace: ns}},
		{"a cancelled anchor of a task that ended: ignored", apiServerEvent(t, "update", false, anchor(
			map[string]string{taskmeta.LabelTask: "task-1", taskmeta.LabelStatus: taskmeta.StatusCancelled}, map[string]string{taskmeta.AnnotationState: tesv1.StateComplete})), ignored},
		{"an anchor without the label: ignored", apiServerEvent(t, "update", false, anchor(map[string]string{taskmeta.LabelTask: "task-1"}, nil)), ignored},
		{"a ConfigMap that is not a task's anchor: ignored", apiServerEvent(t, "update", false, anchor(
			map[string]string{taskmeta.LabelTask: "task-2", taskmeta.LabelStatus: taskmeta.StatusCancelled}, nil)), ignored},
		{"an anchor deleted: ignored", apiServerEvent(t, "delete", false, anchor(
			map[string]string{taskmeta.LabelTask: "task-1", taskmeta.LabelStatus: taskmeta.StatusCancelled}, nil)), ignored},
		{"ref mode: an anchor changed: look at its task", apiServerEvent(t, "update", true, anchor(nil, nil)),
			Step{Kind: KindReconcile, Task: "task-1", Namespace: ns}},

		// Others.
		{"a kind that is not watched: ignored", apiServerEvent(t, "update", false, &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		}), ignored},
		{"data that is not an object", func() *cloudevents.Event {
			return newEvent("dev.knative.apiserver.resource.update", `"task-1-ex-00"`)
		}(), Step{}},
		{"data without a name", func() *cloudevents.Event {
			return newEvent("dev.knative.apiserver.ref.update", `{"kind":"Job","apiVersion":"batch/v1"}`)
		}(), Step{}},
		{"a Job whose status has the wrong type", func() *cloudevents.Event {
			return newEvent("dev.knative.apiserver.resource.update", `{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"task-1-ex-00","namespace":"tesk"},"status":[]}`)
		}(), Step{}},
	}
	runClassify(t, cases)
}

func TestFromHTTP(t *testing.T) {
	data := `{"task":"task-1","job":"task-1-ex-00"}`
	binary := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(data))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("ce-specversion", "1.0")
		r.Header.Set("ce-id", "ev-42")
		r.Header.Set("ce-source", "/curl")
		r.Header.Set("ce-type", TypeJobFinished)
		return r
	}
	structured := func(body string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/cloudevents+json")
		return r
	}

	t.Run("binary mode", func(t *testing.T) {
		ev, err := FromHTTP(binary())
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID() != "ev-42" || ev.Type() != TypeJobFinished || ev.Source() != "/curl" || string(ev.Data()) != data {
			t.Errorf("event %v", ev)
		}
		if s, err := Classify(ev, ns); err != nil || s.Kind != KindReconcile || s.Job != "task-1-ex-00" {
			t.Errorf("Classify = %+v, %v", s, err)
		}
	})
	t.Run("structured mode", func(t *testing.T) {
		ev, err := FromHTTP(structured(`{"specversion":"1.0","id":"ev-43","source":"/curl","type":"task.cancelled","datacontenttype":"application/json","data":{"task":"task-1"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID() != "ev-43" || ev.Type() != TypeTaskCancelled {
			t.Errorf("event %v", ev)
		}
		if s, err := Classify(ev, ns); err != nil || s.Kind != KindCancel || s.Task != "task-1" {
			t.Errorf("Classify = %+v, %v", s, err)
		}
	})
	t.Run("structured mode without datacontenttype", func(t *testing.T) {
		ev, err := FromHTTP(structured(`{"specversion":"1.0","id":"ev-44","source":"/curl","type":"task.cancelled","data":{"task":"task-1"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := Classify(ev, ns); err != nil || s.Kind != KindCancel {
			t.Errorf("Classify = %+v, %v", s, err)
		}
	})

	bad := []struct {
		name string
		req  func() *http.Request
	}{
		{"a body over MaxBodyBytes", func() *http.Request {
			body := append([]byte(`{"task":"task-1","job":"`), bytes.Repeat([]byte("x"), MaxBodyBytes)...)
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(append(body, `"}`...)))
			r.Header = binary().Header
			return r
		}},
		{"not a CloudEvent", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(data))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
		{"binary mode without an id", func() *http.Request {
			r := binary()
			r.Header.Del("ce-id")
			return r
		}},
		{"binary mode without a type", func() *http.Request {
			r := binary()
			r.Header.Del("ce-type")
			return r
		}},
		{"binary mode of an unknown spec version", func() *http.Request {
			r := binary()
			r.Header.Set("ce-specversion", "9.9")
			return r
		}},
		{"structured mode with a body that is not JSON", func() *http.Request { return structured(`{"specversion":"1.0",`) }},
		{"structured mode without a source", func() *http.Request {
			return structured(`{"specversion":"1.0","id":"x","type":"task.cancelled","data":{"task":"task-1"}}`)
		}},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			ev, err := FromHTTP(c.req())
			if err == nil || !invalid.Is(err) {
				t.Errorf("FromHTTP = %v, %v; want an invalid.Error", ev, err)
			}
		})
	}

	t.Run("a body of exactly MaxBodyBytes is read", func(t *testing.T) {
		body := `{"task":"task-1","job":"task-1-ex-00"}`
		body += strings.Repeat(" ", MaxBodyBytes-len(body))
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header = binary().Header
		if _, err := FromHTTP(r); err != nil {
			t.Errorf("FromHTTP: %v", err)
		}
	})
}

// FuzzFromHTTP: any request decodes to an event or an invalid.Error, and any
// decoded event classifies to a step or an invalid.Error; nothing panics.
func FuzzFromHTTP(f *testing.F) {
	f.Add([]byte(`{"task":"task-1","job":"task-1-ex-00"}`), "application/json", "1.0", TypeJobFinished, false)
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"task.submitted","data":{"task":"t","input":{"executors":[]}}}`), "application/cloudevents+json", "", "", true)
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"dev.knative.apiserver.resource.update","data":{"kind":"Pod","metadata":{"name":"t-ex-00-abcde","labels":{"taskmaster-name":"t"}},"status":{"phase":"Pending","containerStatuses":[{"state":{"waiting":{"reason":"ErrImagePull"}}}]}}}`), "application/cloudevents+json; charset=utf-8", "", "", true)
	f.Add([]byte(`{"kind":"Job","apiVersion":"batch/v1","name":"t-ex-00","namespace":"tesk"}`), "application/json", "1.0", "dev.knative.apiserver.ref.delete", false)
	f.Add([]byte(`{"kind":"ConfigMap","metadata":{"name":"t","labels":{"taskmaster-name":"t","task-status":"Cancelled"}}}`), "application/json", "1.0", "dev.knative.apiserver.resource.update", false)
	f.Add([]byte(`{"specversion":"1.0"`), "application/cloudevents-batch+json", "", "", true)
	f.Add([]byte("\x00\xff"), "text/plain", "0.3", TypePing, false)
	f.Fuzz(func(t *testing.T, body []byte, contentType, specversion, typ string, structuredMode bool) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if contentType != "" && isHeaderValue(contentType) {
			r.Header.Set("Content-Type", contentType)
		}
		if !structuredMode {
			for k, v := range map[string]string{"ce-specversion": specversion, "ce-id": "ev-1", "ce-source": "/fuzz", "ce-type": typ} {
				if isHeaderValue(v) {
					r.Header.Set(k, v)
				}
			}
		}
		ev, err := FromHTTP(r)
		if err != nil {
			if !invalid.Is(err) {
				t.Fatalf("FromHTTP: %v is not an invalid.Error", err)
			}
			return
		}
		checkClassify(t, ev)
	})
}

// FuzzClassify: any event classifies to a step or an invalid.Error; a step
// that acts on a task names a valid task of the service's namespace.
func FuzzClassify(f *testing.F) {
	f.Add(TypeTaskSubmitted, "application/json", []byte(`{"task":"task-1","input":{"executors":[]}}`))
	f.Add(TypeTaskCancelled, "application/json", []byte(`{"task":"task-1","namespace":"tesk"}`))
	f.Add(TypeJobFinished, "", []byte(`{"task":"task-1","job":"task-1-ex-00"}`))
	f.Add(TypePodStuck, "application/json", []byte(`{"task":"task-1","job":"j","pod":"p","reason":"ErrImagePull"}`))
	f.Add(TypePing, "application/json", []byte(`{}`))
	f.Add("dev.knative.apiserver.resource.update", "application/json", []byte(`{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"task-1-ex-00","namespace":"tesk","labels":{"taskmaster-name":"task-1"}},"status":{"conditions":[{"type":"Complete","status":"True"}]}}`))
	f.Add("dev.knative.apiserver.ref.update", "application/json", []byte(`{"kind":"Pod","apiVersion":"v1","name":"task-1-ex-00-abcde","namespace":"tesk"}`))
	f.Add("dev.knative.apiserver.resource.update", "application/json", []byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"task-1","labels":{"taskmaster-name":"task-1","task-status":"Cancelled"}}}`))
	f.Add("dev.knative.apiserver.resource.delete", "application/json", []byte(`null`))
	f.Add(TypeTaskSubmitted, "text/plain", []byte(`task-1`))
	f.Fuzz(func(t *testing.T, typ, contentType string, data []byte) {
		ev := cloudevents.NewEvent()
		ev.SetID("ev-1")
		ev.SetSource("/fuzz")
		ev.SetType(typ)
		if len(data) > 0 {
			if err := ev.SetData(contentType, data); err != nil {
				return
			}
		}
		checkClassify(t, &ev)
	})
}

func checkClassify(t *testing.T, ev *cloudevents.Event) {
	t.Helper()
	s, err := Classify(ev, ns)
	if err != nil {
		if !invalid.Is(err) {
			t.Fatalf("Classify: %v is not an invalid.Error", err)
		}
		return
	}
	switch s.Kind {
	case KindIgnore:
		if s.Why == "" {
			t.Fatal("ignored without saying why")
		}
	case KindSweep:
		if s.Namespace != ns {
			t.Fatalf("sweep of namespace %q", s.Namespace)
		}
	case KindSubmit, KindCancel, KindReconcile, KindPods:
		if s.Task == "" || s.Namespace != ns {
			t.Fatalf("step %+v without a task of namespace %s", s, ns)
		}
		if s.Kind == KindSubmit && len(s.Input) > 0 && !json.Valid(s.Input) {
			t.Fatalf("input %q is not JSON", s.Input)
		}
	default:
		t.Fatalf("unknown kind %q", s.Kind)
	}
}

// isHeaderValue reports whether net/http would send v as a header value.
func isHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// A Resource-mode event of a job that ended carries the job to the step,
// which then need not read it again (its end is final); a job being deleted
// and a Reference-mode event carry none.
func TestEndedJobIsSeen(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   *cloudevents.Event
		seen bool
	}{
		{"completed", apiServerEvent(t, "update", false, taskJob("task-1-ex-00", batchv1.JobSuccessCriteriaMet)), true},
		{"failed", apiServerEvent(t, "update", false, taskJob("task-1-ex-00", batchv1.JobFailed)), true},
		{"deleted", apiServerEvent(t, "delete", false, taskJob("task-1-ex-00", batchv1.JobComplete)), false},
		{"reference mode", apiServerEvent(t, "update", true, taskJob("task-1-ex-00", batchv1.JobComplete)), false},
	} {
		step, err := Classify(c.ev, ns)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (step.Seen != nil) != c.seen {
			t.Errorf("%s: Seen %v, want %v", c.name, step.Seen != nil, c.seen)
		}
	}
}

// The step events the TES API sends carry the data keys task and namespace,
// and classify as the steps they ask for.
func TestNewStepEvents(t *testing.T) {
	for _, c := range []struct {
		ev   cloudevents.Event
		typ  string
		want Step
	}{
		{NewTaskSubmitted("task-1", ns), TypeTaskSubmitted, Step{Kind: KindSubmit, Task: "task-1", Namespace: ns}},
		{NewTaskCancelled("task-1", ns), TypeTaskCancelled, Step{Kind: KindCancel, Task: "task-1", Namespace: ns}},
	} {
		c.ev.SetID("ev-1")
		c.ev.SetSource("/test")
		if err := c.ev.Validate(); err != nil {
			t.Fatalf("%s: %v", c.typ, err)
		}
		var data map[string]string
		if err := json.Unmarshal(c.ev.Data(), &data); err != nil || !reflect.DeepEqual(data, map[string]string{"task": "task-1", "namespace": ns}) {
			t.Errorf("%s: data %s (%v)", c.typ, c.ev.Data(), err)
		}
		if c.ev.Type() != c.typ || c.ev.Subject() != "task-1" || c.ev.DataContentType() != cloudevents.ApplicationJSON {
			t.Errorf("%s: type %q, subject %q, content type %q", c.typ, c.ev.Type(), c.ev.Subject(), c.ev.DataContentType())
		}
		got, err := Classify(&c.ev, ns)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.typ, got, err, c.want)
		}
	}
}

// The sink's token is read from its file each time; a file that is not
// there is no token, one that cannot be read an error.
func TestSinkToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if tok, err := SinkToken(file); tok != "" || err != nil {
		t.Errorf("no file: %q, %v", tok, err)
	}
	if tok, err := SinkToken(""); tok != "" || err != nil {
		t.Errorf("no file named: %q, %v", tok, err)
	}
	if err := os.WriteFile(file, []byte(" abc.def \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := SinkToken(file); tok != "abc.def" || err != nil {
		t.Errorf("a token: %q, %v", tok, err)
	}
	if _, err := SinkToken(dir); err == nil {
		t.Error("a directory: no error")
	}
}
