//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
)

// Pod fates of the local cluster (test/cluster/README.md).
const (
	fateResult   = "fate.tesk.test/result"
	fateDelay    = "fate.tesk.test/delay"
	fateExitCode = "fate.tesk.test/exit-code"
)

// executor is one executor of a task JSON, as the TESK API converts it to a
// Job: fate annotates its pod template, jobAnnotations its job.
func executor(task string, i int, fate map[string]string, jobAnnotations map[string]string) map[string]any {
	name := fmt.Sprintf("%s-ex-%02d", task, i)
	meta := map[string]any{
		"name": name,
		"labels": map[string]any{
			"taskmaster-name": task, "job-type": "executor", "executor-no": fmt.Sprint(i),
		},
	}
	if jobAnnotations != nil {
		meta["annotations"] = jobAnnotations
	}
	tmpl := map[string]any{
		"spec": map[string]any{
			"restartPolicy": "Never",
			"containers": []any{map[string]any{
				"name":    name,
				"image":   "ubuntu:24.04",
				"command": []any{"sh", "-c", fmt.Sprintf("echo step %d", i)},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": "100m", "memory": "64Mi"},
				},
			}},
		},
	}
	if fate != nil {
		tmpl["metadata"] = map[string]any{"annotations": fate}
	}
	return map[string]any{
		"apiVersion": "batch/v1",
		"kind":       "Job",
		"metadata":   meta,
		"spec":       map[string]any{"template": tmpl},
	}
}

// taskJSON is a task with the given executors, one input and one output.
func taskJSON(executors ...map[string]any) map[string]any {
	ex := make([]any, len(executors))
	for i, e := range executors {
		ex[i] = e
	}
	return map[string]any{
		"executors": ex,
		"inputs": []any{map[string]any{
			"name": "in", "url": "http://inputs.invalid/in.txt", "path": "/data/in/in.txt", "type": "FILE",
		}},
		"outputs": []any{map[string]any{
			"name": "out", "url": "s3://results/out.txt", "path": "/data/out/out.txt", "type": "FILE",
		}},
		"volumes":   []any{"/scratch"},
		"resources": map[string]any{"disk_gb": 0.5},
	}
}

// noIO drops the inputs, outputs and volumes: no PVC, no filer.
func noIO(spec map[string]any) map[string]any {
	delete(spec, "inputs")
	delete(spec, "outputs")
	delete(spec, "volumes")
	return spec
}

func fail(code int) map[string]string {
	return map[string]string{fateResult: "fail", fateExitCode: fmt.Sprint(code)}
}

func runFor(d string) map[string]string { return map[string]string{fateDelay: d} }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
