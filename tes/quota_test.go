package tes

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// quota is an unscoped ResourceQuota of the tasks' namespace.
func quota(name string, hard ...string) corev1.ResourceQuota {
	q := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tes"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{}}}
	for i := 0; i+1 < len(hard); i += 2 {
		q.Spec.Hard[corev1.ResourceName(hard[i])] = resource.MustParse(hard[i+1])
	}
	return q
}

func TestOverQuota(t *testing.T) {
	scoped := quota("scoped", "requests.cpu", "1")
	scoped.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
	selected := quota("selected", "requests.cpu", "1")
	selected.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
		{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}}}
	tasks := quota("tesk-tasks", "requests.cpu", "2", "requests.memory", "1Gi")
	cases := []struct {
		name   string
		res    *tesv1.Resources
		quotas []corev1.ResourceQuota
		want   string // "": admitted
	}{
		{"no resources asked", nil, []corev1.ResourceQuota{tasks}, ""},
		{"nothing asked, a quota of none", &tesv1.Resources{}, []corev1.ResourceQuota{quota("zero", "requests.cpu", "0")}, ""},
		{"no quota", &tesv1.Resources{CPUCores: 64, RAMGB: 512}, nil, ""},
		{"the whole quota", &tesv1.Resources{CPUCores: 2, RAMGB: 1}, []corev1.ResourceQuota{tasks}, ""},
		{"more cores than the quota", &tesv1.Resources{CPUCores: 3}, []corev1.ResourceQuota{tasks},
			"resources.cpu_cores: 3, more than the ResourceQuota tesk-tasks of the tasks' namespace lets all tasks' pods hold together (requests.cpu: 2): an executor's pod could never be created"},
		{"more memory than the quota", &tesv1.Resources{CPUCores: 1, RAMGB: 1.5}, []corev1.ResourceQuota{tasks},
			"resources.ram_gb: 1.5 GB, more than the ResourceQuota tesk-tasks of the tasks' namespace lets all tasks' pods hold together (requests.memory: 1Gi)"},
		{"cpu, the short name of requests.cpu", &tesv1.Resources{CPUCores: 3}, []corev1.ResourceQuota{quota("q", "cpu", "2")}, "(cpu: 2)"},
		{"memory, the short name of requests.memory", &tesv1.Resources{RAMGB: 2}, []corev1.ResourceQuota{quota("q", "memory", "2G")}, "resources.ram_gb: 2 GB, more than the ResourceQuota q of the tasks' namespace lets all tasks' pods hold together (memory: 2G)"},
		{"limits: the executor's limits are its requests", &tesv1.Resources{CPUCores: 3}, []corev1.ResourceQuota{quota("q", "limits.cpu", "2500m")}, "(limits.cpu: 2500m)"},
		{"limits of memory", &tesv1.Resources{RAMGB: 4}, []corev1.ResourceQuota{quota("q", "limits.memory", "3Gi")}, "(limits.memory: 3Gi)"},
		{"a quota of other resources", &tesv1.Resources{CPUCores: 8, RAMGB: 8}, []corev1.ResourceQuota{quota("q", "pods", "1", "requests.storage", "1Gi", "persistentvolumeclaims", "0")}, ""},
		{"scoped quotas are left out", &tesv1.Resources{CPUCores: 8}, []corev1.ResourceQuota{scoped, selected}, ""},
		{"the first quota by name", &tesv1.Resources{CPUCores: 8}, []corev1.ResourceQuota{quota("b", "requests.cpu", "1"), tasks, quota("a", "requests.cpu", "4")}, "the ResourceQuota a of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := overQuota(&tesv1.Task{Resources: c.res}, c.quotas)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

// TestCreateOverTheResourceQuota: POST /tasks refuses a task whose
// executor asks for more than a ResourceQuota of the tasks' namespace
// allows all pods together, naming the quota, and writes nothing; a task
// within it is created. The quotas are read once for the creates of
// quotasCacheFor, then again.
func TestCreateOverTheResourceQuota(t *testing.T) {
	a := newAPITest(t)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	a.srv.Now = func() time.Time { return now }
	q := quota("tesk-tasks", "requests.cpu", "2")
	if _, err := a.client.CoreV1().ResourceQuotas("tes").Create(context.Background(), &q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	big := strings.Replace(helloTask, `"cpu_cores":1`, `"cpu_cores":3`, 1)
	code, body := a.do(http.MethodPost, "/tasks", big)
	if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "resources.cpu_cores: 3, more than the ResourceQuota tesk-tasks of the tasks' namespace") {
		t.Errorf("a task of 3 cores under a quota of 2: %d %v, want 400 naming the quota", code, body)
	}
	if n := len(a.anchors(t)); n != 0 {
		t.Errorf("a refused create wrote %d anchors", n)
	}
	if code, body := a.do(http.MethodPost, "/tasks", helloTask); code != http.StatusOK {
		t.Errorf("a task of 1 core: %d %v", code, body)
	}
	if n := quotaLists(a); n != 1 {
		t.Errorf("the quotas were listed %d times for two creates, want once", n)
	}
	now = now.Add(quotasCacheFor)
	if code, _ := a.do(http.MethodPost, "/tasks", big); code != http.StatusBadRequest {
		t.Errorf("a task of 3 cores, later: %d", code)
	}
	if n := quotaLists(a); n != 2 {
		t.Errorf("the quotas were listed %d times, want again after %s", n, quotasCacheFor)
	}
}

// A Role that may not list the quotas (one of an earlier version) lets
// every task through, and the quotas are tried once a period.
func TestCreateWhenTheQuotasCannotBeRead(t *testing.T) {
	a := newAPITest(t)
	a.client.PrependReactor("list", "resourcequotas", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "resourcequotas"}, "", nil)
	})
	big := strings.Replace(helloTask, `"cpu_cores":1`, `"cpu_cores":3`, 1)
	for range 2 {
		if code, body := a.do(http.MethodPost, "/tasks", big); code != http.StatusOK {
			t.Errorf("create: %d %v", code, body)
		}
	}
	if n := quotaLists(a); n != 1 {
		t.Errorf("the quotas were listed %d times for two creates, want once", n)
	}
}

// quotaLists counts the lists of ResourceQuotas the API made.
func quotaLists(a *apiTest) int {
	n := 0
	for _, act := range a.client.Actions() {
		if act.GetVerb() == "list" && act.GetResource().Resource == "resourcequotas" {
			n++
		}
	}
	return n
}
