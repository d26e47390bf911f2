package jobspec

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// Fixtures shared by the tests of the package: a task as the TESK API
// passes it and its anchor, shared with the tests of steps and runner
// (test/taskfixtures).

const (
	testTask = taskfixtures.TaskName
	testNS   = taskfixtures.Namespace
	testUID  = taskfixtures.AnchorUID
)

var testAnchor = taskfixtures.TestAnchor

// The tasks shared with the tests of steps and runner (test/taskfixtures).
var (
	executorSpec    = taskfixtures.ExecutorSpec
	taskWith        = taskfixtures.TaskWith
	withInput       = taskfixtures.WithInput
	withOutput      = taskfixtures.WithOutput
	withVolume      = taskfixtures.WithVolume
	teskAPIExecutor = taskfixtures.TESKAPIExecutor
)

var quantity = taskfixtures.Quantity

func ptr[T any](v T) *T { return &v }

func i64(v int64) *int64 { return &v }

func wantInt32(t *testing.T, name string, p *int32, want int32) {
	t.Helper()
	if p == nil || *p != want {
		t.Errorf("%s = %v, want %d", name, p, want)
	}
}

func wantOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: testTask, UID: testUID}}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("owner references %+v, want the anchor %+v", refs, want)
	}
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func hasMount(c corev1.Container, name, at string, readOnly bool) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name && m.MountPath == at && m.ReadOnly == readOnly {
			return true
		}
	}
	return false
}

func hasSecretVolume(ps corev1.PodSpec, name, secret string, optional bool) bool {
	for _, v := range ps.Volumes {
		if v.Name == name && v.Secret != nil && v.Secret.SecretName == secret {
			return (v.Secret.Optional != nil && *v.Secret.Optional) == optional
		}
	}
	return false
}
