package tes

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A task that TESK's taskmaster runs (testdata/tesk-taskmaster-task.yaml:
// its objects as TESK's API and taskmaster create them), in the TES API's
// own namespace, is not this API's: GET in every view and cancel answer
// 404, the list leaves it out, and nothing is written or posted.
func TestTESKTaskmasterTaskIsNotServed(t *testing.T) {
	a := newAPITest(t)
	a.load("../testdata/tesk-taskmaster-task.yaml", func(*corev1.ConfigMap) {})
	const id = "task-7c1a9e42"
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
