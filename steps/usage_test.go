package steps

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func TestUsage(t *testing.T) {
	at := func(s int) string { return t0.Add(time.Duration(s) * time.Second).UTC().Format(time.RFC3339) }
	jobs := map[string]*batchv1.Job{
		"inputs-filer": {ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}},
		"ex-00":        {ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(10 * time.Second))}},
	}
	req := Requested{CPUCores: 2, RAMGB: 1.5, DiskGB: 10}
	log := tesv1.TaskLog{EndTime: at(200), Logs: []tesv1.ExecutorLog{
		{StartTime: at(10), EndTime: at(70)},  // 60 s
		{StartTime: at(80), EndTime: at(100)}, // 20 s
		{StartTime: "", EndTime: ""},          // never started
	}}
	got := Usage(log, jobs, req, t0.Add(time.Hour))
	want := map[string]string{
		"usage.ex-00.wall_seconds": "60", "usage.ex-00.cpu_core_seconds": "120", "usage.ex-00.memory_gb_seconds": "90",
		"usage.ex-01.wall_seconds": "20", "usage.ex-01.cpu_core_seconds": "40", "usage.ex-01.memory_gb_seconds": "30",
		UsageWallSeconds: "80", UsageCPUCoreSeconds: "160", UsageMemoryGBSecs: "120", UsageDiskGBSeconds: "2000",
	}
	if len(got) != len(want) {
		t.Errorf("%d figures, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// A running executor and a task not ended count to now.
	running := tesv1.TaskLog{Logs: []tesv1.ExecutorLog{{StartTime: at(10)}}}
	got = Usage(running, jobs, req, t0.Add(40*time.Second))
	if got[UsageWallSeconds] != "30" || got[UsageDiskGBSeconds] != "400" {
		t.Errorf("running: %v", got)
	}
	// Nothing started: zeros, no disk.
	got = Usage(tesv1.TaskLog{}, nil, req, t0)
	if got[UsageWallSeconds] != "0" || got[UsageDiskGBSeconds] != "0" {
		t.Errorf("nothing started: %v", got)
	}
}
