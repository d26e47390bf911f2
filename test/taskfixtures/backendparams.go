package taskfixtures

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// placementConfig enables every backend parameter.
const placementConfig = `
node_pool: {pools: {highmem: {nodeSelector: {pool: highmem}, tolerations: [{key: pool, operator: Equal, value: highmem, effect: NoSchedule}]}}}
preemptible: {"true": {nodeSelector: {spot: "true"}, tolerations: [{key: spot, operator: Exists, effect: NoSchedule}]}}
gpu: {max: 2, default: nvidia.com/gpu, types: {nvidia.com/gpu: {tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}, amd.com/gpu: {}}}
zones: {allowed: [a, b]}
service_account: {allowed: [reader]}
image_pull_secrets: {allowed: [regcred, quay]}
`

func WithParams(kv ...string) func(*taskspec.Task) {
	return func(t *taskspec.Task) {
		t.Resources.BackendParameters = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Resources.BackendParameters[kv[i]] = kv[i+1]
		}
	}
}

var ZoneB = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
	NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}},
	}}},
}}}

// CheckExecutorPod checks an executor's pod placed by node_pool=highmem,
// preemptible=true, gpu_count=2, zones=b, service_account=reader and
// image_pull_secrets=regcred.
func CheckExecutorPod(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	if want := map[string]string{"pool": "highmem", "spot": "true"}; !reflect.DeepEqual(ps.NodeSelector, want) {
		t.Errorf("node selector %v, want %v", ps.NodeSelector, want)
	}
	var keys []string
	for _, tol := range ps.Tolerations {
		keys = append(keys, tol.Key)
	}
	if want := []string{"pool", "spot", "nvidia.com/gpu"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("tolerations of %v, want %v", keys, want)
	}
	if !reflect.DeepEqual(ps.Affinity, ZoneB) {
		t.Errorf("affinity %+v, want zone b required", ps.Affinity)
	}
	res := ps.Containers[0].Resources
	if l, r := res.Limits["nvidia.com/gpu"], res.Requests["nvidia.com/gpu"]; l.Value() != 2 || r.Value() != 2 {
		t.Errorf("resources %v, want 2 nvidia.com/gpu as limit and request", res)
	}
	if l := res.Limits[corev1.ResourceCPU]; l.Value() != 1 {
		t.Errorf("the CPU request is not a limit too: %v", res)
	}
	if ps.ServiceAccountName != "reader" || ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("service account %q, token %v; want reader, without its token", ps.ServiceAccountName, ps.AutomountServiceAccountToken)
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(ps.ImagePullSecrets, want) {
		t.Errorf("pull secrets %v", ps.ImagePullSecrets)
	}
}

// CheckFilerPod checks that a filer's pod gets the zone and nothing else of
// the parameters.
func CheckFilerPod(t *testing.T, ps corev1.PodSpec) {
	t.Helper()
	if !reflect.DeepEqual(ps.Affinity, ZoneB) {
		t.Errorf("filer affinity %+v, want zone b required", ps.Affinity)
	}
	if ps.NodeSelector != nil || ps.Tolerations != nil || ps.ImagePullSecrets != nil || ps.ServiceAccountName != "tesk-executor" {
		t.Errorf("the filer got the executors' placement: %+v", ps)
	}
	if _, ok := ps.Containers[0].Resources.Limits["nvidia.com/gpu"]; ok {
		t.Errorf("the filer got GPUs")
	}
}

var AllParams = WithParams("node_pool", "highmem", "preemptible", "true", "gpu_count", "2", "zones", "b", "service_account", "reader", "image_pull_secrets", "regcred")

func WithCPU(t *taskspec.Task) {
	for i := range t.Executors {
		t.Executors[i].Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	}
}

// Placement is the operator's backend parameters the placement tests run
// with: node pools, preemptible nodes, GPUs and zones.
func Placement(t *testing.T) *backendparams.Config {
	t.Helper()
	bp, err := backendparams.Parse([]byte(placementConfig))
	if err != nil {
		t.Fatal(err)
	}
	return bp
}
