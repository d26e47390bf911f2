//go:build knative

package knative

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// The platform is Knative's own: every Deployment of Eventing and Serving
// Available and running the images built from knative.dev's modules, the
// ApiServerSource's adapter a pod of its own under the ServiceAccount of
// config/knative, every object of config/knative Ready, no revision of
// the TES API Ready without its sink and the sink's token, the handler at
// zero pods.
func TestPlatformIsReal(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"knative-eventing", "knative-serving"} {
		ds, err := env.C.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.Items) < 4 {
			t.Errorf("%s: %d Deployments, want Knative's", ns, len(ds.Items))
		}
		for _, d := range ds.Items {
			if d.Status.AvailableReplicas < 1 {
				t.Errorf("%s/%s: not Available", ns, d.Name)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if !strings.HasPrefix(c.Image, cluster.KnativeImageRegistry+"/knative-") {
					t.Errorf("%s/%s runs %s, not an image of Knative's own commands", ns, d.Name, c.Image)
				}
			}
		}
	}
	bad, err := env.NotReady(ctx)
	if err != nil || len(bad) > 0 {
		t.Errorf("config/knative not Ready: %v %v", bad, err)
	}
	// The TES API's revisions made before its SinkBinding set K_SINK, or
	// mounted the token the Broker asks for, exit (SINK_REQUIRED,
	// SINK_TOKEN_REQUIRED): none of them is Ready to take a task whose
	// task.submitted would go nowhere or be refused.
	unbound, tokenless, err := readyWithout(ctx, env, "tesk-tes", "K_SINK", "/oidc")
	if err != nil {
		t.Fatal(err)
	}
	if len(unbound)+len(tokenless) > 0 {
		t.Errorf("tesk-tes: revisions %v Ready without K_SINK, %v without the sink's token at /oidc", unbound, tokenless)
	}
	adapters, err := env.C.Client.CoreV1().Pods(Platform).List(ctx, metav1.ListOptions{LabelSelector: "eventing.knative.dev/sourceName=tesk-events"})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range adapters.Items {
		if p.Status.Phase == corev1.PodRunning && p.Spec.ServiceAccountName == "tesk-apiserversource" {
			running++
		}
	}
	if running != 1 {
		t.Errorf("ApiServerSource adapter pods running as tesk-apiserversource: %d, want 1 (%d pods)", running, len(adapters.Items))
	}
	// At rest the handler scales to zero; the sweep's PingSource wakes it
	// each minute for a few seconds, so rest is waited for, not sampled.
	if err := env.WaitZero(ctx, "tesk-handler", 3*time.Minute); err != nil {
		t.Errorf("handler pods at rest: %v, want 0", err)
	}
}

// A TES task through the TES API, the Broker, the Triggers and the
// ApiServerSource's adapter, with the handler started from zero, to
// COMPLETE: its executors ran on the real node, its output is in S3, and
// the handler scales back to zero afterwards.
func TestTaskFromZero(t *testing.T) {
	ctx := context.Background()
	if err := env.WaitZero(ctx, "tesk-handler", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	api, err := env.TES(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	id, err := api.Create(ctx, TwoStepTask("from-zero", "from-zero/result.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	task, err := api.Wait(ctx, id, 5*time.Minute, func(s string) { states = append(states, s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("task %s %s in %s through %v", id, task.State, time.Since(t0).Round(time.Millisecond), states)
	if task.State != "COMPLETE" {
		t.Fatalf("task ended %s: %+v", task.State, task.Logs)
	}
	if len(task.Logs) == 0 || len(task.Logs[0].Logs) != 2 {
		t.Fatalf("executor logs: %+v, want 2", task.Logs)
	}
	for i, l := range task.Logs[0].Logs {
		if l.ExitCode != 0 {
			t.Errorf("executor %d exit code %d", i, l.ExitCode)
		}
	}
	if got := task.Logs[0].Logs[1].Stdout; !strings.Contains(got, "HELLO FROM TES ON KNATIVE") {
		t.Errorf("second executor's stdout %q", got)
	}
	got, err := env.Store.Get(ctx, Bucket, "from-zero/result.txt")
	if err != nil || got != "HELLO FROM TES ON KNATIVE\n" {
		t.Errorf("output in S3: %q, %v", got, err)
	}
	pods, err := env.C.Client.CoreV1().Pods(Tasks).List(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 4 {
		t.Errorf("%d pods of the task, want the inputs filer, 2 executors and the outputs filer", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != env.Node.Name {
			t.Errorf("pod %s on %q, want the real node", p.Name, p.Spec.NodeName)
		}
	}
	t1 := time.Now()
	if err := env.WaitZero(ctx, "tesk-handler", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("handler back at zero pods %s after the task ended", time.Since(t1).Round(time.Second))
}
