package taskmeta

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func podOf(phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "task-1234abcd-ex-00-x7k2q", CreationTimestamp: metav1.NewTime(t0)}, Status: corev1.PodStatus{Phase: phase}}
}

// waiting is a pending pod whose container (or init container) waits for
// the reason.
func waiting(reason string, init bool) *corev1.Pod {
	p := podOf(corev1.PodPending)
	cs := []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "details of " + reason}}}}
	if init {
		p.Status.InitContainerStatuses = cs
	} else {
		p.Status.ContainerStatuses = cs
	}
	return p
}

func unschedulablePod() *corev1.Pod {
	p := podOf(corev1.PodPending)
	p.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient cpu.",
	}}
	return p
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ job, task, part string }{
		{"task-1234abcd-inputs-filer", "task-1234abcd", PartInputsFiler},
		{"task-1234abcd-outputs-filer", "task-1234abcd", PartOutputsFiler},
		{"task-1234abcd-ex-07", "task-1234abcd", "ex-07"},
		{"task-1234abcd-ex-123", "task-1234abcd", "ex-123"},
	} {
		task, part, ok := SplitJobName(c.job)
		if !ok || task != c.task || part != c.part {
			t.Errorf("SplitJobName(%q) = %q, %q, %v", c.job, task, part, ok)
		}
		if ObjectName(task, part) != c.job {
			t.Errorf("ObjectName(%q, %q) = %q", task, part, ObjectName(task, part))
		}
	}
	for _, job := range []string{"task-1234abcd", "task-1234abcd-ex-1", "task-1234abcd-pvc", "-ex-00"} {
		if task, part, ok := SplitJobName(job); ok {
			t.Errorf("SplitJobName(%q) = %q, %q: not a task's job", job, task, part)
		}
	}
	if job, ok := JobOfPodName("task-1234abcd-ex-00-x7k2q"); !ok || job != "task-1234abcd-ex-00" {
		t.Errorf("JobOfPodName = %q, %v", job, ok)
	}
	if _, ok := JobOfPodName("task-1234abcd-ex-00"); ok {
		t.Error("a job's name taken for a pod's")
	}
	if i, ok := ExecutorIndex(ExecutorPart(12)); !ok || i != 12 {
		t.Errorf("ExecutorIndex(ExecutorPart(12)) = %d, %v", i, ok)
	}
	if _, ok := ExecutorIndex(PartInputsFiler); ok {
		t.Error("the inputs filer taken for an executor")
	}
}

func TestStatusOf(t *testing.T) {
	cases := []struct {
		name  string
		conds []batchv1.JobConditionType
		want  JobStatus
	}{
		{"behaviour §1.10: no condition is running", nil, JobRunning},
		{"behaviour §1.10: Failed is failed", []batchv1.JobConditionType{batchv1.JobFailed}, JobFailed},
		{"behaviour §1.10: FailureTarget is failed", []batchv1.JobConditionType{batchv1.JobFailureTarget}, JobFailed},
		{"behaviour §1.10: Complete is complete", []batchv1.JobConditionType{batchv1.JobComplete}, JobComplete},
		{"behaviour §1.10: SuccessCriteriaMet is complete", []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet}, JobComplete},
		{"behaviour §1.10: Suspended is running", []batchv1.JobConditionType{batchv1.JobSuspended}, JobRunning},
		{"behaviour §1.10: failed wins over complete", []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailureTarget}, JobFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cs []batchv1.JobCondition
			for _, ct := range c.conds {
				cs = append(cs, batchv1.JobCondition{Type: ct, Status: corev1.ConditionTrue})
			}
			if got := StatusOf(&batchv1.Job{Status: batchv1.JobStatus{Conditions: cs}}); got != c.want {
				t.Errorf("StatusOf = %v, want %v", got, c.want)
			}
		})
	}
}

func TestStuckReason(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		reason string
		stuck  bool
	}{
		{"ErrImagePull", waiting("ErrImagePull", false), "ErrImagePull", true},
		{"ImagePullBackOff of an init container", waiting("ImagePullBackOff", true), "ImagePullBackOff", true},
		{"InvalidImageName", waiting("InvalidImageName", false), "InvalidImageName", true},
		{"CreateContainerConfigError", waiting("CreateContainerConfigError", false), "CreateContainerConfigError", true},
		{"unschedulable", unschedulablePod(), corev1.PodReasonUnschedulable, true},
		{"ContainerCreating is not stuck", waiting("ContainerCreating", false), "", false},
		{"a running pod is not stuck", podOf(corev1.PodRunning), "", false},
		{"a pod being deleted is not stuck", func() *corev1.Pod {
			p := waiting("ErrImagePull", false)
			p.DeletionTimestamp = &p.CreationTimestamp
			return p
		}(), "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, _, stuck := StuckReason(c.pod)
			if reason != c.reason || stuck != c.stuck {
				t.Errorf("StuckReason = %q, %v; want %q, %v", reason, stuck, c.reason, c.stuck)
			}
		})
	}
}

