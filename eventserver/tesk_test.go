package eventserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/internal/fixture"
)

// teskTask is the task of testdata/tesk-taskmaster-task.yaml, run by TESK's
// taskmaster.
const teskTask = "task-7c1a9e42"

// teskObjects reads testdata/tesk-taskmaster-task.yaml: a task's objects as
// TESK's API and taskmaster create them, in the namespace "tesk".
func teskObjects(t *testing.T) []runtime.Object {
	t.Helper()
	objs, err := fixture.Objects("../testdata/tesk-taskmaster-task.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// writes lists the requests that are not reads.
func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, fmt.Sprintf("%s %s", v, a.GetResource().Resource))
		}
	}
	return out
}

// A task that TESK's taskmaster runs, its objects in the service's own
// namespace, is neither adopted nor watched: every event that its objects
// make (the ApiServerSource's, in resource and ref mode, each verb) and
// every step type sent about it (as deployed, TRUST_EVENTS off) writes
// nothing; a submission is refused (400, TESK's taskmaster named), and so
// is a cancellation; the sweep neither counts nor steps it.
func TestTESKTaskmasterTaskIsLeftToTESK(t *testing.T) {
	objs := teskObjects(t)
	s := newTestServer()
	s.Runner.Config.TrustEvents = false
	client := fake.NewSimpleClientset(objs...)
	s.Runner.Client = client

	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := o.(metav1.Object)
		kind := o.GetObjectKind().GroupVersionKind()
		ref := fmt.Sprintf(`{"kind":%q,"apiVersion":%q,"name":%q,"namespace":"tesk"}`, kind.Kind, kind.GroupVersion().String(), m.GetName())
		for _, verb := range []string{"add", "update", "delete"} {
			for typ, data := range map[string]string{
				"dev.knative.apiserver.resource." + verb: string(raw),
				"dev.knative.apiserver.ref." + verb:      ref,
			} {
				rec := post(t, s, typ, data, nil)
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ignored"`) {
					t.Errorf("%s of %s %s: %d %s, want 200 ignored", typ, kind.Kind, m.GetName(), rec.Code, rec.Body)
				}
			}
		}
	}

	for _, c := range []struct {
		typ, data string
		code      int
		want      string
	}{
		{"job.finished", `{"task":"` + teskTask + `","job":"` + teskTask + `-ex-00"}`, http.StatusOK, `"ignored":"unknown task ` + teskTask + `"`},
		{"job.finished", `{"task":"` + teskTask + `","job":"` + teskTask + `-inputs-filer"}`, http.StatusOK, `"ignored"`},
		{"pod.stuck", `{"task":"` + teskTask + `","job":"` + teskTask + `-ex-01","pod":"` + teskTask + `-ex-01-q8w2n","reason":"ImagePullBackOff","message":"x"}`, http.StatusOK, `"ignored"`},
		{"task.cancelled", `{"task":"` + teskTask + `"}`, http.StatusBadRequest, "is run by TESK's taskmaster"},
		{"task.submitted", `{"task":"` + teskTask + `"}`, http.StatusBadRequest, "is run by TESK's taskmaster (Job " + teskTask + ", job-type: taskmaster)"},
	} {
		rec := post(t, s, c.typ, c.data, nil)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.typ, c.data, rec.Code, rec.Body, c.code, c.want)
		}
	}

	// The sweep lists the ConfigMaps' metadata: TESK's is among them.
	sc := metadatafake.NewTestScheme()
	sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, &metav1.PartialObjectMetadata{})
	sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}, &metav1.PartialObjectMetadataList{})
	var mds []runtime.Object
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			mds = append(mds, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: cm.ObjectMeta})
		}
	}
	s.Metadata = metadatafake.NewSimpleMetadataClient(sc, mds...)
	rec := post(t, s, "dev.knative.sources.ping", `{}`, nil)
	var swept struct {
		Tasks   int               `json:"tasks"`
		Stepped []json.RawMessage `json:"stepped"`
		Counts  struct {
			States map[string]int `json:"states"`
		} `json:"counts"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &swept); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("sweep: %d %s (%v)", rec.Code, rec.Body, err)
	}
	total := 0
	for _, n := range swept.Counts.States {
		total += n
	}
	if swept.Tasks != 0 || len(swept.Stepped) != 0 || total != 0 {
		t.Errorf("sweep: %s, want no task counted or stepped", rec.Body)
	}

	if w := writes(client.Actions()); len(w) != 0 {
		t.Errorf("TESK's task was written on: %q", w)
	}
	if len(client.Actions()) == 0 {
		t.Error("no request at all: the steps did not look")
	}
}

// With TRUST_EVENTS on (local use), an event that carries a task JSON for
// the name of a task TESK's taskmaster runs, or cancels it on its word,
// changes none of TESK's objects either.
func TestTESKTaskmasterTaskWithTrustedEvents(t *testing.T) {
	objs := teskObjects(t)
	s := newTestServer()
	client := fake.NewSimpleClientset(objs...)
	s.Runner.Client = client
	before, err := client.CoreV1().ConfigMaps("tesk").Get(context.Background(), teskTask, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	input := `{"task":"` + teskTask + `","input":{"executors":[{"metadata":{"name":"` + teskTask + `-ex-00"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"ubuntu"}]}}}}]}}`
	if rec := post(t, s, "task.submitted", input, nil); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "TESK's taskmaster") {
		t.Errorf("task.submitted with input: %d %s, want 400 naming TESK's taskmaster", rec.Code, rec.Body)
	}
	if rec := post(t, s, "task.cancelled", `{"task":"`+teskTask+`"}`, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("task.cancelled: %d %s, want 400", rec.Code, rec.Body)
	}
	// The only write tried is the anchor's creation, which finds TESK's
	// ConfigMap there (AlreadyExists) and changes nothing.
	if w := writes(client.Actions()); len(w) != 1 || w[0] != "create configmaps" {
		t.Errorf("writes %q, want only the refused create", w)
	}
	after, err := client.CoreV1().ConfigMaps("tesk").Get(context.Background(), teskTask, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !equalJSON(t, before, after) {
		t.Errorf("TESK's ConfigMap changed:\n%v\n%v", before, after)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

// The ConfigMap the TESK API writes for this service (no taskmaster Job) is
// still taken by a cancellation before its submission, as by a
// submission: the task ends CANCELED and nothing is created.
func TestTESKAPIConfigMapCancelledBeforeSubmission(t *testing.T) {
	s := newTestServer()
	client := s.Runner.Client
	raw := `{"executors":[{"metadata":{"name":"task-3-ex-00"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"ubuntu"}]}}}}]}`
	if _, err := client.CoreV1().ConfigMaps("tesk").Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "task-3", Namespace: "tesk"},
		BinaryData: map[string][]byte{"JSON_INPUT.gz": gzipped(t, raw)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec := post(t, s, "task.cancelled", `{"task":"task-3"}`, nil); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"ended":"CANCELED"`) {
		t.Errorf("task.cancelled: %d %s, want 200 and the task CANCELED", rec.Code, rec.Body)
	}
	if rec := post(t, s, "task.submitted", `{"task":"task-3"}`, nil); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"state":"CANCELED"`) {
		t.Errorf("task.submitted after the cancel: %d %s, want 200 CANCELED", rec.Code, rec.Body)
	}
	if jobs, _ := client.BatchV1().Jobs("tesk").List(context.Background(), metav1.ListOptions{}); len(jobs.Items) != 0 {
		t.Errorf("%d jobs created for a task cancelled before its submission", len(jobs.Items))
	}
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
