package chaos

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// estimate is what the TES API counts of a generated task against
// TES_MAX_UNFINISHED_BYTES_PER_USER (tes.Footprint of its anchor).
func estimate(t *testing.T, task Task) int64 {
	t.Helper()
	body, err := json.Marshal(task.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tes.DecodeTask(body)
	if err == nil {
		err = tes.Validate(tk)
	}
	if err != nil {
		t.Fatalf("%s: %v", task.Name, err)
	}
	const id = "task-ubmn4u1vs9f0b753d"
	raw, err := tes.Convert(tk, id, tes.ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := taskspec.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := tes.BuildAnchor("chaos", id, tk, raw, tes.Caller{})
	if err != nil {
		t.Fatal(err)
	}
	return tes.Footprint(int64(cm.Size()), spec, taskmeta.Anchor{Name: id, Namespace: "chaos"}, steps.DefaultConfig())
}

// TestTESEnvAdmitsTheRun: the TES API of a chaos run admits all its tasks,
// submitted at once by its one user, where the default bounds of a user's
// unfinished tasks would refuse part of make chaos's 200.
func TestTESEnvAdmitsTheRun(t *testing.T) {
	for _, n := range []int{30, 200, 1000} {
		tasks := GenerateTasks(1, n)
		var all int64
		for _, task := range tasks {
			all += estimate(t, task)
		}
		bound := map[string]int64{}
		for _, kv := range tesEnv(n) {
			k, v, _ := strings.Cut(kv, "=")
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", kv, err)
			}
			bound[k] = x
		}
		if b, ok := bound["TES_MAX_UNFINISHED_TASKS_PER_USER"]; !ok || (b != 0 && b < int64(n)) {
			t.Errorf("%d tasks: TES_MAX_UNFINISHED_TASKS_PER_USER %d (set: %v), want at least %d or 0", n, b, ok, n)
		}
		if b, ok := bound["TES_MAX_UNFINISHED_BYTES_PER_USER"]; !ok || (b != 0 && b < all) {
			t.Errorf("%d tasks: TES_MAX_UNFINISHED_BYTES_PER_USER %d (set: %v), want at least their %d bytes or 0", n, b, ok, all)
		}
		if n == 200 && all <= tes.DefaultBacklog().Bytes {
			t.Errorf("200 tasks are estimated at %d bytes, within the default bound of %d: the run would not need its own", all, tes.DefaultBacklog().Bytes)
		}
		t.Logf("%d tasks: %d bytes as estimated, %d each", n, all, all/int64(n))
	}
}
