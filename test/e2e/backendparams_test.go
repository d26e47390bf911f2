//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tes/dashboard"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// zoneNodes adds a kwok node in each zone, made as the cluster's own, and
// deletes them when the test ends.
func zoneNodes(t *testing.T, zones ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	nodes := shared.Client.CoreV1().Nodes()
	base, err := nodes.Get(ctx, shared.Nodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byZone := map[string]string{}
	for _, z := range zones {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        "kwok-zone-" + z,
			Labels:      map[string]string{},
			Annotations: base.Annotations,
		}, Status: *base.Status.DeepCopy()}
		for k, v := range base.Labels {
			n.Labels[k] = v
		}
		n.Labels[corev1.LabelHostname] = n.Name
		n.Labels[corev1.LabelTopologyZone] = z
		n.Status.Conditions = nil
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
		t.Cleanup(func() { _ = nodes.Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
		byZone[z] = n.Name
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range byZone {
		for {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err == nil && slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
				return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s not Ready: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return byZone
}

// A task created through the TES API with the backend parameter zones=b
// runs every pod (the filers and the executors) on the node of zone b,
// while a node of zone a and one without a zone are there; service-info
// lists the key.
func TestTESBackendParameterZones(t *testing.T) {
	byZone := zoneNodes(t, "a", "b")
	bp, err := backendparams.Parse([]byte("zones: {allowed: [a, b]}"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *steps.Config) { c.BackendParameters = bp }})
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Dashboard: dashboard.Config{API: tes.BasePath}, LogTailBytes: 16, BackendParameters: bp})

	code, body := api.do(http.MethodGet, "/service-info", nil)
	var info tesv1.ServiceInfo
	if err := json.Unmarshal(body, &info); code != http.StatusOK || err != nil || !slices.Equal(info.TesResourcesBackendParameters, []string{"zones"}) {
		t.Fatalf("service-info: %d %s", code, body)
	}
	task := demoTask("zoned")
	task["resources"] = map[string]any{"cpu_cores": 1, "backend_parameters": map[string]any{"zones": "b"}, "backend_parameters_strict": true}
	id := api.create(task)
	api.waitState(id, tesv1.StateComplete, 60*time.Second)

	pods, err := shared.Client.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelTask + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 4 {
		t.Fatalf("%d pods, want the inputs filer, two executors and the outputs filer", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != byZone["b"] {
			t.Errorf("pod %s ran on %q, want %s (zone b)", p.Name, p.Spec.NodeName, byZone["b"])
		}
	}

	// A zone the operator does not list is refused, naming the allowed ones.
	task["resources"] = map[string]any{"backend_parameters": map[string]any{"zones": "c"}}
	if code, body := api.do(http.MethodPost, "/tasks", task); code != http.StatusBadRequest {
		t.Errorf("zones=c: %d %s, want 400", code, body)
	}
}
