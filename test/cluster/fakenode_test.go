package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The fake nodes are tainted only beside a real node: alone, every pod
// must be able to run on them.
func TestFakeNodeTaint(t *testing.T) {
	for _, tc := range []struct {
		besideReal bool
		want       int
	}{{false, 0}, {true, 1}} {
		n := fakeNode("kwok-node-0", corev1.ResourceList{}, 10250, tc.besideReal)
		if len(n.Spec.Taints) != tc.want {
			t.Errorf("beside a real node %v: taints %v, want %d", tc.besideReal, n.Spec.Taints, tc.want)
			continue
		}
		if tc.want == 1 && n.Spec.Taints[0] != FakeNodeTaint {
			t.Errorf("taint %v, want %v", n.Spec.Taints[0], FakeNodeTaint)
		}
		if n.Annotations["kwok.x-k8s.io/node"] != "fake" || n.Labels["type"] != "kwok" {
			t.Errorf("kwok would not play %v", n.ObjectMeta)
		}
	}
}
