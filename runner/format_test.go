package runner

import (
	"errors"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/elixir-cloud-aai/tesk-knative/internal/fixture"
	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// format1Task is the task of testdata/anchor-format-1.yaml.
const format1Task = "task-0f1e2d3c"

// loadFormat1 reads testdata/anchor-format-1.yaml: a task's anchor and its
// jobs as the record format 1 writes them, frozen.
func loadFormat1(t *testing.T) (*corev1.ConfigMap, []*batchv1.Job) {
	t.Helper()
	objs, err := fixture.Objects("../testdata/anchor-format-1.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	var jobs []*batchv1.Job
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			cm = o
		case *batchv1.Job:
			jobs = append(jobs, o)
		default:
			t.Fatalf("testdata: unexpected %T", o)
		}
	}
	if cm == nil || cm.Name != format1Task || len(jobs) != 3 {
		t.Fatalf("testdata: anchor %v and %d jobs, want %s and 3", cm != nil, len(jobs), format1Task)
	}
	return cm, jobs
}

// format1RunningPod is the pod of the fixture's second executor, its
// container started at 10:00:45.
func format1RunningPod(ns string) *corev1.Pod {
	job := format1Task + "-ex-01"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job + "-x7k2q", Namespace: ns, CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 42, 0, time.UTC)),
			Labels: map[string]string{taskmeta.LabelTask: format1Task, batchv1.JobNameLabel: job}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: job,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 45, 0, time.UTC))}}}}},
	}
}

func format1Objects(cm *corev1.ConfigMap, jobs []*batchv1.Job) []runtime.Object {
	objs := []runtime.Object{cm.DeepCopy()}
	for _, j := range jobs {
		objs = append(objs, j.DeepCopy())
	}
	return objs
}

