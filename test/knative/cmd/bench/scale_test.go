package main

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
)

// TestScaleBacklog: the scale run's TES API admits its n tasks, one user's
// created at once, which its default bounds of a user's unfinished tasks
// would not (a task of three executors is estimated at about 68 KB, 8 MiB
// holds about 124 of them).
func TestScaleBacklog(t *testing.T) {
	body, err := json.Marshal(scaleTask(0))
	if err != nil {
		t.Fatal(err)
	}
	task, err := tes.DecodeTask(body)
	if err == nil {
		err = tes.Validate(task)
	}
	if err != nil {
		t.Fatal(err)
	}
	const id = "task-ubmn4u1vs9f0b753d"
	raw, err := tes.Convert(task, id, tes.ConvertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := taskspec.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := tes.BuildAnchor("tesk-tasks", id, task, raw, tes.Caller{Label: "bench", Subject: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	each := tes.Footprint(int64(cm.Size()), spec, steps.Anchor{Name: id, Namespace: "tesk-tasks"}, steps.DefaultConfig())
	if fit := tes.DefaultBacklog().Bytes / each; fit >= 250 || fit < 100 {
		t.Errorf("the default byte bound holds %d tasks of %d bytes: the scale run's 250 would need no bounds of their own", fit, each)
	}
	for _, n := range []int{250, 1000, 10000} {
		var patch struct{ Data map[string]string }
		if err := json.Unmarshal([]byte(scaleBacklog(n)), &patch); err != nil {
			t.Fatal(err)
		}
		tasks, errT := strconv.Atoi(patch.Data["TES_MAX_UNFINISHED_TASKS_PER_USER"])
		bytes, errB := strconv.ParseInt(patch.Data["TES_MAX_UNFINISHED_BYTES_PER_USER"], 10, 64)
		if errT != nil || (tasks != 0 && tasks < n) {
			t.Errorf("%d tasks: TES_MAX_UNFINISHED_TASKS_PER_USER %q, want at least %d or 0", n, patch.Data["TES_MAX_UNFINISHED_TASKS_PER_USER"], n)
		}
		if errB != nil || (bytes != 0 && bytes < int64(n)*each) {
			t.Errorf("%d tasks: TES_MAX_UNFINISHED_BYTES_PER_USER %q, want at least %d or 0", n, patch.Data["TES_MAX_UNFINISHED_BYTES_PER_USER"], int64(n)*each)
		}
		// Created at once by 16 clients: a rate below n a minute would
		// answer the rest 429 until the bench's retries give up.
		if rate, err := strconv.Atoi(patch.Data["TES_CREATE_RATE_PER_USER"]); err != nil || (rate != 0 && rate < n) {
			t.Errorf("%d tasks: TES_CREATE_RATE_PER_USER %q, want 0 (no limit) or at least %d", n, patch.Data["TES_CREATE_RATE_PER_USER"], n)
		}
	}
	t.Logf("a scale task is estimated at %d bytes; 8 MiB holds %d", each, tes.DefaultBacklog().Bytes/each)
}
