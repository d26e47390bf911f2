package eventserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// A submission or a cancellation naming a ConfigMap of the namespace that
// holds no task (no JSON_INPUT.gz, not an anchor) is refused and writes
// nothing, with events taken as hints (TRUST_EVENTS off, as deployed): a
// sender who can post to the handler cannot end or stamp it.
func TestEventsNamingAConfigMapThatIsNoTask(t *testing.T) {
	s := newTestServer()
	s.Runner.Config.TrustEvents = false
	other := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "task-settings", Namespace: "tesk", ResourceVersion: "7"},
		Data:       map[string]string{"key": "value"},
	}
	client := fake.NewSimpleClientset(other)
	s.Runner.Client = client
	for _, typ := range []string{"task.submitted", "task.cancelled"} {
		rec := post(t, s, typ, `{"task":"task-settings"}`, nil)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "holds no task") {
			t.Errorf("%s: %d %s, want 400 naming why", typ, rec.Code, rec.Body)
		}
	}
	if w := writes(client.Actions()); len(w) != 0 {
		t.Errorf("a ConfigMap that is no task was written on: %q", w)
	}
}

// An ApiServerSource-shaped event whose body says a task's job failed is a
// hint, with TRUST_EVENTS off: the job is read from the API server, where
// it still runs, and the task goes on (nothing is written).
func TestForgedFinishedJobIsReadAgain(t *testing.T) {
	s := newTestServer()
	if rec := post(t, s, "task.submitted", submitted, nil); rec.Code != http.StatusOK {
		t.Fatalf("submit: %d %s", rec.Code, rec.Body)
	}
	s.Runner.Config.TrustEvents = false
	client := s.Runner.Client.(*fake.Clientset)
	job, err := client.BatchV1().Jobs("tesk").Get(t.Context(), "task-1-ex-00", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the executor was not created: %v", err)
	}
	forged := job.DeepCopy()
	forged.Kind, forged.APIVersion = "Job", "batch/v1"
	forged.Status.Failed = 1
	forged.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	raw, err := json.Marshal(forged)
	if err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	rec := post(t, s, "dev.knative.apiserver.resource.update", string(raw), nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("forged job update: %d %s", rec.Code, rec.Body)
	}
	if w := writes(client.Actions()); len(w) != 0 {
		t.Errorf("a forged failed job changed the task: %q (%s)", w, rec.Body)
	}
	read := false
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "jobs" {
			read = true
		}
	}
	if !read {
		t.Error("the job was not read from the API server")
	}
	cm, err := client.CoreV1().ConfigMaps("tesk").Get(t.Context(), "task-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := cm.Annotations[taskmeta.AnnotationState]; st != "" {
		t.Errorf("the task ended %s on a forged event", st)
	}
}
