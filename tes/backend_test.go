package tes

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func withBackendParameters(t *testing.T, a *apiTest, doc string) {
	t.Helper()
	c, err := backendparams.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a.srv.Config.Steps.BackendParameters = c
}

func taskWithParameters(params string, strict bool) string {
	s := "false"
	if strict {
		s = "true"
	}
	return `{"executors":[{"image":"alpine","command":["true"]}],"resources":{"backend_parameters":` + params + `,"backend_parameters_strict":` + s + `}}`
}

func TestServiceInfoListsTheEnabledKeys(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want []any
	}{
		{"", []any{}},
		{"zones: {allowed: [a]}\ngpu: {max: 1, types: {nvidia.com/gpu: {}}}", []any{"gpu_count", "gpu_type", "zones"}},
		{`preemptible: {"true": {nodeSelector: {spot: "true"}}}`, []any{"preemptible"}},
	} {
		a := newAPITest(t)
		withBackendParameters(t, a, c.doc)
		code, info := a.do(http.MethodGet, "/service-info", "")
		if got := info["tesResources_backend_parameters"]; code != http.StatusOK || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %d, keys %v; want %v", c.doc, code, got, c.want)
		}
	}
}

// TestCreateChecksBackendParameters: a value the configuration does not
// allow, or with backend_parameters_strict a key it does not enable, is a
// 400 naming the key and what is allowed, and nothing is written or posted.
func TestCreateChecksBackendParameters(t *testing.T) {
	cases := []struct {
		name, doc, task, want string
	}{
		{"zone not allowed", "zones: {allowed: [a, b]}", taskWithParameters(`{"zones":"a,c"}`, false), `resources.backend_parameters.zones: "c" is not allowed (allowed: a, b)`},
		{"pool not defined", "node_pool: {pools: {big: {nodeSelector: {pool: big}}}}", taskWithParameters(`{"node_pool":"huge"}`, true), `resources.backend_parameters.node_pool: "huge" is not allowed (allowed: big)`},
		{"GPU type not offered", "gpu: {max: 2, types: {nvidia.com/gpu: {}}}", taskWithParameters(`{"gpu_count":"1","gpu_type":"amd.com/gpu"}`, false), `gpu_type: "amd.com/gpu" is not allowed (allowed: nvidia.com/gpu)`},
		{"too many GPUs", "gpu: {max: 2, types: {nvidia.com/gpu: {}}}", taskWithParameters(`{"gpu_count":"8"}`, false), `gpu_count: "8" is not a whole number from 0 to 2`},
		{"service account not allowed", "service_account: {allowed: [reader]}", taskWithParameters(`{"service_account":"tesk-handler"}`, false), `service_account: "tesk-handler" is not allowed (allowed: reader)`},
		{"pull secret not allowed", "image_pull_secrets: {allowed: [regcred]}", taskWithParameters(`{"image_pull_secrets":"aws-secret"}`, false), `image_pull_secrets: "aws-secret" is not allowed (allowed: regcred)`},
		{"preemptible not a boolean", `preemptible: {"true": {nodeSelector: {spot: "true"}}}`, taskWithParameters(`{"preemptible":"maybe"}`, false), `preemptible: "maybe" is not allowed (allowed: true, false)`},
		{"strict, not enabled", "zones: {allowed: [a]}", taskWithParameters(`{"zones":"a","VmSize":"big"}`, true), `resources.backend_parameters: "VmSize" is not supported (backend_parameters_strict is true; supported: zones)`},
		{"strict, nothing enabled", "", taskWithParameters(`{"zones":"a"}`, true), `"zones" is not supported (backend_parameters_strict is true; supported: none)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAPITest(t)
			withBackendParameters(t, a, c.doc)
			code, body := a.do(http.MethodPost, "/tasks", c.task)
			if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, c.want) {
				t.Errorf("%d %v, want 400 with %q", code, body, c.want)
			}
			cms, _ := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{})
			if len(cms.Items) != 0 || len(a.sink.got()) != 0 {
				t.Errorf("%d anchors written, %d events posted", len(cms.Items), len(a.sink.got()))
			}
		})
	}
}

// TestCreateKeepsTheSupportedParameters: the parameters the service acts on
// reach the task JSON the handler reads and the stored task; those it does
// not support are dropped (without strict), and the task's FULL view says
// which in its system_logs.
func TestCreateKeepsTheSupportedParameters(t *testing.T) {
	a := newAPITest(t)
	withBackendParameters(t, a, "zones: {allowed: [a, b]}\ngpu: {max: 2, types: {nvidia.com/gpu: {}}}")
	code, body := a.do(http.MethodPost, "/tasks", taskWithParameters(`{"Zones":"b","gpu_count":"1","VmSize":"big","disk_type":"ssd"}`, false))
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	id := body["id"].(string)
	cm, err := a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"zones": "b", "gpu_count": "1"}
	spec, err := taskspec.DecodeGzip(cm.BinaryData[taskspec.ConfigMapKey])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec.Resources.BackendParameters, want) {
		t.Errorf("task JSON parameters %v, want %v", spec.Resources.BackendParameters, want)
	}
	stored, ok := StoredTask(cm)
	if !ok || !reflect.DeepEqual(stored.Resources.BackendParameters, want) {
		t.Errorf("stored parameters %v, want %v", stored.Resources.BackendParameters, want)
	}
	line := "resources.backend_parameters: VmSize, disk_type ignored: not supported by this service (service-info lists the supported keys)"
	if got := cm.Annotations[taskmeta.AnnotationSystemLog]; got != line {
		t.Errorf("anchor note %q, want %q", got, line)
	}
	_, full := a.do(http.MethodGet, "/tasks/"+id+"?view=FULL", "")
	logs := full["logs"].([]any)[0].(map[string]any)
	if sl, _ := logs["system_logs"].([]any); len(sl) != 1 || sl[0] != line {
		t.Errorf("FULL system_logs %v, want [%q]", logs["system_logs"], line)
	}
	res := full["resources"].(map[string]any)
	if got := res["backend_parameters"]; !reflect.DeepEqual(got, map[string]any{"zones": "b", "gpu_count": "1"}) {
		t.Errorf("FULL backend_parameters %v", got)
	}

	// A task whose parameters are all supported gets no note.
	code, body = a.do(http.MethodPost, "/tasks", taskWithParameters(`{"zones":"a"}`, true))
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, body)
	}
	cm, _ = a.client.CoreV1().ConfigMaps("tes").Get(context.Background(), body["id"].(string), metav1.GetOptions{})
	if _, ok := cm.Annotations[taskmeta.AnnotationSystemLog]; ok {
		t.Errorf("a note on a task without ignored parameters: %v", cm.Annotations)
	}
}
