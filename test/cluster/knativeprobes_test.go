package cluster

import (
	"testing"

	"sigs.k8s.io/yaml"
)

// Knative's probes wait 5 s for an answer on the local cluster; one that
// waits longer, and a container without probes, are left as they are.
func TestAdaptKnativeProbes(t *testing.T) {
	objs, err := DecodeManifest([]byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: imc-dispatcher, namespace: knative-eventing}
spec:
  template:
    spec:
      containers:
        - name: dispatcher
          livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 2, timeoutSeconds: 1}
          readinessProbe: {httpGet: {path: /healthz, port: 8080}}
          startupProbe: {httpGet: {path: /healthz, port: 8080}, timeoutSeconds: 30}
        - name: sidecar
`))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v %d", err, len(objs))
	}
	if err := adaptKnative(objs[0]); err != nil {
		t.Fatal(err)
	}
	b, _ := yaml.Marshal(objs[0].Object["spec"])
	var got struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name                                        string
					LivenessProbe, ReadinessProbe, StartupProbe *struct{ TimeoutSeconds, PeriodSeconds int }
				}
			}
		}
	}
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Template.Spec.Containers
	if len(c) != 2 || c[0].LivenessProbe == nil || c[0].ReadinessProbe == nil || c[0].StartupProbe == nil {
		t.Fatalf("containers after adaptKnative:\n%s", b)
	}
	if l := c[0].LivenessProbe; l.TimeoutSeconds != 5 || l.PeriodSeconds != 2 {
		t.Errorf("liveness probe %+v, want a timeout of 5 s and the period as it was", *l)
	}
	if r := c[0].ReadinessProbe; r.TimeoutSeconds != 5 {
		t.Errorf("readiness probe without a timeout (1 s) %+v, want 5 s", *r)
	}
	if s := c[0].StartupProbe; s.TimeoutSeconds != 30 {
		t.Errorf("startup probe %+v, want its 30 s as they were", *s)
	}
	if c[1].LivenessProbe != nil || c[1].ReadinessProbe != nil {
		t.Errorf("a container without probes got %+v", c[1])
	}
}
