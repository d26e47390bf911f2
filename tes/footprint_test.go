package tes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// benchEtcdTask is a task as make bench-etcd creates it (test/bench/etcd.go,
// etcdTaskJSON): the inputs and executors given, and one output.
func benchEtcdTask(inputs, executors []any) []byte {
	t := map[string]any{"name": "etcd", "executors": executors,
		"outputs": []any{map[string]any{"path": "/data/out.txt", "url": "s3://b/out.txt"}}}
	if inputs != nil {
		t["inputs"] = inputs
	}
	b, _ := json.Marshal(t)
	return b
}

// TestFootprintAgainstBenchEtcd: the estimate the TES API records for each
// of the four tasks make bench-etcd measured (BENCHMARKS.md, the run of
// 2026-12-07), built as that run built them, is at least what the task
// kept in etcd at its peak and at most 1.5 times it. The anchor each
// builds is the one the run recorded, within a few bytes (the id's
// digits), so that the shapes are the ones measured.
func TestFootprintAgainstBenchEtcd(t *testing.T) {
	rnd := rand.New(rand.NewChaCha8([32]byte{'e', 't', 'c', 'd'}))
	noise := make([]byte, MaxRequestBytes)
	for i := range noise {
		noise[i] = byte(rnd.Uint32())
	}
	random := base64.StdEncoding.EncodeToString(noise)
	var script strings.Builder
	for i := 0; script.Len() < MaxRequestBytes; i++ {
		fmt.Fprintf(&script, "echo step %06d of the script >> /data/out.txt\n", i)
	}
	several := make([]any, 8)
	for i := range several {
		several[i] = map[string]any{"image": "alpine", "command": []string{"echo", fmt.Sprintf("executor %d", i)}}
	}
	for _, c := range []struct {
		name string
		body []byte
		// As BENCHMARKS.md recorded them: the anchor's size at its
		// create, and the task's bytes in etcd at its peak.
		anchor, peak int64
	}{
		{"small", benchEtcdTask([]any{map[string]any{"path": "/data/in.txt", "content": "hello"}},
			[]any{map[string]any{"image": "alpine", "command": []string{"cat", "/data/in.txt"}, "stdout": "/data/out.txt"}}),
			784, 42453},
		{"content", benchEtcdTask([]any{map[string]any{"path": "/data/in.txt", "content": random[:652157]}},
			[]any{map[string]any{"image": "alpine", "command": []string{"wc", "-c", "/data/in.txt"}, "stdout": "/data/out.txt"}}),
			983335, 1024371},
		{"command", benchEtcdTask([]any{map[string]any{"path": "/data/in.txt", "content": "hello"}},
			[]any{map[string]any{"image": "alpine", "command": []string{"sh", "-c", script.String()[:852612]}}}),
			93879, 1840526},
		{"executors", benchEtcdTask(nil, several), 851, 101856},
	} {
		t.Run(c.name, func(t *testing.T) {
			task, err := DecodeTask(c.body)
			if err == nil {
				err = Validate(task)
			}
			if err != nil {
				t.Fatal(err)
			}
			id := taskmeta.NewID(time.Now())
			spec, raw, err := convert(task, id, ConvertOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm, err := BuildAnchor("bench-etcd", id, task, raw, Caller{})
			if err != nil {
				t.Fatal(err)
			}
			cfg := steps.DefaultConfig()
			cfg.Namespace = "bench-etcd"
			got := recordFootprint(cm, spec, taskmeta.Anchor{Name: id, Namespace: "bench-etcd"}, cfg)
			if rec, err := strconv.ParseInt(cm.Annotations[taskmeta.AnnotationSize], 10, 64); err != nil || rec != got {
				t.Errorf("recorded %q, estimated %d", cm.Annotations[taskmeta.AnnotationSize], got)
			}
			// The anchor as the run recorded its own size: the
			// annotation held that size, here the estimate.
			cm.Annotations[taskmeta.AnnotationSize] = strconv.FormatInt(c.anchor, 10)
			if n := int64(cm.Size()); n < c.anchor-8 || n > c.anchor+8 {
				t.Fatalf("the anchor is %d bytes, the run's was %d: not the shape measured", n, c.anchor)
			}
			if got < c.peak || float64(got) > 1.5*float64(c.peak) {
				t.Errorf("estimated %d bytes, the task kept %d at its peak: want at least that and at most 1.5 times it (%.2f×)", got, c.peak, float64(got)/float64(c.peak))
			}
			t.Logf("%s: estimated %d, peak %d (%.3f×)", c.name, got, c.peak, float64(got)/float64(c.peak))
		})
	}
}

// TestFootprint: the estimate is the anchor, the fixed part of a task, and
// for each executor twice its Job as the handler builds it (what the
// handler adds to it, the task volume's mounts among them, counted too)
// and the fixed part of an executor.
func TestFootprint(t *testing.T) {
	job := func(task *taskspec.Task, i int) int64 {
		return int64(jobspec.ExecutorJob(taskmeta.Anchor{Name: "task-1", Namespace: "tes", UID: sizeUID}, task, i, jobspec.DefaultConfig()).Size())
	}
	a := taskmeta.Anchor{Name: "task-1", Namespace: "tes"}
	conv := func(body string) *taskspec.Task {
		t.Helper()
		task, err := DecodeTask([]byte(body))
		if err == nil {
			err = Validate(task)
		}
		if err != nil {
			t.Fatal(err)
		}
		spec, _, err := convert(task, "task-1", ConvertOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return spec
	}
	one := conv(`{"executors":[{"image":"alpine","command":["true"]}]}`)
	two := conv(`{"executors":[{"image":"alpine","command":["true"]},{"image":"alpine","command":["echo","` + strings.Repeat("x", 5000) + `"]}]}`)
	var inputs []string
	for i := range 300 {
		inputs = append(inputs, fmt.Sprintf(`{"path":"/data/dir-%03d/in.txt","content":"x"}`, i))
	}
	mounts := conv(`{"executors":[{"image":"alpine","command":["true"]},{"image":"alpine","command":["true"]}],"inputs":[` + strings.Join(inputs, ",") + `]}`)
	for _, c := range []struct {
		name   string
		anchor int64
		task   *taskspec.Task
		want   int64
	}{
		{"no executor", 1000, &taskspec.Task{}, 1000 + footprintPerTask},
		{"one executor", 1000, one, 1000 + footprintPerTask + 2*job(one, 0) + footprintPerExecutor},
		{"the anchor counts whole", 900000, one, 900000 + footprintPerTask + 2*job(one, 0) + footprintPerExecutor},
		{"a long command twice", 1000, two, 1000 + footprintPerTask + 2*(job(two, 0)+job(two, 1)) + 2*footprintPerExecutor},
		{"300 mounts in each executor", 1000, mounts, 1000 + footprintPerTask + 2*(job(mounts, 0)+job(mounts, 1)) + 2*footprintPerExecutor},
	} {
		// What the handler adds is sized once, on the first executor's
		// Job: another's may differ by the bytes that encode the
		// lengths of the messages that hold it.
		slack := int64(8 * max(len(c.task.Executors)-1, 0))
		if got := Footprint(c.anchor, c.task, a, steps.DefaultConfig()); got < c.want-slack || got > c.want+slack {
			t.Errorf("%s: %d, want %d (± %d)", c.name, got, c.want, slack)
		}
	}
	// The long command is in the estimate twice; the mounts too.
	if d := Footprint(0, two, a, steps.DefaultConfig()) - Footprint(0, one, a, steps.DefaultConfig()); d < 2*5000 {
		t.Errorf("a second executor of a 5,000-byte argument adds %d bytes, want at least 10,000", d)
	}
	if d := job(mounts, 0) - job(one, 0); d < 300*20 {
		t.Errorf("300 mounts add %d bytes to an executor's Job", d)
	}
}

// TestDefaultBacklogSizing: the default bounds are sized for 100 users on
// etcd's default quota of 2 GiB (docs/operations.md): 100 users at the
// byte bound hold at most 800 MiB of unfinished tasks, as estimated, and
// the smallest task's estimate leaves room for 187 of them, under the
// bound of 200 tasks.
func TestDefaultBacklogSizing(t *testing.T) {
	b := DefaultBacklog()
	if b != (Backlog{Tasks: 200, Bytes: 8 << 20}) {
		t.Fatalf("DefaultBacklog() = %+v, want 200 tasks and 8 MiB", b)
	}
	if all := 100 * b.Bytes; all != 800<<20 || all > (2<<30)*2/5 {
		t.Errorf("100 users hold %d bytes at the bound, want 800 MiB, less than 40 %% of 2 GiB", all)
	}
	spec, _, err := convert(&tesv1.Task{Executors: []tesv1.Executor{{Image: "alpine", Command: []string{"true"}}}}, "task-ubmn4u1vs9f0b753d", ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	smallest := Footprint(700, spec, taskmeta.Anchor{Name: "task-ubmn4u1vs9f0b753d", Namespace: "tesk"}, steps.DefaultConfig())
	if n := b.Bytes / smallest; n < 180 || n > int64(b.Tasks) {
		t.Errorf("the byte bound holds %d of the smallest tasks (%d bytes each), want about 190, at most the bound of %d tasks", n, smallest, b.Tasks)
	}
}