func TestAnchor(t *testing.T) {
	cm := NewAnchor("ns", "task-1234abcd", []byte("gz"), AnchorInfo{})
	if !IsAnchor(cm.ObjectMeta) || cm.Namespace != "ns" || string(cm.BinaryData["JSON_INPUT.gz"]) != "gz" || cm.Annotations == nil {
		t.Errorf("anchor %+v", cm)
	}
	other := NewAnchor("ns", "task-1234abcd-filer-config", nil, AnchorInfo{})
	other.Labels[LabelTask] = "task-1234abcd"
	for _, m := range []metav1.ObjectMeta{other.ObjectMeta, {}, {Name: "x"}} {
		if IsAnchor(m) {
			t.Errorf("%q labelled %v is not an anchor", m.Name, m.Labels)
		}
	}
	var patch struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(CancelPatch(), &patch); err != nil || len(patch.Metadata.Labels) != 1 || patch.Metadata.Labels[LabelStatus] != StatusCancelled {
		t.Errorf("cancel patch %s: %v", CancelPatch(), err)
	}
}

func TestFormat(t *testing.T) {
	if f, err := FormatOf(NewAnchor("ns", "task-1234abcd", nil, AnchorInfo{}).ObjectMeta); err != nil || f != Format || Format != 1 {
		t.Errorf("a new anchor's format: %d %v, want %d", f, err, Format)
	}
	ann := func(v string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "task-1234abcd", Annotations: map[string]string{AnnotationFormat: v}}
	}
	cases := []struct {
		name   string
		meta   metav1.ObjectMeta
		format int    // 0: FormatOf fails
		check  string // part of CheckFormat's error; "" accepts
	}{
		{"no annotation", metav1.ObjectMeta{Name: "task-1234abcd"}, 1, ""},
		{"no annotations at all", metav1.ObjectMeta{Name: "task-1234abcd", Annotations: map[string]string{"other": "x"}}, 1, ""},
		{"1", ann("1"), 1, ""},
		{"newer", ann("2"), 2, "is recorded in format 2"},
		{"not a number", ann("v2"), 0, `is "v2", not a record format`},
		{"zero", ann("0"), 0, "not a record format"},
		{"empty", ann(""), 0, "not a record format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := FormatOf(c.meta)
			if (err != nil) != (c.format == 0) || f != c.format {
				t.Errorf("FormatOf = %d, %v; want %d", f, err, c.format)
			}
			err = CheckFormat(c.meta)
			switch {
			case c.check == "" && err != nil:
				t.Errorf("CheckFormat refused: %v", err)
			case c.check != "" && (err == nil || !strings.Contains(err.Error(), c.check) || !strings.Contains(err.Error(), "task-1234abcd")):
				t.Errorf("CheckFormat = %v, want an error naming the task and %q", err, c.check)
			}
		})
	}
}

// The notes that name a job read back as the job they name; no other note does.
func TestJobNotes(t *testing.T) {
	job := "task-1234abcd-ex-00"
	for _, c := range []struct {
		note, want string
	}{
		{JobCreatedNote(job), "Created job task-1234abcd-ex-00"},
		{JobFailedNote(job, "the task was cancelled"), "Failed job task-1234abcd-ex-00: the task was cancelled"},
		{JobDeletedNote(job, "the task was cancelled"), "Deleted job task-1234abcd-ex-00: the task was cancelled"},
	} {
		if c.note != c.want {
			t.Errorf("note %q, want %q", c.note, c.want)
		}
		if got, ok := ParseJobNote(c.note); !ok || got != job {
			t.Errorf("ParseJobNote(%q) = %q, %v", c.note, got, ok)
		}
	}
	for _, note := range []string{"Task started: pvc, ex-00", "Task cancelled", "Created job ", "created job " + job} {
		if got, ok := ParseJobNote(note); ok {
			t.Errorf("ParseJobNote(%q) = %q, want none", note, got)
		}
	}
}
