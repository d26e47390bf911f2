package backendparams

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// full enables every key.
const full = `
node_pool:
  pools:
    highmem:
      nodeSelector: {pool: highmem}
      tolerations: [{key: pool, operator: Equal, value: highmem, effect: NoSchedule}]
    batch:
      nodeSelector: {pool: batch}
preemptible:
  "true":
    nodeSelector: {cloud.google.com/gke-spot: "true"}
    tolerations: [{key: cloud.google.com/gke-spot, operator: Exists, effect: NoSchedule}]
  "false":
    nodeSelector: {cloud.google.com/gke-spot: "false"}
gpu:
  max: 4
  default: nvidia.com/gpu
  types:
    nvidia.com/gpu:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    amd.com/gpu: {}
zones:
  allowed: [a, b, c]
service_account:
  allowed: [tesk-gcs-reader]
image_pull_secrets:
  allowed: [regcred, quay]
`

func mustParse(t *testing.T, doc string) *Config {
	t.Helper()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestParse(t *testing.T) {
	cases := []struct {
		name, doc string
		keys      []string
		err       string
	}{
		{"empty", "", []string{}, ""},
		{"blank", " \n", []string{}, ""},
		{"empty object", "{}", []string{}, ""},
		{"every key", full, []string{"gpu_count", "gpu_type", "image_pull_secrets", "node_pool", "preemptible", "service_account", "zones"}, ""},
		{"json", `{"zones":{"allowed":["eu-1a"]}}`, []string{"zones"}, ""},
		{"one gpu type is the default", "gpu: {max: 1, types: {nvidia.com/gpu: {}}}", []string{"gpu_count", "gpu_type"}, ""},
		{"unknown section", "gpus: {max: 1}", nil, `unknown field "gpus"`},
		{"unknown field", "zones: {allow: [a]}", nil, `unknown field "zones.allow"`},
		{"wrong type", "zones: {allowed: a}", nil, "cannot unmarshal"},
		{"not yaml", "zones: [", nil, "not a YAML or JSON document"},
		{"no pools", "node_pool: {pools: {}}", nil, "node_pool.pools: at least one pool"},
		{"empty pool", "node_pool: {pools: {x: {}}}", nil, "node_pool.pools.x: a node selector or tolerations are required"},
		{"pool name with comma", "node_pool: {pools: {'a,b': {nodeSelector: {a: b}}}}", nil, `node_pool.pools: "a,b" is not a pool name`},
		{"bad selector key", "node_pool: {pools: {x: {nodeSelector: {'a b': c}}}}", nil, `node_pool.pools.x.nodeSelector: "a b" is not a label key`},
		{"bad selector value", "node_pool: {pools: {x: {nodeSelector: {a: 'b c'}}}}", nil, `node_pool.pools.x.nodeSelector.a: "b c" is not a label value`},
		{"bad operator", "node_pool: {pools: {x: {tolerations: [{key: a, operator: In}]}}}", nil, `node_pool.pools.x.tolerations[0].operator: "In" is neither Equal nor Exists`},
		{"exists with value", "node_pool: {pools: {x: {tolerations: [{key: a, operator: Exists, value: b}]}}}", nil, "tolerations[0].value: must be empty"},
		{"equal without key", "node_pool: {pools: {x: {tolerations: [{operator: Equal, value: b}]}}}", nil, "tolerations[0].operator: Equal needs a key"},
		{"bad effect", "node_pool: {pools: {x: {tolerations: [{key: a, operator: Exists, effect: NoRun}]}}}", nil, `tolerations[0].effect: "NoRun"`},
		{"seconds without NoExecute", "node_pool: {pools: {x: {tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}]}}}", nil, "tolerationSeconds: only with the effect NoExecute"},
		{"preemptible without true", `preemptible: {"false": {nodeSelector: {a: b}}}`, nil, "preemptible.true: a node selector or tolerations are required"},
		{"preemptible bad false", `preemptible: {"true": {nodeSelector: {a: b}}, "false": {nodeSelector: {a: 'x y'}}}`, nil, "preemptible.false.nodeSelector.a"},
		{"no gpu types", "gpu: {max: 1, types: {}}", nil, "gpu.types: at least one"},
		{"gpu type without domain", "gpu: {max: 1, types: {gpu: {}}}", nil, `gpu.types: "gpu" is not an extended resource name`},
		{"gpu type of kubernetes", "gpu: {max: 1, types: {kubernetes.io/gpu: {}}}", nil, `gpu.types: "kubernetes.io/gpu" is not an extended resource name (its domain is Kubernetes')`},
		{"gpu default missing", "gpu: {max: 1, types: {nvidia.com/gpu: {}, amd.com/gpu: {}}}", nil, "gpu.default: required with more than one type (one of amd.com/gpu, nvidia.com/gpu)"},
		{"gpu default unknown", "gpu: {max: 1, default: intel.com/gpu, types: {nvidia.com/gpu: {}}}", nil, `gpu.default: "intel.com/gpu" is not one of gpu.types`},
		{"gpu max 0", "gpu: {types: {nvidia.com/gpu: {}}}", nil, "gpu.max: 0 is not a whole number from 1"},
		{"no zones", "zones: {allowed: []}", nil, "zones.allowed: at least one value"},
		{"bad zone", "zones: {allowed: [a, 'b c']}", nil, `zones.allowed[1]: "b c"`},
		{"zone with comma", "zones: {allowed: ['a,b']}", nil, `zones.allowed[0]: "a,b" is empty or holds a comma`},
		{"bad service account", "service_account: {allowed: [Admin]}", nil, `service_account.allowed[0]: "Admin"`},
		{"bad pull secret", "image_pull_secrets: {allowed: ['']}", nil, `image_pull_secrets.allowed[0]: "" is empty`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Keys(); !reflect.DeepEqual(got, tc.keys) {
				t.Errorf("keys %v, want %v", got, tc.keys)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvVar {
				return v
			}
			return ""
		}
	}
	if c, err := FromEnv(env("")); err != nil || len(c.Keys()) != 0 {
		t.Errorf("unset: %v, %v", c.Keys(), err)
	}
	if _, err := FromEnv(env("zones: {allowed: []}")); err == nil || !strings.HasPrefix(err.Error(), "BACKEND_PARAMETERS: zones.allowed") {
		t.Errorf("error %v does not name the variable and the field", err)
	}
	var nilConfig *Config
	if k := nilConfig.Keys(); k == nil || len(k) != 0 {
		t.Errorf("a nil configuration enables %v", k)
	}
}

func TestCheck(t *testing.T) {
	c := mustParse(t, full)
	only := mustParse(t, "zones: {allowed: [a]}")
	cases := []struct {
		name     string
		c        *Config
		params   map[string]string
		strict   bool
		accepted map[string]string
		ignored  []string
		err      string
	}{
		{"none", c, nil, true, nil, nil, ""},
		{"every key", c, map[string]string{"node_pool": "highmem", "preemptible": "false", "gpu_count": "2", "gpu_type": "amd.com/gpu", "zones": "a,b", "service_account": "tesk-gcs-reader", "image_pull_secrets": "regcred"}, true,
			map[string]string{"node_pool": "highmem", "preemptible": "false", "gpu_count": "2", "gpu_type": "amd.com/gpu", "zones": "a,b", "service_account": "tesk-gcs-reader", "image_pull_secrets": "regcred"}, nil, ""},
		{"keys in another case", c, map[string]string{"Zones": "a"}, true, map[string]string{"zones": "a"}, nil, ""},
		{"twice in two cases", c, map[string]string{"Zones": "a", "zones": "b"}, true, nil, nil, `"zones" is given twice`},
		{"unsupported, lenient", only, map[string]string{"zones": "a", "VmSize": "big", "gpu_count": "1"}, false, map[string]string{"zones": "a"}, []string{"VmSize", "gpu_count"}, ""},
		{"unsupported, strict", only, map[string]string{"zones": "a", "gpu_count": "1"}, true, nil, nil, `resources.backend_parameters: "gpu_count" is not supported (backend_parameters_strict is true; supported: zones)`},
		{"nothing enabled, strict", nil, map[string]string{"VmSize": "big"}, true, nil, nil, `"VmSize" is not supported (backend_parameters_strict is true; supported: none)`},
		{"nothing enabled, lenient", nil, map[string]string{"VmSize": "big"}, false, nil, []string{"VmSize"}, ""},
		{"value refused, lenient", c, map[string]string{"zones": "d"}, false, nil, nil, `resources.backend_parameters.zones: "d" is not allowed (allowed: a, b, c)`},
		{"unknown pool", c, map[string]string{"node_pool": "gpu"}, true, nil, nil, `resources.backend_parameters.node_pool: "gpu" is not allowed (allowed: batch, highmem)`},
		{"preemptible yes", c, map[string]string{"preemptible": "yes"}, true, nil, nil, `resources.backend_parameters.preemptible: "yes" is not allowed (allowed: true, false)`},
		{"gpu count too large", c, map[string]string{"gpu_count": "5"}, true, nil, nil, `resources.backend_parameters.gpu_count: "5" is not a whole number from 0 to 4`},
		{"gpu count negative", c, map[string]string{"gpu_count": "-1"}, true, nil, nil, "gpu_count"},
		{"gpu count fraction", c, map[string]string{"gpu_count": "1.5"}, true, nil, nil, "gpu_count"},
		{"gpu type unknown", c, map[string]string{"gpu_count": "1", "gpu_type": "intel.com/gpu"}, true, nil, nil, `resources.backend_parameters.gpu_type: "intel.com/gpu" is not allowed (allowed: amd.com/gpu, nvidia.com/gpu)`},
		{"gpu type alone", c, map[string]string{"gpu_type": "amd.com/gpu"}, true, nil, nil, "gpu_type: \"amd.com/gpu\" without gpu_count"},
		{"empty zone", c, map[string]string{"zones": "a,,b"}, true, nil, nil, `zones: "a,,b" holds an empty entry`},
		{"service account refused", c, map[string]string{"service_account": "default"}, true, nil, nil, `service_account: "default" is not allowed (allowed: tesk-gcs-reader)`},
		{"pull secret refused", c, map[string]string{"image_pull_secrets": "regcred,other"}, true, nil, nil, `image_pull_secrets: "other" is not allowed (allowed: regcred, quay)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acc, ign, err := tc.c.Check(tc.params, tc.strict)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(acc, tc.accepted) || !reflect.DeepEqual(ign, tc.ignored) {
				t.Errorf("accepted %v, ignored %v; want %v, %v", acc, ign, tc.accepted, tc.ignored)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c := mustParse(t, full)
	spot := corev1.Toleration{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	nvidia := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	highmem := corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "highmem", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name   string
		c      *Config
		params map[string]string
		want   Pods
		err    string
	}{
		{"none", nil, nil, Pods{}, ""},
		{"pool", c, map[string]string{"node_pool": "highmem"}, Pods{NodeSelector: map[string]string{"pool": "highmem"}, Tolerations: []corev1.Toleration{highmem}}, ""},
		{"preemptible", c, map[string]string{"preemptible": "TRUE"}, Pods{NodeSelector: map[string]string{"cloud.google.com/gke-spot": "true"}, Tolerations: []corev1.Toleration{spot}}, ""},
		{"not preemptible", c, map[string]string{"preemptible": "false"}, Pods{NodeSelector: map[string]string{"cloud.google.com/gke-spot": "false"}}, ""},
		{"false without placement", mustParse(t, `preemptible: {"true": {nodeSelector: {a: b}}}`), map[string]string{"preemptible": "false"}, Pods{}, ""},
		{"pool and preemptible", c, map[string]string{"node_pool": "batch", "preemptible": "true"},
			Pods{NodeSelector: map[string]string{"pool": "batch", "cloud.google.com/gke-spot": "true"}, Tolerations: []corev1.Toleration{spot}}, ""},
		{"gpus of the default type", c, map[string]string{"gpu_count": "2"}, Pods{GPU: "nvidia.com/gpu", GPUCount: 2, Tolerations: []corev1.Toleration{nvidia}}, ""},
		{"gpus of a type", c, map[string]string{"gpu_count": " 1 ", "gpu_type": "amd.com/gpu"}, Pods{GPU: "amd.com/gpu", GPUCount: 1}, ""},
		{"no gpus", c, map[string]string{"gpu_count": "0", "gpu_type": "amd.com/gpu"}, Pods{}, ""},
		{"zones", c, map[string]string{"zones": " b, a ,b"}, Pods{Zones: []string{"b", "a"}}, ""},
		{"identity", c, map[string]string{"service_account": "tesk-gcs-reader", "image_pull_secrets": "quay,regcred"}, Pods{ServiceAccount: "tesk-gcs-reader", ImagePullSecrets: []string{"quay", "regcred"}}, ""},
		{"not enabled", mustParse(t, "zones: {allowed: [a]}"), map[string]string{"gpu_count": "1"}, Pods{}, `resources.backend_parameters: "gpu_count" is not supported by this service's configuration (supported: zones)`},
		{"nothing enabled", nil, map[string]string{"zones": "a"}, Pods{}, `"zones" is not supported by this service's configuration (supported: none)`},
		{"selectors that disagree", mustParse(t, `
node_pool: {pools: {x: {nodeSelector: {kind: standard}}}}
preemptible: {"true": {nodeSelector: {kind: spot}}}`), map[string]string{"node_pool": "x", "preemptible": "true"}, Pods{},
			"resources.backend_parameters.preemptible: its node selector asks for kind=spot, where another parameter asks for kind=standard"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Resolve(tc.params)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	p := Pods{
		NodeSelector:     map[string]string{"pool": "gpu"},
		Tolerations:      []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
		Zones:            []string{"b"},
		GPU:              "nvidia.com/gpu",
		GPUCount:         2,
		ServiceAccount:   "reader",
		ImagePullSecrets: []string{"regcred", "quay"},
	}
	zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}
	t.Run("executor", func(t *testing.T) {
		ps := corev1.PodSpec{
			ServiceAccountName: "tesk-executor",
			NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
			Containers: []corev1.Container{{Name: "ex", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}}},
		}
		p.ApplyExecutor(&ps)
		if !reflect.DeepEqual(ps.NodeSelector, map[string]string{"kubernetes.io/os": "linux", "pool": "gpu"}) {
			t.Errorf("node selector %v", ps.NodeSelector)
		}
		if !reflect.DeepEqual(ps.Tolerations, p.Tolerations) {
			t.Errorf("tolerations %v", ps.Tolerations)
		}
		terms := ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || !reflect.DeepEqual(terms[0].MatchExpressions, []corev1.NodeSelectorRequirement{zone}) {
			t.Errorf("node affinity %+v", terms)
		}
		r := ps.Containers[0].Resources
		if q := r.Limits["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("GPU limit %v", r.Limits)
		}
		if q := r.Requests["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("GPU request %v", r.Requests)
		}
		if q := r.Limits[corev1.ResourceCPU]; q.Value() != 1 {
			t.Errorf("the CPU limit is lost: %v", r.Limits)
		}
		if ps.ServiceAccountName != "reader" {
			t.Errorf("service account %q", ps.ServiceAccountName)
		}
		if !reflect.DeepEqual(ps.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "quay"}}) {
			t.Errorf("pull secrets %v", ps.ImagePullSecrets)
		}
	})
	t.Run("another pod of the task", func(t *testing.T) {
		other := corev1.NodeSelectorRequirement{Key: "arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}
		ps := corev1.PodSpec{
			ServiceAccountName: "tesk-executor",
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{other}}, {}},
			}}},
			Containers: []corev1.Container{{Name: "filer"}},
		}
		p.ApplyTask(&ps)
		terms := ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		want := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{other, zone}}, {MatchExpressions: []corev1.NodeSelectorRequirement{zone}}}
		if !reflect.DeepEqual(terms, want) {
			t.Errorf("terms %+v, want the zone added to each", terms)
		}
		if ps.NodeSelector != nil || ps.Tolerations != nil || ps.ServiceAccountName != "tesk-executor" || ps.ImagePullSecrets != nil || ps.Containers[0].Resources.Limits != nil {
			t.Errorf("a filer got what only executors get: %+v", ps)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		ps := corev1.PodSpec{Containers: []corev1.Container{{Name: "ex"}}}
		Pods{}.ApplyExecutor(&ps)
		if !reflect.DeepEqual(ps, corev1.PodSpec{Containers: []corev1.Container{{Name: "ex"}}, Tolerations: nil}) {
			t.Errorf("no parameters changed the pod: %+v", ps)
		}
	})
}