// The anchor and jobs of the record format 1, as an older version wrote
// them (without the format annotation), are read by the decision, the
// view, the sweep and a step: a change that cannot read them fails here.
func TestReadsRecordFormat1(t *testing.T) {
	cm, jobs := loadFormat1(t)
	if _, ok := cm.Annotations[taskmeta.AnnotationFormat]; ok {
		t.Fatal("the fixture carries a format annotation: it is the format 1 as written before the annotation")
	}
	now := time.Date(2026, 1, 5, 10, 1, 0, 0, time.UTC)
	cfg := steps.DefaultConfig()
	cfg.Namespace = cm.Namespace
	byPart := map[string]*batchv1.Job{}
	for _, j := range jobs {
		_, part, _ := taskmeta.SplitJobName(j.Name)
		byPart[part] = j
	}

	// The second executor runs: nothing to do. Its pod and its Job's count
	// of it, which Kubernetes writes, are not in the fixture.
	running := format1RunningPod(cm.Namespace)
	byPart["ex-01"].Status.Active = 1
	plan := steps.Decide(steps.Observed{Anchor: cm.ObjectMeta, Jobs: byPart, Pods: []*corev1.Pod{running}}, cfg, now)
	if plan.State != tesv1.StateRunning || plan.Progress != nil || len(plan.Actions) != 0 || plan.Final != nil {
		t.Errorf("running: %+v, want RUNNING and nothing to do", plan)
	}

	// The view: RUNNING, both executors in order, the first's recorded end.
	v := steps.BuildView(cm.ObjectMeta, byPart, []*corev1.Pod{running}, cfg, now)
	if v.State != tesv1.StateRunning || v.ID != format1Task || len(v.Logs) != 1 || len(v.Logs[0].Logs) != 2 {
		t.Fatalf("view %+v, want RUNNING with two executor logs", v)
	}
	if l := v.Logs[0].Logs[0]; l.ExitCode != 0 || l.StartTime != "2026-01-05T10:00:22Z" || l.EndTime != "2026-01-05T10:00:40Z" {
		t.Errorf("first executor's log %+v, want exit 0 from 10:00:22 to 10:00:40", l)
	}
	if l := v.Logs[0].Logs[1]; l.EndTime != "" || l.StartTime != "2026-01-05T10:00:45Z" {
		t.Errorf("second executor's log %+v, want its container's start and no end yet", l)
	}

	// The sweep counts it and finds nothing due.
	counts := steps.NewTaskCounts()
	swept := map[string][]steps.SweptJob{}
	for _, j := range jobs {
		swept[format1Task] = append(swept[format1Task], steps.Swept(j))
	}
	unstarted, due, skipped := steps.SweepPage([]metav1.ObjectMeta{cm.ObjectMeta}, swept, nil, cfg, now, "sweep-1", counts)
	if len(unstarted)+len(due)+len(skipped) != 0 || counts.States[tesv1.StateRunning] != 1 || counts.Tasks() != 1 {
		t.Errorf("sweep: unstarted %v due %v skipped %v counts %v, want one RUNNING task, nothing due", unstarted, due, skipped, counts.States)
	}

	// The second executor ends: its log is recorded, the outputs filer starts.
	api := newFakeAPI(t, format1Objects(cm, jobs)...)
	ex01 := api.jobNamed(t, cm.Namespace, format1Task+"-ex-01")
	ex01.Status = batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{taskfixtures.Cond(batchv1.JobSuccessCriteriaMet, now), taskfixtures.Cond(batchv1.JobComplete, now)}}
	if _, err := api.BatchV1().Jobs(cm.Namespace).UpdateStatus(testCtx(t), ex01, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := testRunner(api, cfg)
	res, err := r.Reconcile(testCtx(t), cm.Namespace, format1Task, Options{Event: "ev-4", Job: ex01.Name})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != tesv1.StateRunning || !slices.Contains(res.Actions, steps.Action{Kind: steps.CreateJob, Part: taskmeta.PartOutputsFiler}) {
		t.Errorf("step after the last executor: %+v, want the outputs filer created", res)
	}
	after, err := api.CoreV1().ConfigMaps(cm.Namespace).Get(testCtx(t), format1Task, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := taskmeta.ParseProgress(after.Annotations[taskmeta.AnnotationProgress])
	if err != nil || !prog.IsDone("ex-01") || !slices.Contains(prog.Started, taskmeta.PartOutputsFiler) {
		t.Errorf("progress after the step %+v (%v), want ex-01 done and the outputs filer started", prog, err)
	}
	if _, err := api.BatchV1().Jobs(cm.Namespace).Get(testCtx(t), format1Task+"-outputs-filer", metav1.GetOptions{}); err != nil {
		t.Errorf("outputs filer: %v", err)
	}
}

// An anchor of a record format newer than the code knows is not acted on:
// a step and a cancellation are refused as bad input (not delivered again)
// and write nothing, the view says why, the sweep neither counts nor steps
// it. So is an anchor whose format annotation does not parse.
func TestNewerRecordFormatIsLeftAlone(t *testing.T) {
	for _, format := range []string{"2", "x"} {
		t.Run(format, func(t *testing.T) {
			cm, jobs := loadFormat1(t)
			cm.Annotations[taskmeta.AnnotationFormat] = format
			cm.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled // a cancel would be due
			cfg := steps.DefaultConfig()
			cfg.Namespace = cm.Namespace
			cfg.TaskTTL = ptrTo(time.Second)
			api := newFakeAPI(t, format1Objects(cm, jobs)...)
			r := testRunner(api, cfg)
			ctx := testCtx(t)
			for name, step := range map[string]func() error{
				"job.finished": func() error {
					_, err := r.Reconcile(ctx, cm.Namespace, format1Task, Options{Event: "ev-9", Job: format1Task + "-ex-01"})
					return err
				},
				"pods": func() error {
					_, err := r.Reconcile(ctx, cm.Namespace, format1Task, Options{Event: "ev-9", Pods: true})
					return err
				},
				"task.submitted": func() error {
					_, err := r.Submit(ctx, cm.Namespace, format1Task, nil, "ev-9")
					return err
				},
				"task.cancelled": func() error {
					_, err := r.Cancel(ctx, cm.Namespace, format1Task, "ev-9")
					return err
				},
			} {
				if err := step(); !invalid.Is(err) || errors.Is(err, ErrUnknownTask) {
					t.Errorf("%s: %v, want bad input (no redelivery)", name, err)
				}
			}
			if _, err := r.View(ctx, cm.Namespace, format1Task); err == nil {
				t.Error("view of a task this version cannot read: no error")
			}
			for _, a := range api.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					t.Errorf("wrote %s %s %s", a.GetVerb(), a.GetResource().Resource, actionName(a))
				}
			}
			counts := steps.NewTaskCounts()
			unstarted, due, skipped := steps.SweepPage([]metav1.ObjectMeta{cm.ObjectMeta}, nil, nil, cfg, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "sweep-1", counts)
			if len(unstarted)+len(due) != 0 || len(skipped) != 1 || counts.Tasks() != 0 {
				t.Errorf("sweep: unstarted %v due %v skipped %v counted %d, want it skipped and not counted", unstarted, due, skipped, counts.Tasks())
			}
		})
	}
}

func (f *fakeAPI) jobNamed(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := f.BatchV1().Jobs(ns).Get(testCtx(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}
