//go:build e2e

package cluster_test

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
)

// The API server's admission gives the pods of a namespace PlayPods names
// the fake nodes' selector and a toleration of their taint, and those pods
// run there; a namespace it does not name keeps its pods as they are.
func TestPlayPods(t *testing.T) {
	ctx := context.Background()
	played, plain := namespace(t), namespace(t)
	if err := shared.PlayPods(ctx, played); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{played, plain} {
		if _, err := shared.Client.BatchV1().Jobs(ns).Create(ctx, newJob("ok", nil, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitJob(t, shared.Client, ns, "ok", batchv1.JobComplete)
	}
	tolerates := func(p corev1.Pod) bool {
		for _, tol := range p.Spec.Tolerations {
			if tol.Key == cluster.FakeNodeTaint.Key && tol.Value == cluster.FakeNodeTaint.Value && tol.Effect == cluster.FakeNodeTaint.Effect {
				return true
			}
		}
		return false
	}
	pods := jobPods(t, played, "ok")
	if len(pods) != 1 {
		t.Fatalf("played: want 1 pod, got %d", len(pods))
	}
	if p := pods[0]; p.Spec.NodeSelector["type"] != "kwok" || !tolerates(p) || p.Spec.NodeName != shared.Nodes[0] {
		t.Errorf("played: pod on %q with node selector %v and tolerations %v, want type=kwok, a toleration of %v, on %s",
			p.Spec.NodeName, p.Spec.NodeSelector, p.Spec.Tolerations, cluster.FakeNodeTaint, shared.Nodes[0])
	}
	pods = jobPods(t, plain, "ok")
	if len(pods) != 1 {
		t.Fatalf("plain: want 1 pod, got %d", len(pods))
	}
	if p := pods[0]; p.Spec.NodeSelector != nil || tolerates(p) {
		t.Errorf("plain: node selector %v, tolerations %v: want neither", p.Spec.NodeSelector, p.Spec.Tolerations)
	}
	if err := shared.PlayPods(ctx, "no-such-namespace"); err == nil {
		t.Error("PlayPods of a namespace that does not exist: no error")
	}
}
