package main

import (
	"strings"
	"testing"
)

func TestParsePaths(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the names parsed, or "error"
	}{
		{"imc", "imc"},
		{"imc,imc-async,jetstream", "imc,imc-async,jetstream"},
		{" jetstream , imc ", "jetstream,imc"},
		{"", "error"},
		{"imc,imc", "error"},
		{"kafka", "error"},
		{"imc,", "error"},
	} {
		ps, err := parsePaths(tc.in)
		if tc.want == "error" {
			if err == nil || !strings.Contains(err.Error(), "imc, imc-async, jetstream") {
				t.Errorf("%q: err %v, want one naming the paths", tc.in, err)
			}
			continue
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.name)
		}
		if err != nil || strings.Join(names, ",") != tc.want {
			t.Errorf("%q: %v %v, want %s", tc.in, names, err, tc.want)
		}
	}
	for _, p := range eventPaths {
		if (p.name == "imc-async") != p.async || (p.name == "jetstream") != (p.config != nil) {
			t.Errorf("path %s: async %v, config %v", p.name, p.async, p.config)
		}
	}
}

// The pods whose CPU and memory the bench adds up, by group.
func TestPodGroup(t *testing.T) {
	for _, tc := range []struct{ ns, name, want string }{
		{"tesk", "tesk-handler-00001-deployment-5d9f-abcde", "tesk (tesk-handler)"},
		{"tesk", "apiserversource-tesk-jobs-1a2b-7f9c-xyz", groupDataPlane},
		{"knative-eventing", "mt-broker-filter-6b7c-abc", groupDataPlane},
		{"knative-eventing", "jetstream-ch-dispatcher-5c4d-abc", groupDataPlane},
		{"knative-eventing", "imc-dispatcher-7d8e-abc", groupDataPlane},
		{"knative-serving", "activator-6f7-abc", groupDataPlane},
		{"knative-eventing", "eventing-controller-5b-abc", "Knative control plane"},
		{"knative-serving", "autoscaler-5b-abc", "Knative control plane"},
		{"tesk-tasks", "task-abc-ex-00-xyz", ""},
		{"nats-io", "nats-0", groupDataPlane},
		{"kube-system", "coredns-abc", ""},
	} {
		if got := podGroup(tc.ns, tc.name); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.ns, tc.name, got, tc.want)
		}
	}
}
