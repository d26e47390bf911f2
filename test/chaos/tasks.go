package chaos

import (
	"fmt"
	"math/rand/v2"
)

// Task is one generated task: its name, its TES input and whether the run
// cancels it while it runs.
type Task struct {
	Name   string
	Spec   map[string]any
	Cancel bool
}

// GenerateTasks returns n tasks drawn from seed: 1 to 3 executors, about a
// third with inputs and outputs (a PVC and filer jobs), about a fifth with a
// failing executor (half of those with ignore_error) and about a tenth
// cancelled mid-run. The same seed gives the same tasks.
func GenerateTasks(seed uint64, n int) []Task {
	rng := rand.New(rand.NewPCG(seed, 0xda3e39cb94b95bdb))
	tasks := make([]Task, n)
	for i := range tasks {
		nex := 1 + rng.IntN(3)
		fail := -1
		if rng.Float64() < 0.2 {
			fail = rng.IntN(nex)
		}
		ignore := rng.IntN(2) == 0
		ex := make([]any, nex)
		for j := range ex {
			e := map[string]any{"image": "busybox", "command": []any{"true"}}
			if j == fail {
				e["image"] = fmt.Sprintf("fate.tesk.test/fail:%d", 1+rng.IntN(3))
				e["ignore_error"] = ignore
			}
			ex[j] = e
		}
		spec := map[string]any{"executors": ex}
		if rng.Float64() < 1.0/3 {
			spec["inputs"] = []any{map[string]any{
				"name": "in", "content": fmt.Sprintf("task %d", i), "path": "/data/in/in.txt", "type": "FILE",
			}}
			spec["outputs"] = []any{map[string]any{
				"name": "out", "url": fmt.Sprintf("s3://results/out-%d.txt", i), "path": "/data/out/out.txt", "type": "FILE",
			}}
			spec["resources"] = map[string]any{"disk_gb": 0.5}
		}
		tasks[i] = Task{Name: fmt.Sprintf("chaos-%04d", i), Spec: spec, Cancel: rng.Float64() < 0.1}
	}
	return tasks
}
