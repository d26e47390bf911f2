//go:build knative

package knative

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/events"
	"github.com/elixir-cloud-aai/tesk-knative/runner"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The chart (charts/tesk-knative) installed with the Helm SDK beside
// config/knative, in namespaces of its own, with only the images, the
// issuer, the events' audience and state events set: it becomes Ready, and
// no revision of the handler or the TES API is Ready without the K_SINK
// their SinkBindings set (the first, made before, exits); its handler
// refuses an event posted to it without a token (401) and takes
// one with a token of its namespace for the audience, as the Triggers send
// (Eventing's authentication-oidc is on); its EventPolicies, which
// broker.eventPolicies' default renders where that feature is on, refuse
// the senders and types they do not name (chartSenders); it runs a TES
// task to COMPLETE, its first Job created at once (the TES API's
// task.submitted) and its next seconds after the last ended (the Triggers'
// events, not the minute's sweep); an upgrade to a new handler image and a
// TTL while the task runs leaves it to complete, its end recorded by a pod
// of the new revision; twenty more tasks run beside it, one failing and one
// cancelled; the EventPolicies hold after the upgrade; a notifier behind a
// Trigger of its own, down for its first minute, then receives each task's
// state changes, linked from QUEUED to
// the final state GET showed and holding every state GET showed, each
// final change within 5 s of GET showing it or of the notifier coming
// back, those of tasks that ended with it up a median within a second; an
// uninstall leaves none of the release's objects behind.
func TestChartOnKnative(t *testing.T) {
	ctx := context.Background()
	const platform, tasks, release = "tesk-chart", "tesk-chart-tasks", "tesk"
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "release")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/release")
	build.Dir = filepath.Join(root, "test", "helm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building test/helm/cmd/release: %v\n%s", err, out)
	}
	repo := func(ref string) string { return ref[:strings.LastIndexByte(ref, ':')] }
	tag := func(ref string) string { return ref[strings.LastIndexByte(ref, ':')+1:] }
	image := func(ref string) map[string]any { return map[string]any{"repository": repo(ref), "tag": tag(ref)} }
	// The address tasks may name for their own state changes
	// (stateEvents.notifyURLPrefixes): a recorder that is never down.
	hooks, err := StartStateRecorder(env.Node.HostIP, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hooks.Close()
	values := map[string]any{
		"namespaces": map[string]any{"platform": platform, "tasks": tasks},
		"images": map[string]any{
			"handler": image(HandlerImage), "tes": image(TESImage), "filer": image(FilerImage),
			"eventDisplay": image(EventDisplayImage),
		},
		"auth":        map[string]any{"mode": "oidc", "oidc": map[string]any{"issuer": env.Issuer.URL, "audience": Audience}},
		"handler":     map[string]any{"eventsAudience": "tesk-chart-handler"},
		"stateEvents": map[string]any{"enabled": true, "notifyURLPrefixes": []any{hooks.URL + "tasks"}},
		// The in-memory channel answers the handler at once, so that the
		// notifier's minute down holds up none of its state changes.
		"broker": map[string]any{"asyncDelivery": true},
	}
	helm := func(verb string, vals map[string]any) string {
		t.Helper()
		vf, mf := filepath.Join(dir, "values.json"), filepath.Join(dir, "manifest.yaml")
		b, _ := json.Marshal(vals)
		if err := os.WriteFile(vf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, "-kubeconfig", env.C.Kubeconfig, "-namespace", platform, "-name", release, "-values", vf, "-manifest", mf, verb)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %s: %v\n%s", verb, err, out.String())
		}
		if verb == "uninstall" {
			return ""
		}
		m, err := os.ReadFile(mf)
		if err != nil {
			t.Fatal(err)
		}
		return string(m)
	}

	t0 := time.Now()
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			exec.Command(bin, "-kubeconfig", env.C.Kubeconfig, "-namespace", platform, "-name", release, "uninstall").Run()
		}
		for _, ns := range []string{tasks, platform} {
			env.C.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	helm("install", values)
	chart := env.In(platform, tasks)
	if err := chart.StoreAccess(ctx); err != nil {
		t.Fatal(err)
	}
	if err := chart.WaitReady(ctx, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("chart installed and Ready in %s", time.Since(t0).Round(time.Millisecond))
	// The first revision of each Service with a SinkBinding is made before
	// the binding could set K_SINK, and the next before it could mount the
	// OIDC token the Broker asks for (/oidc); both exit (SINK_REQUIRED,
	// STATE_EVENTS_REQUIRED, SINK_TOKEN_REQUIRED), so that none posting no
	// events, or events the Broker refuses, ever takes a request.
	for _, svc := range []string{"tesk-handler", "tesk-tes"} {
		unbound, tokenless, err := readyWithout(ctx, chart, svc, "K_SINK", "/oidc")
		if err != nil {
			t.Fatal(err)
		}
		if len(unbound) > 0 {
			t.Errorf("%s: revisions %v are Ready without K_SINK: the requests they take post no events", svc, unbound)
		}
		if len(tokenless) > 0 {
			t.Errorf("%s: revisions %v are Ready without the sink's token mounted at /oidc: the Broker refuses the events they post", svc, tokenless)
		}
	}

	handlerURL, err := chart.URL(ctx, ServiceGVR.Resource, "tesk-handler")
	if err != nil {
		t.Fatal(err)
	}
	insider, err := chart.TokenFor(ctx, platform, "tesk-tes", "tesk-chart-handler")
	if err != nil {
		t.Fatal(err)
	}
	// A ServiceAccount of another namespace (the tasks') holding a token
	// for the handler's audience is refused as one without a token, at /
	// and at /notify (served: the release allows tasks' addresses).
	outsider, err := chart.TokenFor(ctx, chart.Namespaces.Tasks, "default", "tesk-chart-handler")
	if err != nil {
		t.Fatal(err)
	}
	state := []byte(`{"id":"task-forged0000","state":"COMPLETE"}`)
	for _, c := range []struct {
		who, token, path, typ string
		want                  int
	}{
		{"no token", "", "/", "dev.knative.sources.ping", http.StatusUnauthorized},
		{"no token", "", "/notify", events.TypeTaskStateChanged, http.StatusUnauthorized},
		{"another namespace's ServiceAccount", outsider, "/", "dev.knative.sources.ping", http.StatusUnauthorized},
		{"another namespace's ServiceAccount", outsider, "/notify", events.TypeTaskStateChanged, http.StatusUnauthorized},
		{"a ServiceAccount of the platform's namespace", insider, "/", "dev.knative.sources.ping", http.StatusOK},
	} {
		ev := BrokerEvent{ID: fmt.Sprintf("direct-%d", time.Now().UnixNano()), Type: c.typ, Source: "test/knative", Data: []byte(`{}`)}
		if c.path == "/notify" {
			ev.Subject, ev.Data = "task-forged0000", state
		}
		code, err := chart.PostTo(ctx, strings.TrimRight(handlerURL, "/")+c.path, c.token, ev)
		if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("%s posting %s to the handler's %s: %d, want %d", c.who, c.typ, c.path, code, c.want)
		}
	}

	chartSenders(ctx, t, chart)

	// A notifier behind a Trigger of its own, down for its first minute.
	recorder, err := StartStateRecorder(env.Node.HostIP, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer recorder.Close()
	if err := chart.SubscribeStates(ctx, "test-task-states", recorder); err != nil {
		t.Fatal(err)
	}

	api, err := chart.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	task := TwoStepTask("through-the-chart", "chart/result.txt")
	// The second executor waits, so that the upgrade comes, and its
	// revision is Ready, while it runs.
	task.Executors[1].Command = []string{"sh", "-c", "sleep 45; cat /data/out/result.txt"}
	id, err := api.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	// Twenty more, one failing and one cancelled, followed through GET.
	fleet := startFleet(ctx, t, api, 20)
	// One that names an address of its own for its state changes, and one
	// that names an address the operator does not allow.
	hook := hooks.URL + "tasks/notified"
	notified, err := api.Create(ctx, &tesv1.Task{Name: "notified", Tags: map[string]string{taskmeta.TagNotifyURL: hook},
		Executors: []tesv1.Executor{{Image: "ubuntu:24.04", Command: []string{"sh", "-c", "sleep 2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Create(ctx, &tesv1.Task{Name: "not-allowed", Tags: map[string]string{taskmeta.TagNotifyURL: hooks.URL + "admin"},
		Executors: []tesv1.Executor{{Image: "ubuntu:24.04", Command: []string{"true"}}}}); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "tags.tesk.notify_url") {
		t.Errorf("a task naming an address not allowed: %v, want 400 naming the tag", err)
	}
	if err := waitJob(ctx, tasks, id+"-ex-01", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	ex0, err0 := env.C.Client.BatchV1().Jobs(tasks).Get(ctx, id+"-ex-00", metav1.GetOptions{})
	ex1, err1 := env.C.Client.BatchV1().Jobs(tasks).Get(ctx, id+"-ex-01", metav1.GetOptions{})
	if err0 != nil || err1 != nil || ex0.Status.CompletionTime == nil {
		t.Fatalf("the task's Jobs: %v, %v", err0, err1)
	}
	// The sweep adopts a task that got no task.submitted 30 s after its
	// creation: a first Job sooner is the TES API's event, let through by
	// its EventPolicy.
	anchor, err := env.C.Client.CoreV1().ConfigMaps(tasks).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := firstJob(ctx, tasks, id)
	if err != nil {
		t.Fatal(err)
	}
	if gap := first.CreationTimestamp.Sub(anchor.CreationTimestamp.Time); gap >= 30*time.Second {
		t.Errorf("the task's first Job (%s) created %s after the task: its task.submitted was not taken (the sweep adopted it)", first.Name, gap)
	}
	if gap := ex1.CreationTimestamp.Sub(ex0.Status.CompletionTime.Time); gap > 15*time.Second {
		t.Errorf("ex-01 created %s after ex-00 completed: the Triggers' events were not taken (the minute's sweep took the step)", gap)
	}
	values["images"].(map[string]any)["handler"] = image(HandlerImageNext)
	values["tasks"] = map[string]any{"ttlSeconds": 3600}
	upgraded := helm("upgrade", values)
	if !strings.Contains(upgraded, "image: "+HandlerImageNext) || !strings.Contains(upgraded, `TASK_TTL_SECONDS: "3600"`) {
		t.Fatalf("the upgraded release does not hold the new image and TTL")
	}
	rev, err := waitRevisionOf(ctx, chart, "tesk-handler", HandlerImageNext, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The upgrade reads config-features again (broker.eventPolicies: auto)
	// and keeps the EventPolicies, which still refuse the senders and
	// types they do not name.
	if !strings.Contains(upgraded, "kind: EventPolicy") {
		t.Errorf("the upgraded release renders no EventPolicy")
	}
	chartSenders(ctx, t, chart)
	if ex1, err := env.C.Client.BatchV1().Jobs(tasks).Get(ctx, id+"-ex-01", metav1.GetOptions{}); err != nil || taskmeta.StatusOf(ex1) != taskmeta.JobRunning {
		t.Fatalf("the upgrade's revision %s was Ready only after the running executor ended (%v): which revision took the next step cannot be told", rev.GetName(), err)
	}
	mainShown := []string{"QUEUED"}
	got, err := api.Wait(ctx, id, 5*time.Minute, func(state string) {
		if state != mainShown[len(mainShown)-1] {
			mainShown = append(mainShown, state)
		}
	})
	mainEnded := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "COMPLETE" {
		t.Fatalf("task through the chart ended %s across the upgrade: %+v", got.State, got.Logs)
	}
	if out, err := env.Store.Get(ctx, Bucket, "chart/result.txt"); err != nil || out != "HELLO FROM TES ON KNATIVE\n" {
		t.Errorf("output in S3: %q, %v", out, err)
	}
	// The step that ended the task ran on the upgrade's revision: its
	// Kubernetes Event names the pod that recorded it.
	ended, err := waitEndedEvent(ctx, tasks, id, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ended.ReportingInstance, rev.GetName()+"-") {
		t.Errorf("the task's end was recorded by %q, not by a pod of the upgrade's revision %s", ended.ReportingInstance, rev.GetName())
	}
	t.Logf("the task's end recorded by %s (revision %s)", ended.ReportingInstance, rev.GetName())

	// Every state each task passed through reached the notifier through the
	// Broker and its Trigger, the handler's events let in by its
	// EventPolicy, after the notifier's minute down: the changes link from
	// QUEUED to the final state GET showed, and hold every state GET showed.
	followed, err := fleet()
	if err != nil {
		t.Fatal(err)
	}
	followed = append(followed, &fleetTask{id: id, shown: mainShown, finalAt: mainEnded})
	statesBy := time.Now().Add(4 * time.Minute)
	for {
		refused, got := recorder.Seen()
		var missing []error
		for _, f := range followed {
			if _, _, err := StateChain(got, f.id, f.shown); err != nil {
				missing = append(missing, err)
			}
		}
		if refused > 0 && len(missing) == 0 {
			break
		}
		if time.Now().After(statesBy) {
			t.Fatalf("the notifier refused %d deliveries; of %d tasks, %d lack changes: %v (Eventing's restarts: %s)", refused, len(followed), len(missing), missing, env.Restarts(ctx, "knative-eventing"))
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	checkNotified(ctx, t, api, hooks, notified, hook)
	refused, seen := recorder.Seen()
	// Every subscriber of the Broker gets the changes of the task that
	// names an address marked, and the others' unmarked; none gets the
	// address, which may hold a token.
	for _, r := range seen {
		if r.Marked() != (r.ID == notified) || r.Carries(hooks.URL) {
			t.Errorf("the operator's Trigger got task %s's change %s>%s with the extensions %v: want it marked only for task %s, and without the address", r.ID, r.OldState, r.NewState, r.Extensions, notified)
		}
	}
	// The Trigger's retries reach the notifier some time after it is back
	// (its backoff: linear from 0.1 s, so seconds apart a minute on);
	// from then on, a change comes as it is made.
	resumed := seen[0].At
	for _, r := range seen {
		if r.At.Before(resumed) {
			resumed = r.At
		}
	}
	back := recorder.Up()
	// lateness is each final change's delay after GET showed it or the
	// notifier came back; live, that of the tasks that ended with the
	// notifier up (the handler's publication and the Broker's delivery
	// alone, no retry).
	var lateness, live []time.Duration
	for _, f := range followed {
		chain, at, _ := StateChain(seen, f.id, f.shown)
		for _, r := range seen {
			if r.ID == f.id && (r.Namespace != tasks || r.Owner != "alice") {
				t.Errorf("state change %+v: want namespace %s, owner alice", r.StateChangedData, tasks)
			}
		}
		d := at.Sub(f.finalAt)
		if f.finalAt.Before(back) {
			d = at.Sub(back)
		} else {
			live = append(live, d)
		}
		lateness = append(lateness, d)
		// The handler's publication is answered at once (the channel's
		// asynchronous delivery, broker.asyncDelivery: true), so no change
		// waits for the sweep: each comes with the Trigger's next retry.
		if d > 5*time.Second {
			t.Errorf("task %s: its final change reached the notifier %s after GET showed it (or the notifier came back), want 5 s or less", f.id, d.Round(time.Millisecond))
		}
		t.Logf("task %s: GET showed %v; the notifier took %v, the final change %s after GET (or the notifier came back)", f.id, f.shown, chain, d.Round(time.Millisecond))
	}
	slices.Sort(lateness)
	slices.Sort(live)
	if len(live) > 0 && live[len(live)/2] > time.Second {
		t.Errorf("the final changes of the tasks that ended with the notifier up reached it a median %s after GET showed them, want a second or less", live[len(live)/2].Round(time.Millisecond))
	}
	t.Logf("the notifier refused %d deliveries in its minute down; the deliveries resumed %s after it came back; the final changes reached it at most %s after GET showed them or the notifier came back (median %s, %d tasks; of the %d that ended with it up, median %s)",
		refused, resumed.Sub(back).Round(time.Millisecond), lateness[len(lateness)-1].Round(time.Millisecond), lateness[len(lateness)/2].Round(time.Millisecond), len(lateness),
		len(live), medianOf(live).Round(time.Millisecond))
	if err := env.C.Dynamic.Resource(TriggerGVR).Namespace(platform).Delete(ctx, "test-task-states", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	objs, err := manifestObjects(upgraded)
	if err != nil {
		t.Fatal(err)
	}
	helm("uninstall", nil)
	uninstalled = true
	deadline := time.Now().Add(4 * time.Minute) // the namespaces' objects go first
	for {
		var left []string
		for _, o := range objs {
			if _, err := o.get(ctx); !apierrors.IsNotFound(err) {
				left = append(left, o.String())
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("4m after helm uninstall, %d of the release's %d objects are left: %v", len(left), len(objs), left)
		}
		if err := sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("uninstall removed all %d objects of the release", len(objs))
}

// waitJob waits until the task's Job name exists in namespace ns.
// chartSenders checks the chart's EventPolicies (broker.eventPolicies) on
// the Broker's ingress: a ServiceAccount of the platform's namespace that
// is none of the release's senders is refused (403), where Eventing's
// default mode would take it; the TES API's identity may post the types it
// sends and no other.
func chartSenders(ctx context.Context, t *testing.T, chart *Env) {
	t.Helper()
	stranger, err := chart.BrokerTokenOf(ctx, "tesk-tes")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := chart.SinkBindingIdentity(ctx, "tesk-tes")
	if err != nil {
		t.Fatal(err)
	}
	tesToken, err := chart.BrokerTokenOf(ctx, sa)
	if err != nil {
		t.Fatal(err)
	}
	ping := []byte(`{}`)
	job := []byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"x-ex-00","namespace":"tesk-chart-tasks","labels":{"taskmaster-name":"x"}},"status":{"failed":1}}`)
	cancel := []byte(`{"task":"task-none00000","namespace":"tesk-chart-tasks"}`)
	for _, c := range []struct {
		who, token, typ string
		data            []byte
		want            int
	}{
		{"a ServiceAccount of the namespace that sends nothing", stranger, "dev.knative.sources.ping", ping, http.StatusForbidden},
		{"the TES API's identity", tesToken, "dev.knative.apiserver.resource.update", job, http.StatusForbidden},
		{"the TES API's identity", tesToken, "dev.knative.sources.ping", ping, http.StatusForbidden},
		{"the TES API's identity", tesToken, "task.cancelled", cancel, http.StatusAccepted},
	} {
		ev := BrokerEvent{ID: fmt.Sprintf("senders-%d", time.Now().UnixNano()), Type: c.typ, Source: "test/knative", Data: c.data}
		code, err := chart.PostToBroker(ctx, c.token, ev)
		if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("%s posting %s to the Broker: %d, want %d", c.who, c.typ, code, c.want)
		}
		t.Logf("%s posting %s to the Broker: %d", c.who, c.typ, code)
	}
}

// waitRevisionOf waits until a Knative Service's latest ready revision runs
// image, and returns it.
func waitRevisionOf(ctx context.Context, e *Env, service, image string, timeout time.Duration) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(timeout)
	for {
		rev, err := e.LatestReadyRevision(ctx, service)
		if err == nil {
			if cs, _, _ := unstructured.NestedSlice(rev.Object, "spec", "containers"); len(cs) > 0 && cs[0].(map[string]any)["image"] == image {
				return rev, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: no ready revision runs %s after %s (%v)", service, image, timeout, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// readyWithout lists the Ready revisions of a Knative Service of e's
// platform namespace whose first container has no variable name, and those
// that mount nothing at mountPath.
func readyWithout(ctx context.Context, e *Env, service, name, mountPath string) (noVar, noMount []string, err error) {
	list, err := e.C.Dynamic.Resource(RevisionGVR).Namespace(e.Namespaces.Platform).List(ctx, metav1.ListOptions{LabelSelector: "serving.knative.dev/service=" + service})
	if err != nil {
		return nil, nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil, fmt.Errorf("%s has no revision", service)
	}
	for _, rev := range list.Items {
		if ok, _ := ready(&rev); !ok {
			continue
		}
		var vars, mounts []any
		if cs, _, _ := unstructured.NestedSlice(rev.Object, "spec", "containers"); len(cs) > 0 {
			vars, _, _ = unstructured.NestedSlice(cs[0].(map[string]any), "env")
			mounts, _, _ = unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
		}
		if !slices.ContainsFunc(vars, func(v any) bool { return v.(map[string]any)["name"] == name }) {
			noVar = append(noVar, rev.GetName())
		}
		if !slices.ContainsFunc(mounts, func(m any) bool { return m.(map[string]any)["mountPath"] == mountPath }) {
			noMount = append(noMount, rev.GetName())
		}
	}
	return noVar, noMount, nil
}

// firstJob is the task's Job created first.
func firstJob(ctx context.Context, ns, task string) (*batchv1.Job, error) {
	list, err := env.C.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "taskmaster-name=" + task})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("task %s has no Job", task)
	}
	first := &list.Items[0]
	for i := range list.Items {
		if list.Items[i].CreationTimestamp.Before(&first.CreationTimestamp) {
			first = &list.Items[i]
		}
	}
	return first, nil
}

// fleetTask is a task followed through GET: the states GET showed, in
// order, and when it first showed the final one.
type fleetTask struct {
	id      string
	shown   []string
	finalAt time.Time
}

// startFleet creates n one-executor tasks through api, the first failing
// (exit 3), the second cancelled once RUNNING, the rest sleeping 5 s, and
// follows them through GET each half second; the function it returns waits
// until each is final (6 minutes at most).
func startFleet(ctx context.Context, t *testing.T, api *TES, n int) func() ([]*fleetTask, error) {
	t.Helper()
	res := &tesv1.Resources{RAMGB: 0.05, DiskGB: 0.1} // no CPU asked: the 2-core node runs them side by side
	var fleet []*fleetTask
	for i := range n {
		script := "sleep 5"
		switch i {
		case 0:
			script = "echo failing >&2; exit 3"
		case 1:
			script = "sleep 300"
		}
		id, err := api.Create(ctx, &tesv1.Task{Name: fmt.Sprintf("fleet-%02d", i), Resources: res,
			Executors: []tesv1.Executor{{Image: "ubuntu:24.04", Command: []string{"sh", "-c", script}}}})
		if err != nil {
			t.Fatal(err)
		}
		fleet = append(fleet, &fleetTask{id: id, shown: []string{"QUEUED"}})
	}
	done := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(6 * time.Minute)
		cancelled := false
		for {
			open := 0
			for i, f := range fleet {
				last := f.shown[len(f.shown)-1]
				if tesv1.IsFinal(last) {
					continue
				}
				open++
				v, err := api.Get(ctx, f.id, "MINIMAL")
				if err != nil {
					continue
				}
				if v.State != last {
					f.shown = append(f.shown, v.State)
					if tesv1.IsFinal(v.State) {
						f.finalAt = time.Now()
					}
				}
				if i == 1 && v.State == "RUNNING" && !cancelled {
					if err := api.Cancel(ctx, f.id); err != nil {
						done <- err
						return
					}
					cancelled = true
				}
			}
			if open == 0 {
				done <- nil
				return
			}
			if time.Now().After(deadline) {
				done <- fmt.Errorf("%d of the fleet's tasks not final after 6 minutes", open)
				return
			}
			if err := sleep(ctx, 500*time.Millisecond); err != nil {
				done <- err
				return
			}
		}
	}()
	return func() ([]*fleetTask, error) {
		if err := <-done; err != nil {
			return nil, err
		}
		want := map[int]string{0: "EXECUTOR_ERROR", 1: "CANCELED"}
		for i, f := range fleet {
			w, ok := want[i]
			if !ok {
				w = "COMPLETE"
			}
			if got := f.shown[len(f.shown)-1]; got != w {
				return nil, fmt.Errorf("fleet task %d (%s) ended %s, want %s", i, f.id, got, w)
			}
		}
		return fleet, nil
	}
}

// waitEndedEvent waits for the Kubernetes Event of a task's end on its
// anchor.
func waitEndedEvent(ctx context.Context, ns, task string, timeout time.Duration) (*eventsv1.Event, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := env.C.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for i, ev := range list.Items {
				if ev.Regarding.Name == task && ev.Reason == runner.ReasonEnded {
					return &list.Items[i], nil
				}
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no Event %s on task %s after %s (%v)", runner.ReasonEnded, task, timeout, err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

func waitJob(ctx context.Context, ns, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := env.C.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s/%s not there after %s: %v", ns, name, timeout, err)
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// manifestObject is one object of a release's manifest.
type manifestObject struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	kind      string
}

func (o manifestObject) String() string { return o.kind + " " + o.namespace + "/" + o.name }

func (o manifestObject) get(ctx context.Context) (*unstructured.Unstructured, error) {
	r := env.C.Dynamic.Resource(o.gvr)
	if o.namespace != "" {
		return r.Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
	}
	return r.Get(ctx, o.name, metav1.GetOptions{})
}

// manifestObjects reads a release's manifest into the objects it names,
// their resources found through the API server's discovery.
func manifestObjects(manifest string) ([]manifestObject, error) {
	groups, err := restmapper.GetAPIGroupResources(env.C.Client.Discovery())
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	var out []manifestObject
	for _, doc := range strings.Split(manifest, "\n---") {
		var u unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if u.Object == nil || u.GetKind() == "" {
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
		}
		ns := u.GetNamespace()
		if m.Scope.Name() == meta.RESTScopeNameRoot {
			ns = ""
		}
		out = append(out, manifestObject{gvr: m.Resource, namespace: ns, name: u.GetName(), kind: u.GetKind()})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the release's manifest names no object")
	}
	return out, nil
}

// checkNotified: the task that named hook for its state changes ends
// COMPLETE, and each of its changes, QUEUED to COMPLETE, reached hook
// (through the Trigger tesk-state-notify and the handler's /notify, which
// read hook from the task's anchor), as it came, without the mark that
// routed it and without the address; hooks took nothing else.
func checkNotified(ctx context.Context, t *testing.T, api *TES, hooks *StateRecorder, id, hook string) {
	t.Helper()
	shown := []string{"QUEUED"}
	v, err := api.Wait(ctx, id, 3*time.Minute, func(state string) {
		if state != shown[len(shown)-1] {
			shown = append(shown, state)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.State != "COMPLETE" {
		t.Fatalf("the task that names its address ended %s", v.State)
	}
	path := strings.TrimPrefix(hook, strings.TrimSuffix(hooks.URL, "/"))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, got := hooks.Seen()
		chain, _, err := StateChain(got, id, shown)
		if err == nil {
			for _, r := range got {
				if r.ID != id || r.Path != path || r.Marked() || r.Carries(hook) || r.Owner != "alice" {
					t.Errorf("the task's address took %+v at %s (extensions %v): want only task %s's changes at %s, without the mark or the address", r.StateChangedData, r.Path, r.Extensions, id, path)
				}
			}
			t.Logf("task %s: GET showed %v; its address %s took %v", id, shown, path, chain)
			return
		}
		if time.Now().After(deadline) {
			var took []string
			for _, r := range got {
				took = append(took, fmt.Sprintf("%s %s>%s at %s", r.ID, r.OldState, r.NewState, r.Path))
			}
			t.Fatalf("the task's address took %d changes (%s): %v", len(got), strings.Join(took, "; "), err)
		}
		if err := sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// medianOf is the median of sorted durations, 0 for none.
func medianOf(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}
