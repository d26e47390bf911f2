package tes

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// A task that TESK's taskmaster runs (testdata/tesk-taskmaster-task.yaml:
// its objects as TESK's API and taskmaster create them), in the TES API's
// own namespace, is not this API's: GET in every view and cancel answer
// 404, the list leaves it out, and nothing is written or posted.
func TestTESKTaskmasterTaskIsNotServed(t *testing.T) {
	a := newAPITest(t)
	b, err := os.ReadFile("../testdata/tesk-taskmaster-task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.List
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const id = "task-7c1a9e42"
	for _, item := range list.Items {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(item.Raw, &tm); err != nil {
			t.Fatal(err)
		}
		var err error
		switch tm.Kind {
		case "ConfigMap":
			var o corev1.ConfigMap
			if err = json.Unmarshal(item.Raw, &o); err == nil {
				o.Namespace = "tes"
				_, err = a.client.CoreV1().ConfigMaps("tes").Create(ctx, &o, metav1.CreateOptions{})
			}
		case "Job":
			var o batchv1.Job
			if err = json.Unmarshal(item.Raw, &o); err == nil {
				o.Namespace = "tes"
				_, err = a.client.BatchV1().Jobs("tes").Create(ctx, &o, metav1.CreateOptions{})
			}
		case "Pod":
			var o corev1.Pod
			if err = json.Unmarshal(item.Raw, &o); err == nil {
				o.Namespace = "tes"
				_, err = a.client.CoreV1().Pods("tes").Create(ctx, &o, metav1.CreateOptions{})
			}
		case "PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			if err = json.Unmarshal(item.Raw, &o); err == nil {
				o.Namespace = "tes"
				_, err = a.client.CoreV1().PersistentVolumeClaims("tes").Create(ctx, &o, metav1.CreateOptions{})
			}
		default:
			t.Fatalf("testdata: unexpected kind %q", tm.Kind)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	a.withMetadata()
	writes := len(a.client.Actions())
	for _, path := range []string{"/tasks/" + id, "/tasks/" + id + "?view=BASIC", "/tasks/" + id + "?view=FULL"} {
		if code, body := a.do(http.MethodGet, path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: %d %v, want 404", path, code, body)
		}
	}
	if code, body := a.do(http.MethodPost, "/tasks/"+id+":cancel", ""); code != http.StatusNotFound {
		t.Errorf("cancel: %d %v, want 404", code, body)
	}
	for _, view := range []string{"MINIMAL", "BASIC", "FULL"} {
		code, body := a.do(http.MethodGet, "/tasks?view="+view, "")
		if tasks, _ := body["tasks"].([]any); code != http.StatusOK || len(tasks) != 0 {
			t.Errorf("list %s: %d %v, want no task", view, code, body)
		}
	}
	for _, act := range a.client.Actions()[writes:] {
		if v := act.GetVerb(); v != "get" && v != "list" {
			t.Errorf("wrote: %s %s", v, act.GetResource().Resource)
		}
	}
	if n := len(a.sink.got()); n != 0 {
		t.Errorf("%d events posted", n)
	}
}
