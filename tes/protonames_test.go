package tes

import (
	"strings"
	"testing"
)

// Funnel's example tasks (examples/resource-request.json at funnel
// b427ea1) ask for ramGb and diskGb, the JSON names protojson reads.
func TestDecodeTaskProtoJSONNames(t *testing.T) {
	tk, err := DecodeTask([]byte(`{"name":"Resource request","resources":{"cpuCores":4,"ramGb":15,"diskGb":100,
		"backendParameters":{"node_pool":"a"},"backendParametersStrict":true},
		"outputs":[{"url":"s3://b/r","path":"/data/*.txt","pathPrefix":"/data"}],
		"executors":[{"image":"alpine","command":["sleep","1"],"ignoreError":true,"env":{"ramGb":"kept"}}],
		"tags":{"diskGb":"kept"}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := tk.Resources
	if r == nil || r.CPUCores != 4 || r.RAMGB != 15 || r.DiskGB != 100 || r.BackendParameters["node_pool"] != "a" || !r.BackendParametersStrict {
		t.Errorf("resources %+v", r)
	}
	if tk.Outputs[0].PathPrefix != "/data" {
		t.Errorf("path_prefix %q", tk.Outputs[0].PathPrefix)
	}
	if !tk.Executors[0].IgnoreError {
		t.Error("ignoreError not read")
	}
	// Keys of maps are names of the user's, never renamed.
	if tk.Executors[0].Env["ramGb"] != "kept" || tk.Tags["diskGb"] != "kept" {
		t.Errorf("env %v, tags %v", tk.Executors[0].Env, tk.Tags)
	}

	for body, want := range map[string]string{
		`{"executors":[{"image":"a","command":["x"]}],"resources":{"ram_gb":1,"ramGb":2}}`:                                                "resources.ram_gb and resources.ramGb",
		`{"executors":[{"image":"a","command":["x"],"ignore_error":true,"ignoreError":false}]}`:                                           "executors[0].ignore_error and executors[0].ignoreError",
		`{"executors":[{"image":"a","command":["x"]}],"outputs":[{"url":"s3://b/r","path":"/d/*","pathPrefix":"/d","path_prefix":"/d"}]}`: "outputs[0].path_prefix",
		`{"executors":[{"image":"a","command":["x"]}],"resources":{"ramGB":1}}`:                                                           "unknown field",
	} {
		if _, err := DecodeTask([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", body, err, want)
		}
	}
}
