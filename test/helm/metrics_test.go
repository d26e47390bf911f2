package helm

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// documents are the rendered objects, by kind and name.
func documents(t *testing.T, out string) map[string]map[string]any {
	t.Helper()
	docs := map[string]map[string]any{}
	for _, d := range strings.Split(out, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("%v in\n%s", err, d)
		}
		if o == nil {
			continue
		}
		md, _ := o["metadata"].(map[string]any)
		docs[o["kind"].(string)+"/"+md["name"].(string)] = o
	}
	return docs
}

func dig(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// metrics.podMonitor.enabled off (the default): no PodMonitor, and the
// handler and the TES API export nothing.
func TestPodMonitorOff(t *testing.T) {
	out, err := Render(map[string]any{"auth": map[string]any{"mode": "none"}})
	if err != nil {
		t.Fatal(err)
	}
	docs := documents(t, out)
	for k := range docs {
		if strings.HasPrefix(k, "PodMonitor/") {
			t.Errorf("%s rendered with metrics.podMonitor.enabled false", k)
		}
	}
	for _, cm := range []string{"ConfigMap/tesk-handler-config", "ConfigMap/tesk-tes-config"} {
		if v, ok := dig(docs[cm], "data", "K_OBSERVABILITY_CONFIG").(string); !ok || v != "" {
			t.Errorf("%s: K_OBSERVABILITY_CONFIG %q, want empty", cm, v)
		}
	}
}

// metrics.podMonitor.enabled on: the handler and the TES API serve
// Prometheus metrics on 9092 (K_OBSERVABILITY_CONFIG), and the PodMonitor
// in the platform's namespace scrapes both on that port.
func TestPodMonitorOn(t *testing.T) {
	out, err := Render(map[string]any{"auth": map[string]any{"mode": "none"}, "namespaces": map[string]any{"platform": "p1", "tasks": "t1"},
		"metrics": map[string]any{"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}}}})
	if err != nil {
		t.Fatal(err)
	}
	docs := documents(t, out)
	for _, cm := range []string{"ConfigMap/tesk-handler-config", "ConfigMap/tesk-tes-config"} {
		v, _ := dig(docs[cm], "data", "K_OBSERVABILITY_CONFIG").(string)
		var got map[string]string
		if err := json.Unmarshal([]byte(v), &got); err != nil || !reflect.DeepEqual(got, map[string]string{"metrics-protocol": "prometheus"}) {
			t.Errorf("%s: K_OBSERVABILITY_CONFIG %v, want Prometheus", cm, v)
		}
	}
	pm := docs["PodMonitor/tesk-knative"]
	if pm == nil {
		t.Fatalf("no PodMonitor/tesk-knative in %v", keys(docs))
	}
	checks := []struct {
		path []any
		want any
	}{
		{[]any{"apiVersion"}, "monitoring.coreos.com/v1"},
		{[]any{"metadata", "namespace"}, "p1"},
		{[]any{"metadata", "labels", "release"}, "kube-prometheus-stack"},
		{[]any{"metadata", "labels", "app.kubernetes.io/part-of"}, "tesk-knative"},
		{[]any{"spec", "selector", "matchExpressions", 0, "key"}, "app.kubernetes.io/name"},
		{[]any{"spec", "podMetricsEndpoints", 0, "port"}, "user-port"},
		{[]any{"spec", "podMetricsEndpoints", 0, "path"}, "/metrics"},
		{[]any{"spec", "podMetricsEndpoints", 0, "interval"}, "30s"},
		{[]any{"spec", "podMetricsEndpoints", 0, "relabelings", 0, "targetLabel"}, "__address__"},
		{[]any{"spec", "podMetricsEndpoints", 0, "relabelings", 0, "replacement"}, "${1}:9092"},
	}
	for _, c := range checks {
		if got := dig(pm, c.path...); got != c.want {
			t.Errorf("PodMonitor %v = %v, want %v", c.path, got, c.want)
		}
	}
	// Prometheus's relabelling (an anchored RE2 regex) moves a target on
	// http1 to 9092, for IPv4 and IPv6 pods alike.
	re := regexp.MustCompile("^(?:" + dig(pm, "spec", "podMetricsEndpoints", 0, "relabelings", 0, "regex").(string) + ")$")
	for addr, want := range map[string]string{"10.1.2.3:8080": "10.1.2.3:9092", "[fd00::12]:8080": "[fd00::12]:9092"} {
		if got := re.ReplaceAllString(addr, "${1}:9092"); got != want {
			t.Errorf("relabelling %s gives %s, want %s", addr, got, want)
		}
	}
	// The monitor selects the pods of both Services, by their template's
	// label (TestUpstreamPodMonitor checks it against the pods Knative
	// makes of them, and the port those declare).
	values, _ := dig(pm, "spec", "selector", "matchExpressions", 0, "values").([]any)
	for _, svc := range []string{"tesk-handler", "tesk-tes"} {
		ks := docs["Service/"+svc]
		if dig(ks, "spec", "template", "metadata", "labels", "app.kubernetes.io/name") != svc {
			t.Errorf("Service %s: its pods are not labelled app.kubernetes.io/name=%s", svc, svc)
		}
		found := false
		for _, v := range values {
			found = found || v == svc
		}
		if !found {
			t.Errorf("the PodMonitor does not select %s (values %v)", svc, values)
		}
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
