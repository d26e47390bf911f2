package steps

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// The view is behaviour §5.7's GET /tasks/{namespace}/{task}: the TES 1.1
// tesTask as the TESK API derives it from the cluster.

func TestBuildViewStates(t *testing.T) {
	started := func(parts ...string) *taskmeta.Progress {
		p := progressOf(fullParts, "ev", ago(10*time.Minute), parts...)
		return &p
	}
	ended := func(state, reason string) metav1.ObjectMeta {
		return anchorWith(started(fullParts...), taskmeta.AnnotationState, state, taskmeta.AnnotationEnded, rfc(ago(time.Minute)), taskmeta.AnnotationReason, reason)
	}
	cases := []struct {
		name   string
		anchor metav1.ObjectMeta
		jobs   map[string]*batchv1.Job
		pods   []*corev1.Pod
		state  string
		sys    []string
	}{
		{"a submitted task not started yet is QUEUED", anchorWith(nil), nil, nil, tesv1.StateQueued, nil},
		{"a task whose inputs filer runs is INITIALIZING", anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler)),
			jobsOf(running(taskmeta.PartInputsFiler)), pods(runningPod(taskmeta.PartInputsFiler, ago(time.Minute), ago(time.Minute))), tesv1.StateInitializing, nil},
		{"a task whose executor runs is RUNNING", anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
			jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")), pods(runningPod("ex-00", ago(time.Minute), ago(time.Minute))), tesv1.StateRunning, nil},
		{"a task whose executor's pod waits to be scheduled is QUEUED", anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
			jobsOf(completed(taskmeta.PartInputsFiler), running("ex-00")), pods(unschedulablePod("ex-00", ago(time.Minute))), tesv1.StateQueued, nil},
		{"a completed task is COMPLETE", ended(tesv1.StateComplete, ""), nil, nil, tesv1.StateComplete, nil},
		{"a task whose executor failed is EXECUTOR_ERROR, with why", ended(tesv1.StateExecutorError, "Job 'x' failed"), nil, nil, tesv1.StateExecutorError, []string{"Job 'x' failed"}},
		{"a task stopped by the system is SYSTEM_ERROR, with why", ended(tesv1.StateSystemError, "Job 'x' was deleted while it ran"), nil, nil, tesv1.StateSystemError, []string{"Job 'x' was deleted while it ran"}},
		{"a cancelled task whose jobs are going is CANCELING", cancelled(anchorWith(started(taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
			jobsOf(completed(taskmeta.PartInputsFiler), deleting(running("ex-00"))), nil, tesv1.StateCanceling, nil},
		{"a cancelled task is CANCELED", ended(tesv1.StateCanceled, "Task cancelled"), nil, nil, tesv1.StateCanceled, []string{"Task cancelled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := BuildView(c.anchor, c.jobs, c.pods, DefaultConfig(), t0)
			if v.ID != testTask || v.State != c.state {
				t.Errorf("id %s state %s, want %s %s", v.ID, v.State, testTask, c.state)
			}
			if len(v.Logs) != 1 {
				t.Fatalf("%d task logs, want 1", len(v.Logs))
			}
			if !reflect.DeepEqual(v.Logs[0].SystemLogs, c.sys) {
				t.Errorf("system_logs %q, want %q", v.Logs[0].SystemLogs, c.sys)
			}
			if v.CreationTime != rfc(c.anchor.CreationTimestamp.Time) || v.Logs[0].StartTime != v.CreationTime {
				t.Errorf("creation_time %q start_time %q", v.CreationTime, v.Logs[0].StartTime)
			}
			if end := c.anchor.Annotations[taskmeta.AnnotationEnded]; v.Logs[0].EndTime != end {
				t.Errorf("end_time %q, want %q", v.Logs[0].EndTime, end)
			}
		})
	}
}

func TestBuildViewExecutors(t *testing.T) {
	ex0Start, ex0End := ago(20*time.Minute), ago(15*time.Minute)
	ex1Start, ex1End := ago(9*time.Minute), ago(8*time.Minute)
	ex2Start := ago(3 * time.Minute)
	anchor := anchorWith(ptr(progressOf([]string{"ex-00", "ex-01", "ex-02"}, "ev", ago(5*time.Minute), "ex-00", "ex-01", "ex-02")))
	jobs := jobsOf(completed("ex-00"), ignoring(failed("ex-01")), running("ex-02"))
	ps := pods(
		terminatedPod("ex-00", ago(21*time.Minute), ex0Start, ex0End, 0),
		// ex-01 ran twice (a retry): the last pod's exit code counts.
		terminatedPod("ex-01", ago(12*time.Minute), ago(12*time.Minute), ago(11*time.Minute), 1),
		terminatedPod("ex-01", ago(10*time.Minute), ex1Start, ex1End, 3),
		runningPod("ex-02", ago(4*time.Minute), ex2Start),
	)
	v := BuildView(anchor, jobs, ps, DefaultConfig(), t0)
	want := []tesv1.ExecutorLog{
		{StartTime: rfc(ex0Start), EndTime: rfc(ex0End), ExitCode: 0},
		{StartTime: rfc(ex1Start), EndTime: rfc(ex1End), ExitCode: 3},
		{StartTime: rfc(ex2Start)},
	}
	if got := v.Logs[0].Logs; !reflect.DeepEqual(got, want) {
		t.Errorf("executor logs\n%s\nwant\n%s", show(got), show(want))
	}
	if v.State != tesv1.StateRunning {
		t.Errorf("state %s", v.State)
	}
}

// TestBuildViewExecutorWaitingForItsPod: an executor's job exists before
// its pod does (a ResourceQuota refuses the Job controller's creates, the
// Job's FailedCreate Events say "exceeded quota"), and its pod may wait for a
// node or its image. Until its container started, the task is QUEUED (no
// pod, or one the scheduler cannot place), the executor has no log (TES
// requires an exit_code, which it does not have yet), and no time is
// counted for it: not from the Job's start, which the Job controller sets
// without any pod.
func TestBuildViewExecutorWaitingForItsPod(t *testing.T) {
	anchor := anchorWith(ptr(progressOf([]string{"ex-00"}, "ev", ago(5*time.Minute), "ex-00")))
	started, ended := ago(2*time.Minute), ago(time.Minute)
	refused := jobOf("ex-00") // the Job controller set its start; no pod active
	retrying := running("ex-00")
	retrying.Status.Active, retrying.Status.Failed = 0, 1
	failedWithoutPod := jobOf("ex-00", cond(batchv1.JobFailed, ended))
	cases := []struct {
		name  string
		job   *batchv1.Job
		pods  []*corev1.Pod
		state string
		logs  []tesv1.ExecutorLog
		cpu   string // usage.cpu_core_seconds, 2 cores asked for
	}{
		{"no pod: its creates refused (exceeded quota)", refused, pods(), tesv1.StateQueued, []tesv1.ExecutorLog{}, "0"},
		{"a pod pending, its image being pulled", running("ex-00"), pods(waiting("ex-00", ago(time.Minute), ago(time.Minute), "ContainerCreating", false)), tesv1.StateRunning, []tesv1.ExecutorLog{}, "0"},
		{"a pod pending, not scheduled", running("ex-00"), pods(unschedulablePod("ex-00", ago(time.Minute))), tesv1.StateQueued, []tesv1.ExecutorLog{}, "0"},
		{"a pod running", running("ex-00"), pods(runningPod("ex-00", ago(3*time.Minute), started)), tesv1.StateRunning,
			[]tesv1.ExecutorLog{{StartTime: rfc(started)}}, "240"},
		{"its pod succeeded", completed("ex-00"), pods(terminatedPod("ex-00", ago(3*time.Minute), started, ended, 0)), tesv1.StateRunning,
			[]tesv1.ExecutorLog{{StartTime: rfc(started), EndTime: rfc(ended)}}, "120"},
		{"a pod that ran is gone, its retry not created yet: still RUNNING, from the job's start", retrying, pods(), tesv1.StateRunning,
			[]tesv1.ExecutorLog{{StartTime: rfc(retrying.Status.StartTime.Time)}}, "3600"},
		{"failed without a pod ever (its deadline passed): an unknown exit code, no start, nothing counted", failedWithoutPod, pods(), tesv1.StateRunning,
			[]tesv1.ExecutorLog{{EndTime: rfc(ended), ExitCode: UnknownExitCode}}, "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs := jobsOf(c.job)
			v := BuildView(anchor, jobs, c.pods, DefaultConfig(), t0)
			if v.State != c.state {
				t.Errorf("state %s, want %s", v.State, c.state)
			}
			if got := v.Logs[0].Logs; !reflect.DeepEqual(got, c.logs) {
				t.Errorf("executor logs [%s], want [%s]", show(got), show(c.logs))
			}
			if got := Usage(v.Logs[0], jobs, Requested{CPUCores: 2}, t0)[UsageCPUCoreSeconds]; got != c.cpu {
				t.Errorf("%s %s, want %s", UsageCPUCoreSeconds, got, c.cpu)
			}
		})
	}
}

// A later executor's job without its pod yet (between two executors, or
// its creates refused) leaves the task RUNNING: an executor ran before
// it, and the state does not go back to QUEUED.
func TestBuildViewLaterExecutorWithoutItsPod(t *testing.T) {
	anchor := anchorWith(ptr(progressOf([]string{"ex-00", "ex-01"}, "ev", ago(5*time.Minute), "ex-00", "ex-01")))
	started, ended := ago(3*time.Minute), ago(2*time.Minute)
	jobs := jobsOf(completed("ex-00"), jobOf("ex-01"))
	v := BuildView(anchor, jobs, pods(terminatedPod("ex-00", ago(4*time.Minute), started, ended, 0)), DefaultConfig(), t0)
	if v.State != tesv1.StateRunning {
		t.Errorf("state %s, want %s", v.State, tesv1.StateRunning)
	}
	if got := v.Logs[0].Logs; len(got) != 1 || got[0].ExitCode != 0 || got[0].EndTime != rfc(ended) {
		t.Errorf("executor logs [%s], want ex-00's alone, ended", show(got))
	}
	// The first executor's, after the inputs filer ran: RUNNING too.
	afterInputs := anchorWith(ptr(progressOf([]string{taskmeta.PartInputsFiler, "ex-00"}, "ev", ago(5*time.Minute), taskmeta.PartInputsFiler, "ex-00")))
	v = BuildView(afterInputs, jobsOf(completed(taskmeta.PartInputsFiler), jobOf("ex-00")), pods(), DefaultConfig(), t0)
	if v.State != tesv1.StateRunning {
		t.Errorf("the first executor's job without its pod after the inputs filer: state %s, want %s", v.State, tesv1.StateRunning)
	}
}

// TestBuildViewExecutorsOutlivePods: an executor's log comes from the
// record its end left on its job, whatever its pods say, and without pods;
// an ended job without record or pod has the exit code it must have had (0
// for a completed one) or UnknownExitCode, and an end time.
func TestBuildViewExecutorsOutlivePods(t *testing.T) {
	anchor := anchorWith(ptr(progressOf([]string{"ex-00", "ex-01", "ex-02"}, "ev", ago(5*time.Minute), "ex-00", "ex-01", "ex-02")))
	rec := tesv1.ExecutorLog{StartTime: rfc(ago(9 * time.Minute)), EndTime: rfc(ago(8 * time.Minute)), ExitCode: 2, Stdout: "out\n", Stderr: "err\n"}
	b, _ := json.Marshal(rec)
	failedJob := ignoring(failed("ex-01"))
	jobs := jobsOf(annotate(ignoring(failed("ex-00")), taskmeta.AnnotationExecutorLog, string(b)), failedJob, completed("ex-02"))
	// A pod of ex-00 that says otherwise is not read: the record wins.
	ps := pods(terminatedPod("ex-00", ago(10*time.Minute), ago(10*time.Minute), ago(9*time.Minute), 7))
	v := BuildView(anchor, jobs, ps, DefaultConfig(), t0)
	got := v.Logs[0].Logs
	if len(got) != 3 {
		t.Fatalf("executor logs %s, want 3", show(got))
	}
	if !reflect.DeepEqual(got[0], rec) {
		t.Errorf("ex-00 %s, want the record %s", show(got[:1]), show([]tesv1.ExecutorLog{rec}))
	}
	if got[1].ExitCode != UnknownExitCode || got[1].EndTime == "" {
		t.Errorf("ex-01 (failed, no pod, no record) %s, want exit code %d and an end time", show(got[1:2]), UnknownExitCode)
	}
	if got[2].ExitCode != 0 || got[2].EndTime == "" {
		t.Errorf("ex-02 (completed, no pod) %s, want exit code 0 and an end time", show(got[2:]))
	}
	t.Run("an unreadable record: read as if there were none", func(t *testing.T) {
		jobs := jobsOf(annotate(completed("ex-00"), taskmeta.AnnotationExecutorLog, "{"))
		v := BuildView(anchor, jobs, ps, DefaultConfig(), t0)
		if l := v.Logs[0].Logs; len(l) != 1 || l[0].ExitCode != 7 {
			t.Errorf("executor logs %s, want the pod's exit code 7", show(l))
		}
	})
}

// TestBuildViewExecutorOrder: the executors are listed in their order, also
// past ex-99.
func TestBuildViewExecutorOrder(t *testing.T) {
	const n = 102
	var parts []string
	var js []*batchv1.Job
	var ps []*corev1.Pod
	for i := 0; i < n; i++ {
		part := taskmeta.ExecutorPart(i)
		parts = append(parts, part)
		js = append(js, completed(part))
		ps = append(ps, terminatedPod(part, ago(time.Hour), ago(time.Hour), ago(time.Hour), int32(i%256)))
	}
	anchor := anchorWith(ptr(progressOf(parts, "ev", ago(time.Minute), parts...)))
	v := BuildView(anchor, jobsOf(js...), ps, DefaultConfig(), t0)
	if len(v.Logs[0].Logs) != n {
		t.Fatalf("%d executor logs, want %d", len(v.Logs[0].Logs), n)
	}
	for i, l := range v.Logs[0].Logs {
		if l.ExitCode != int32(i%256) {
			t.Fatalf("executor log %d is %s, want executor %d's", i, show([]tesv1.ExecutorLog{l}), i)
		}
	}
}

func TestBuildViewOutputs(t *testing.T) {
	files := []tesv1.OutputFileLog{{URL: "s3://b/out.txt", Path: "/data/out/out.txt", SizeBytes: "5"}}
	anchor := anchorWith(ptr(progressOf(fullParts, "ev", ago(time.Hour), fullParts...)), taskmeta.AnnotationState, tesv1.StateComplete, taskmeta.AnnotationEnded, rfc(ago(time.Minute)))
	outputs := annotate(completed(taskmeta.PartOutputsFiler), taskmeta.AnnotationOutputFileLogs, `[{"url":"s3://b/out.txt","path":"/data/out/out.txt","size_bytes":"5"}]`)
	v := BuildView(anchor, jobsOf(completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), outputs), nil, DefaultConfig(), t0)
	if !reflect.DeepEqual(v.Logs[0].Outputs, files) {
		t.Errorf("outputs %+v, want %+v", v.Logs[0].Outputs, files)
	}

	t.Run("an unreadable annotation gives no outputs", func(t *testing.T) {
		outputs := annotate(completed(taskmeta.PartOutputsFiler), taskmeta.AnnotationOutputFileLogs, `{broken`)
		v := BuildView(anchor, jobsOf(outputs), nil, DefaultConfig(), t0)
		if v.Logs[0].Outputs == nil || len(v.Logs[0].Outputs) != 0 {
			t.Errorf("outputs %+v, want an empty list", v.Logs[0].Outputs)
		}
	})
	t.Run("no outputs filer: an empty list, not null", func(t *testing.T) {
		v := BuildView(anchorWith(nil), nil, nil, DefaultConfig(), t0)
		if v.Logs[0].Outputs == nil || v.Logs[0].Logs == nil {
			t.Errorf("outputs %v logs %v, want empty lists", v.Logs[0].Outputs, v.Logs[0].Logs)
		}
	})
}
