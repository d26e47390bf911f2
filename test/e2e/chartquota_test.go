//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// chartTasksObjects renders the chart's tasks.yaml with vals over
// values.yaml (test/helm/cmd/template, the Helm SDK) and returns the
// objects of the kinds asked for, in the order rendered.
func chartTasksObjects(t *testing.T, vals map[string]any, kinds ...string) []byte {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "template")
	build := exec.Command("go", "build", "-o", bin, "./cmd/template")
	build.Dir = filepath.Join(repoRoot(t), "test", "helm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building test/helm/cmd/template: %v\n%s", err, out)
	}
	vf := filepath.Join(dir, "values.json")
	if err := os.WriteFile(vf, mustJSON(t, vals), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-values", vf, "-show-only", "tasks.yaml").Output()
	if err != nil {
		t.Fatalf("rendering the chart's tasks.yaml: %v %s", err, stderrOf(err))
	}
	objs, err := cluster.DecodeManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for _, kind := range kinds {
		n := 0
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			picked = append(picked, string(b))
			n++
		}
		if n != 1 {
			t.Fatalf("the chart's tasks.yaml renders %d of kind %s, want one:\n%s", n, kind, out)
		}
	}
	return []byte(strings.Join(picked, "---\n"))
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestChartQuotaAndLimitRange: the chart's ResourceQuota and LimitRange of
// the tasks' namespace (tasks.resourceQuota, tasks.limitRange), rendered
// from its tasks.yaml and applied to the test's namespace: every container
// of a task that asks for nothing (its filers' and its executors') gets the
// LimitRange's default request and limit, and the task completes; one that
// asks for cores and memory keeps its own. A task whose pod the quota does
// not admit beside a running task's waits, the job's Events saying
// "exceeded quota", QUEUED meanwhile with no executor log and nothing in
// its usage, and completes once the running task ended (cancelled); one
// that asks for more than the whole quota is refused at its create, 400 naming
// the quota (docs/helm.md, docs/operations.md).
func TestChartQuotaAndLimitRange(t *testing.T) {
	e := newEnv(t, envOptions{})
	quota := map[string]any{"requests.cpu": "2", "requests.memory": "8Gi"}
	// values.yaml's example: a default request, and the most a container
	// may take (which is then also its default limit).
	limits := []any{map[string]any{"type": "Container",
		"defaultRequest": map[string]any{"cpu": "100m", "memory": "128Mi"},
		"max":            map[string]any{"cpu": "32", "memory": "256Gi"}}}
	objs := chartTasksObjects(t, map[string]any{
		"auth":       map[string]any{"mode": "none"},
		"namespaces": map[string]any{"tasks": e.ns},
		"tasks":      map[string]any{"resourceQuota": quota, "limitRange": limits},
	}, "ResourceQuota", "LimitRange")
	ctx := context.Background()
	if err := e.c.Apply(ctx, objs); err != nil {
		t.Fatalf("apply the chart's ResourceQuota and LimitRange: %v\n%s", err, objs)
	}
	// The quota admits pods once its controller counted the namespace.
	e.waitFor("the quota's status", 30*time.Second, func() bool {
		q, err := e.c.Client.CoreV1().ResourceQuotas(e.ns).Get(ctx, "tesk-tasks", metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) == len(quota)
	})
	e.slowPods("3s")
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{})

	// Asking for nothing: the LimitRange's defaults, in every container.
	nothing := demoTask("plain")
	delete(nothing, "resources")
	plain := api.create(nothing)
	api.waitState(plain, tesv1.StateComplete, 90*time.Second)
	pods := taskPods(t, e, plain)
	if len(pods) < 4 {
		t.Fatalf("%d pods, want the inputs filer, two executors and the outputs filer", len(pods))
	}
	lr, err := e.c.Client.CoreV1().LimitRanges(e.ns).Get(ctx, "tesk-tasks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, q := range lr.Spec.Limits[0].DefaultRequest {
		want["requests."+string(name)] = q.String()
	}
	for name, q := range lr.Spec.Limits[0].Default {
		want["limits."+string(name)] = q.String()
	}
	if want["requests.cpu"] != "100m" || want["limits.cpu"] != "32" {
		t.Fatalf("the LimitRange's defaults: %v, want the chart's defaultRequest and its max as the default limit", want)
	}
	for _, p := range pods {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			if got := resourcesOf(c); !equalQuantities(got, want) {
				t.Errorf("pod %s, container %s: %v, want the LimitRange's defaults %v", p.Name, c.Name, got, want)
			}
		}
	}

	// Asking for a core and a GiB: its own requests.
	asks := demoTask("asks")
	asks["executors"] = asks["executors"].([]any)[1:]
	asks["resources"] = map[string]any{"cpu_cores": 1, "ram_gb": 1}
	id := api.create(asks)
	api.waitState(id, tesv1.StateComplete, 90*time.Second)
	for _, p := range taskPods(t, e, id) {
		if p.Labels[taskmeta.LabelJobType] != taskmeta.JobTypeExecutor {
			continue
		}
		got := resourcesOf(p.Spec.Containers[0])
		if got["requests.cpu"] != "1" || got["requests.memory"] != "1Gi" {
			t.Errorf("executor pod %s: %v, want the task's 1 core and 1Gi requested", p.Name, got)
		}
	}

	// Two tasks of 2 cores under a quota of 2: the second's pod waits
	// while the first runs, and the second completes once the first ended
	// (cancelled: it runs until then).
	big := map[string]any{"name": "big", "executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}},
		"resources": map[string]any{"cpu_cores": 2}}
	forever := map[string]any{"name": "forever", "executors": []any{map[string]any{"image": "fate.tesk.test/forever", "command": []any{"sleep", "1000"}}},
		"resources": map[string]any{"cpu_cores": 2}}
	first := api.create(forever)
	api.waitState(first, tesv1.StateRunning, 60*time.Second)
	e.waitFor("the first task's executor pod", 30*time.Second, func() bool { return len(taskPods(t, e, first)) > 0 })
	second := api.create(big)
	e.waitFor(`the second task's job's Event "exceeded quota"`, 30*time.Second, func() bool {
		return jobEventSays(t, e, second+"-ex-00", "exceeded quota")
	})
	if n := len(taskPods(t, e, second)); n != 0 {
		t.Errorf("the second task has %d pods while the first holds the quota", n)
	}
	// No pod, so nothing ran: QUEUED, no executor log (no exit code, no
	// start), nothing counted.
	full := api.get(second, tesv1.ViewFull)
	if full["state"] != tesv1.StateQueued {
		t.Errorf("the second task while its pod waits for the quota: %v, want QUEUED", full["state"])
	}
	if tls, _ := full["logs"].([]any); len(tls) != 1 {
		t.Errorf("the second task's logs %v, want one task log", full["logs"])
	} else {
		tl := tls[0].(map[string]any)
		if ex, _ := tl["logs"].([]any); len(ex) != 0 {
			t.Errorf("the second task's executor logs %v, want none (no container started)", ex)
		}
		md, _ := tl["metadata"].(map[string]any)
		for _, k := range []string{"usage.cpu_core_seconds", "usage.wall_seconds", "usage.memory_gb_seconds"} {
			if md[k] != "0" {
				t.Errorf("the second task's %s %v, want 0", k, md[k])
			}
		}
		for k := range md {
			if strings.HasPrefix(k, "usage.ex-") {
				t.Errorf("the second task's metadata has %s=%v, want no executor's usage", k, md[k])
			}
		}
	}
	if code, body := api.do(http.MethodPost, "/tasks/"+first+":cancel", nil); code != http.StatusOK {
		t.Fatalf("cancel the first task: %d %s", code, body)
	}
	api.waitState(first, tesv1.StateCanceled, 60*time.Second)
	api.waitState(second, tesv1.StateComplete, 2*time.Minute)

	// A task larger than the whole quota, whose pod could never be
	// created: refused at its create, naming the quota.
	huge := map[string]any{"name": "huge", "executors": big["executors"], "resources": map[string]any{"cpu_cores": 3}}
	code, body := api.do(http.MethodPost, "/tasks", huge)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "more than the ResourceQuota tesk-tasks of the tasks' namespace lets all tasks' pods hold together (requests.cpu: 2)") {
		t.Errorf("a task of 3 cores under a quota of 2: %d %s, want 400 naming the quota", code, body)
	}
}

// taskPods are the pods of a task's jobs.
func taskPods(t *testing.T, e *env, task string) []corev1.Pod {
	t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + task})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// resourcesOf is a container's requests and limits, "requests.cpu": "250m".
func resourcesOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for name, q := range c.Resources.Requests {
		out["requests."+string(name)] = q.String()
	}
	for name, q := range c.Resources.Limits {
		out["limits."+string(name)] = q.String()
	}
	return out
}

// equalQuantities reports whether two sets of resources hold the same
// quantities.
func equalQuantities(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		if gq := resource.MustParse(g); gq.Cmp(resource.MustParse(w)) != 0 {
			return false
		}
	}
	return true
}

// jobEventSays reports whether a Kubernetes Event of the job holds text.
func jobEventSays(t *testing.T, e *env, job, text string) bool {
	t.Helper()
	evs, err := e.c.Client.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Job,involvedObject.name=" + job,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}
