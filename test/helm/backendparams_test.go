package helm

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var backendParametersLine = regexp.MustCompile(`(?m)^  BACKEND_PARAMETERS: (.*)$`)

// backendParametersOf is the BACKEND_PARAMETERS of a rendering, unquoted.
func backendParametersOf(t *testing.T, vals map[string]any) string {
	t.Helper()
	out, err := Render(vals)
	if err != nil {
		t.Fatal(err)
	}
	m := backendParametersLine.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("%d BACKEND_PARAMETERS lines", len(m))
	}
	v, err := strconv.Unquote(m[0][1])
	if err != nil {
		t.Fatalf("BACKEND_PARAMETERS %s is not a quoted string: %v", m[0][1], err)
	}
	return v
}

// backendParameters is rendered as the JSON document the services read;
// by default empty, which enables no key.
func TestBackendParameters(t *testing.T) {
	if v := backendParametersOf(t, map[string]any{"auth": map[string]any{"mode": "none"}}); v != "" {
		t.Errorf("default BACKEND_PARAMETERS %q, want empty", v)
	}
	doc := map[string]any{
		"node_pool":          map[string]any{"pools": map[string]any{"highmem": map[string]any{"nodeSelector": map[string]any{"pool": "highmem"}, "tolerations": []any{map[string]any{"key": "pool", "operator": "Exists"}}}}},
		"preemptible":        map[string]any{"true": map[string]any{"nodeSelector": map[string]any{"spot": "true"}}},
		"gpu":                map[string]any{"max": float64(2), "default": "nvidia.com/gpu", "types": map[string]any{"nvidia.com/gpu": map[string]any{}}},
		"zones":              map[string]any{"allowed": []any{"a", "b"}},
		"service_account":    map[string]any{"allowed": []any{"reader"}},
		"image_pull_secrets": map[string]any{"allowed": []any{"regcred"}},
	}
	v := backendParametersOf(t, map[string]any{"auth": map[string]any{"mode": "none"}, "backendParameters": doc})
	var got map[string]any
	if err := json.Unmarshal([]byte(v), &got); err != nil {
		t.Fatalf("BACKEND_PARAMETERS %q is not JSON: %v", v, err)
	}
	if !reflect.DeepEqual(got, doc) {
		t.Errorf("BACKEND_PARAMETERS %v, want %v", got, doc)
	}
}

func TestBackendParametersRefused(t *testing.T) {
	none := func(bp map[string]any) map[string]any {
		return map[string]any{"auth": map[string]any{"mode": "none"}, "backendParameters": bp}
	}
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unknown section", none(map[string]any{"gpus": map[string]any{}}), "gpus"},
		{"no allowed zones", none(map[string]any{"zones": map[string]any{"allowed": []any{}}}), "/backendParameters/zones/allowed"},
		{"allowed not a list", none(map[string]any{"service_account": map[string]any{"allowed": "reader"}}), "/backendParameters/service_account/allowed"},
		{"gpu without max", none(map[string]any{"gpu": map[string]any{"types": map[string]any{"nvidia.com/gpu": map[string]any{}}}}), "max"},
		{"pool with another field", none(map[string]any{"node_pool": map[string]any{"pools": map[string]any{"x": map[string]any{"affinity": map[string]any{}}}}}), "affinity"},
		{"preemptible without true", none(map[string]any{"preemptible": map[string]any{"false": map[string]any{}}}), "true"},
	} {
		_, err := Render(c.vals)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
