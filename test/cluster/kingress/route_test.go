package kingress

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A KIngress as Knative Serving writes it for a cluster-local Service with
// one revision, and one that splits traffic between two.
const (
	handlerIngress = `{"spec": {"rules": [{"hosts": ["tesk-handler.tesk", "tesk-handler.tesk.svc", "tesk-handler.tesk.svc.cluster.local"],
	  "visibility": "ClusterLocal",
	  "http": {"paths": [{"splits": [{"serviceName": "tesk-handler-00001", "serviceNamespace": "tesk", "servicePort": 80, "percent": 100,
	    "appendHeaders": {"Knative-Serving-Namespace": "tesk", "Knative-Serving-Revision": "tesk-handler-00001"}}]}]}}]}}`
	splitIngress = `{"spec": {"rules": [{"hosts": ["tesk-tes.tesk.example.com"], "visibility": "ExternalIP",
	  "http": {"paths": [
	    {"path": "/ga4gh/", "rewriteHost": "tesk-tes.tesk.svc.cluster.local", "appendHeaders": {"K-Route": "api"},
	     "splits": [{"serviceName": "a", "serviceNamespace": "tesk", "servicePort": "http", "percent": 25},
	                {"serviceName": "b", "serviceNamespace": "tesk", "servicePort": 8080, "percent": 75}]},
	    {"splits": [{"serviceName": "c", "serviceNamespace": "tesk", "servicePort": 80}]}]}}]}}`
)

func spec(t *testing.T, s string) Spec {
	t.Helper()
	var u unstructured.Unstructured
	if err := json.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	sp, err := SpecOf(&u)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func TestLookup(t *testing.T) {
	tb := NewTable()
	if err := tb.Set("tesk/tesk-handler", spec(t, handlerIngress)); err != nil {
		t.Fatal(err)
	}
	if err := tb.Set("tesk/tesk-tes", spec(t, splitIngress)); err != nil {
		t.Fatal(err)
	}
	at := func(n int) func() int { return func() int { return n } }
	cases := []struct {
		host, path string
		pick       int
		addr, hdr  string
		ok         bool
	}{
		{"tesk-handler.tesk.svc.cluster.local", "/", 0, "tesk-handler-00001.tesk.svc.cluster.local:80", "tesk-handler-00001", true},
		{"TESK-HANDLER.tesk.svc:80", "/x", 99, "tesk-handler-00001.tesk.svc.cluster.local:80", "tesk-handler-00001", true},
		{"tesk-tes.tesk.example.com", "/ga4gh/tes/v1/tasks", 24, "a.tesk.svc.cluster.local:80", "", true},
		{"tesk-tes.tesk.example.com", "/ga4gh/tes/v1/tasks", 25, "b.tesk.svc.cluster.local:8080", "", true},
		{"tesk-tes.tesk.example.com", "/other", 50, "c.tesk.svc.cluster.local:80", "", true},
		{"unknown.example.com", "/", 0, "", "", false},
	}
	for _, c := range cases {
		tg, ok := tb.Lookup(c.host, c.path, at(c.pick))
		if ok != c.ok || tg.Addr != c.addr || tg.Headers["Knative-Serving-Revision"] != c.hdr {
			t.Errorf("%s%s (%d): %+v %v, want %s %q %v", c.host, c.path, c.pick, tg, ok, c.addr, c.hdr, c.ok)
		}
	}
	if tg, _ := tb.Lookup("tesk-tes.tesk.example.com", "/ga4gh/x", at(0)); tg.Host != "tesk-tes.tesk.svc.cluster.local" || tg.Headers["K-Route"] != "api" {
		t.Errorf("rewriteHost and the path's headers: %+v", tg)
	}
	tb.Delete("tesk/tesk-handler")
	if _, ok := tb.Lookup("tesk-handler.tesk.svc.cluster.local", "/", at(0)); ok {
		t.Error("a deleted KIngress still routes")
	}
	if _, ok := tb.Lookup("tesk-tes.tesk.example.com", "/", at(0)); !ok {
		t.Error("deleting one KIngress dropped another's routes")
	}
	bad := spec(t, `{"spec": {"rules": [{"hosts": ["x"], "http": {"paths": [{"splits": [{"serviceName": "a", "serviceNamespace": "b", "servicePort": "grpc"}]}]}}]}}`)
	if err := tb.Set("tesk/bad", bad); err == nil {
		t.Error("a port that is neither a number nor http was taken")
	}
}
