//go:build knative

package knative

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Events are hints, on the platform as shipped. With Eventing's
// authentication-oidc on, the Broker refuses an event without a token for
// it (401): anyone who reaches its ingress (the test posts from outside
// the cluster, as a pod of another namespace could: it reaches the ingress,
// TestTasksCannotReachTheControlPath shows) is turned away, and
// config/knative's EventPolicies refuse the TES API's identity any type
// but the two it sends (403). An insider that holds a token the handler
// takes (a ServiceAccount of the platform's namespace, for the handler's
// audience, as a Trigger holds) then posts forged events about a running
// task straight to the handler, which answers each (so each was received
// and handled): its executor's Job said Failed and then Complete by
// ApiServerSource-shaped updates, its pod said taken away by the cluster, a
// task.cancelled, a job.finished and a pod.stuck naming it, and a
// task.submitted naming a ConfigMap of the tasks' namespace that is not a
// task. The task still ends COMPLETE through its real events, each of its
// Jobs created once, nothing counted on its job, and the other ConfigMap
// unchanged.
func TestForgedEventsChangeNothing(t *testing.T) {
	ctx := context.Background()
	api, err := env.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-a-task", Namespace: Tasks, Labels: map[string]string{"app": "other"}},
		Data: map[string]string{"JSON_INPUT": `{"executors":[]}`}}
	if _, err := env.C.Client.CoreV1().ConfigMaps(Tasks).Create(ctx, bystander, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.C.Client.CoreV1().ConfigMaps(Tasks).Delete(context.Background(), bystander.Name, metav1.DeleteOptions{})
	})

	jobs := watchJobs(ctx, t)
	defer jobs.stop()
	id, err := api.Create(ctx, RepeatTask("victim", 2, "sleep", "20"))
	if err != nil {
		t.Fatal(err)
	}
	jobs.of(id)
	if _, err := waitState(ctx, api, id, "RUNNING", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	token, err := env.BrokerToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	handler, audience, err := handlerAddress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insider, err := env.TokenFor(ctx, Platform, "tesk-tes", audience)
	if err != nil {
		t.Fatal(err)
	}
	ex := taskmeta.ObjectName(id, "ex-00")
	job := func(conds ...batchv1.JobConditionType) map[string]any {
		j := batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: ex, Namespace: Tasks, Labels: map[string]string{taskmeta.LabelTask: id}}}
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: "Forged"})
		}
		j.Status.Succeeded = 1
		return object(t, j)
	}
	pod := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ex + "-forged", Namespace: Tasks, Labels: map[string]string{taskmeta.LabelTask: id, batchv1.JobNameLabel: ex}},
		Status:     corev1.PodStatus{Phase: corev1.PodFailed, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}}}
	const update = "dev.knative.apiserver.resource.update"
	forged := []struct {
		typ, subject string
		data         any
	}{
		{update, "/apis/batch/v1/namespaces/" + Tasks + "/jobs/" + ex, job(batchv1.JobFailureTarget, batchv1.JobFailed)},
		{update, "/apis/batch/v1/namespaces/" + Tasks + "/jobs/" + ex, job(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)},
		{update, "/api/v1/namespaces/" + Tasks + "/pods/" + pod.Name, object(t, pod)},
		{"task.cancelled", "", map[string]any{"task": id, "namespace": Tasks}},
		{"job.finished", "", map[string]any{"task": id, "job": ex, "namespace": Tasks}},
		{"pod.stuck", "", map[string]any{"task": id, "job": ex, "pod": pod.Name, "reason": "ErrImagePull", "namespace": Tasks}},
		{"task.submitted", "", map[string]any{"task": bystander.Name, "namespace": Tasks}},
	}
	for i, f := range forged {
		body, err := json.Marshal(f.data)
		if err != nil {
			t.Fatal(err)
		}
		ev := BrokerEvent{ID: fmt.Sprintf("forged-%d-%d", time.Now().UnixNano(), i), Type: f.typ, Source: "https://kubernetes.default.svc", Subject: f.subject, Data: body}
		if i == 0 {
			code, err := env.PostToBroker(ctx, "", ev)
			if err != nil {
				t.Fatal(err)
			}
			if code != http.StatusUnauthorized {
				t.Fatalf("forged %s without a token: the Broker answered %d, want 401", f.typ, code)
			}
		}
		// The Broker takes from the TES API's identity only the types it
		// sends.
		want := http.StatusForbidden
		if f.typ == "task.cancelled" || f.typ == "task.submitted" {
			want = http.StatusAccepted
		}
		code, err := env.PostToBroker(ctx, token, ev)
		if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("forged %s with the TES API's token: the Broker answered %d, want %d", f.typ, code, want)
		}
		// Straight to the handler, with a token it takes: its answer says
		// it received and handled the event (400: one it can never act on).
		ev.ID += "-direct"
		code, err = env.PostTo(ctx, handler, insider, ev)
		if err != nil {
			t.Fatal(err)
		}
		if code != http.StatusOK && code != http.StatusAccepted && code != http.StatusNoContent && code != http.StatusBadRequest {
			t.Fatalf("forged %s posted to the handler with an insider's token: %d, want it handled (2xx or 400)", f.typ, code)
		}
		t.Logf("forged %s: the Broker %d, the handler %d", f.typ, want, code)
	}

	task, err := api.Wait(ctx, id, 4*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != "COMPLETE" {
		t.Fatalf("task %s after the forged events: %s (system logs %v), want COMPLETE", id, task.State, task.Logs)
	}
	for name, n := range jobs.counts() {
		if n != 1 {
			t.Errorf("job %s created %d times", name, n)
		}
	}
	if got := jobs.counts(); len(got) != 2 {
		t.Errorf("jobs of the task %v, want its two executors' once each", got)
	}
	j, err := env.C.Client.BatchV1().Jobs(Tasks).Get(ctx, ex, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := taskmeta.PreemptedPods(j); len(got) != 0 {
		t.Errorf("the forged pod was counted as taken away: %v", got)
	}
	cm, err := env.C.Client.CoreV1().ConfigMaps(Tasks).Get(ctx, bystander.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(cm.Labels, bystander.Labels) || len(cm.Annotations) != 0 || !maps.Equal(cm.Data, bystander.Data) {
		t.Errorf("the ConfigMap a forged task.submitted named was changed: labels %v, annotations %v", cm.Labels, cm.Annotations)
	}
}

// object is a Kubernetes object as JSON, as an ApiServerSource carries it.
func object(t *testing.T, o any) map[string]any {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// handlerAddress is the address of config/knative's handler and the
// audience its events' tokens must be for (EVENTS_AUDIENCE of its
// ConfigMap, as deployed).
func handlerAddress(ctx context.Context) (url, audience string, err error) {
	cm, err := env.C.Client.CoreV1().ConfigMaps(Platform).Get(ctx, "tesk-handler-config", metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	if audience = cm.Data["EVENTS_AUDIENCE"]; audience == "" {
		return "", "", fmt.Errorf("config/knative sets no EVENTS_AUDIENCE: the handler takes events from anyone")
	}
	url, err = env.URL(ctx, ServiceGVR.Resource, "tesk-handler")
	return url, audience, err
}

// The handler's own address, as config/knative ships it, takes events only
// from the platform's own identities: at / (the steps) and at /notify (the
// tasks' own addresses), an event without a token, with a token of a
// ServiceAccount of another namespace (the tasks', as a task's pod could
// hold) for the handler's audience, or with a platform identity's token
// for another audience is refused with 401, before anything is read or
// posted; a platform identity's token for its audience is taken. The
// posts come from outside the cluster through the ingress, as a pod of
// another namespace reaches it (TestTasksCannotReachTheControlPath).
func TestHandlerTakesEventsOnlyFromItsSenders(t *testing.T) {
	ctx := context.Background()
	handler, audience, err := handlerAddress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.C.Client.CoreV1().ServiceAccounts(Tasks).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	outsider, err := env.TokenFor(ctx, Tasks, "default", audience)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := env.TokenFor(ctx, Platform, "tesk-tes", "another-audience")
	if err != nil {
		t.Fatal(err)
	}
	insider, err := env.TokenFor(ctx, Platform, "tesk-tes", audience)
	if err != nil {
		t.Fatal(err)
	}
	// /notify is served only where the operator allows tasks' addresses
	// (NOTIFY_URL_PREFIXES; config/knative allows none): elsewhere it is
	// no route at all.
	cm, err := env.C.Client.CoreV1().ConfigMaps(Platform).Get(ctx, "tesk-handler-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refusedAtNotify := http.StatusUnauthorized
	if strings.TrimSpace(cm.Data["NOTIFY_URL_PREFIXES"]) == "" {
		refusedAtNotify = http.StatusNotFound
	}
	ping := BrokerEvent{Type: "dev.knative.sources.ping", Source: "test/knative", Data: []byte(`{}`)}
	state := BrokerEvent{Type: events.TypeTaskStateChanged, Source: "test/knative", Subject: "task-forged0000",
		Data: []byte(`{"id":"task-forged0000","state":"COMPLETE"}`)}
	cases := []struct {
		who, token, path string
		ev               BrokerEvent
		want             int
	}{
		{"no token", "", "/", ping, http.StatusUnauthorized},
		{"no token", "", "/notify", state, refusedAtNotify},
		{"the tasks' namespace's ServiceAccount", outsider, "/", ping, http.StatusUnauthorized},
		{"the tasks' namespace's ServiceAccount", outsider, "/notify", state, refusedAtNotify},
		{"a platform identity, another audience", elsewhere, "/", ping, http.StatusUnauthorized},
		{"a platform identity, another audience", elsewhere, "/notify", state, refusedAtNotify},
		{"a platform identity, the handler's audience", insider, "/", ping, http.StatusOK},
	}
	for i, c := range cases {
		c.ev.ID = fmt.Sprintf("senders-%d-%d", time.Now().UnixNano(), i)
		code, err := env.PostTo(ctx, strings.TrimRight(handler, "/")+c.path, c.token, c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("%s posting %s to the handler's %s: %d, want %d", c.who, c.ev.Type, c.path, code, c.want)
		}
		t.Logf("%s posting %s to the handler's %s: %d", c.who, c.ev.Type, c.path, code)
	}
}
