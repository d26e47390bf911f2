package chaos

import (
	"fmt"
	"math/rand/v2"
)

// Task is one generated task: its name, its TES input, whether the run
// cancels it while it runs, and the TES state it must end in.
type Task struct {
	Name   string
	Spec   map[string]any
	Cancel bool
	Want   string
}

// GenerateTasks returns n tasks drawn from seed: 1 to 3 executors, about a
// third with inputs and outputs (a PVC and filer jobs), about a fifth with a
// failing executor (half of those with ignore_error) and about a tenth
// cancelled mid-run: those fail nowhere and their last executor runs until
// it is stopped (kwok fate.tesk.test/forever), so the cancel always comes
// while they run. The same seed gives the same tasks.
func GenerateTasks(seed uint64, n int) []Task {
	rng := rand.New(rand.NewPCG(seed, 0xda3e39cb94b95bdb))
	tasks := make([]Task, n)
	for i := range tasks {
		cancel := rng.Float64() < 0.1
		nex := 1 + rng.IntN(3)
		fail := -1
		if !cancel && rng.Float64() < 0.2 {
			fail = rng.IntN(nex)
		}
		ignore := rng.IntN(2) == 0
		ex := make([]any, nex)
		for j := range ex {
			e := map[string]any{"image": "busybox", "command": []any{"true"}}
			switch {
			case j == fail:
				e["image"] = fmt.Sprintf("fate.tesk.test/fail:%d", 1+rng.IntN(3))
				e["ignore_error"] = ignore
			case cancel && j == nex-1:
				e["image"] = "fate.tesk.test/forever"
				e["command"] = []any{"sleep", "infinity"}
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
		want := "COMPLETE"
		switch {
		case cancel:
			want = "CANCELED"
		case fail >= 0 && !ignore:
			want = "EXECUTOR_ERROR"
		}
		spec["name"] = fmt.Sprintf("chaos-%04d", i)
		tasks[i] = Task{Name: fmt.Sprintf("chaos-%04d", i), Spec: spec, Cancel: cancel, Want: want}
	}
	return tasks
}