// FuzzParse: any document parses or is refused with an error; one that
// parses lists keys its parts enable, and resolves every value it allows.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(`{"zones":{"allowed":["a"]}}`))
	f.Add([]byte("gpu: {max: 2, types: {nvidia.com/gpu: {}}}"))
	f.Add([]byte(`preemptible: {"true": {tolerations: [{key: a, operator: Exists}]}}`))
	f.Add([]byte("node_pool: {pools: {x: {nodeSelector: {a: b}}}}"))
	f.Add([]byte("[]"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Parse(doc)
		if err != nil {
			if c != nil {
				t.Fatalf("a configuration with the error %v", err)
			}
			return
		}
		keys := c.Keys()
		if !slices.IsSorted(keys) {
			t.Fatalf("keys not sorted: %v", keys)
		}
		params := map[string]string{}
		if c.Zones != nil {
			params[KeyZones] = c.Zones.Allowed[0]
		}
		if c.NodePool != nil {
			for name := range c.NodePool.Pools {
				params[KeyNodePool] = name
				break
			}
		}
		if c.GPU != nil {
			params[KeyGPUCount] = "1"
		}
		if c.ServiceAccount != nil {
			params[KeyServiceAccount] = c.ServiceAccount.Allowed[0]
		}
		if c.ImagePullSecrets != nil {
			params[KeyImagePullSecrets] = c.ImagePullSecrets.Allowed[0]
		}
		p, err := c.Resolve(params)
		if err != nil && !strings.Contains(err.Error(), "its node selector asks for") {
			t.Fatalf("an allowed value is refused: %v (%v)", err, params)
		}
		if err == nil && c.GPU != nil && (p.GPUCount != 1 || p.GPU == "") {
			t.Fatalf("gpu_count 1 gave %+v", p)
		}
	})
}
