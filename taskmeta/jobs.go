package taskmeta

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// JobStatus is a job's state as its conditions give it (behaviour §1.10): Failed
// or FailureTarget is failed, Complete or SuccessCriteriaMet is complete;
// other conditions (e.g. Suspended) leave it running.
type JobStatus int

const (
	JobRunning JobStatus = iota
	JobComplete
	JobFailed
)

func (s JobStatus) String() string {
	return [...]string{"running", "complete", "failed"}[s]
}

// StatusOf returns a job's status.
func StatusOf(j *batchv1.Job) JobStatus {
	failed, complete := false, false
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			failed = true
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			complete = true
		}
	}
	switch {
	case failed:
		return JobFailed
	case complete:
		return JobComplete
	}
	return JobRunning
}

// Waiting reasons of a container that cannot start.
var cannotStartReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "CreateContainerConfigError": true,
}

// CannotStart returns the waiting reason and message of a container (or an
// init container) of the pod that cannot start, if one cannot.
func CannotStart(pod *corev1.Pod) (reason, message string) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && cannotStartReasons[w.Reason] {
				return w.Reason, w.Message
			}
		}
	}
	return "", ""
}

// StuckReason tells whether a pending pod cannot start (its image cannot be
// pulled, or its configuration is broken, for an init container too), or is
// not scheduled, with the waiting reason or the scheduler's message.
func StuckReason(pod *corev1.Pod) (reason, message string, stuck bool) {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return "", "", false
	}
	if reason, message := CannotStart(pod); reason != "" {
		return reason, message, true
	}
	if message, ok := Unschedulable(pod); ok {
		return corev1.PodReasonUnschedulable, message, true
	}
	return "", "", false
}

// Disrupted returns why the cluster took the pod away, if it did: the
// reason and message of its DisruptionTarget condition (an eviction, a
// preemption, the loss of its node), which Kubernetes sets before it
// stops the pod.
func Disrupted(pod *corev1.Pod) (reason, message string, ok bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason, c.Message, true
		}
	}
	return "", "", false
}

// PreemptedPods are the pods of an executor job the service counted as
// taken away by the cluster (AnnotationPreempted).
func PreemptedPods(j *batchv1.Job) []string {
	v := j.Annotations[AnnotationPreempted]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Unschedulable returns the scheduler's message for a pod it cannot place.
func Unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}

// IsMarkedFailed reports whether Kubernetes has marked the job Failed, which
// it does only once the job's pods have ended (after FailureTarget).
func IsMarkedFailed(j *batchv1.Job) bool {
	return HasCondition(j, batchv1.JobFailed)
}

// FailureSince is when the job first counted as failed.
func FailureSince(j *batchv1.Job) (time.Time, bool) {
	var t time.Time
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) {
			if t.IsZero() || c.LastTransitionTime.Time.Before(t) {
				t = c.LastTransitionTime.Time
			}
		}
	}
	return t, !t.IsZero()
}

func HasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// EndedByService reports whether the service failed the job itself (a pod
// that could not start, or was not scheduled in time): such a job stops the
// task even when its executor ignores errors, as its container may never have
// run. activeDeadlineSeconds 1 is the mark, also of a job failed by an
// earlier release.
func EndedByService(j *batchv1.Job) bool {
	if _, ok := j.Annotations[AnnotationFailed]; ok {
		return true
	}
	return j.Spec.ActiveDeadlineSeconds != nil && *j.Spec.ActiveDeadlineSeconds == 1
}

// FailedAt is when the service failed the job, if it did.
func FailedAt(j *batchv1.Job) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, j.Annotations[AnnotationFailedAt])
	return t, err == nil
}

// IgnoresErrors reports whether the executor's job has ignore-error: "true".
func IgnoresErrors(j *batchv1.Job) bool {
	return j.Annotations[AnnotationIgnoreError] == "true"
}

// IsGone reports whether the job is being deleted.
func IsGone(j *batchv1.Job) bool { return j.DeletionTimestamp != nil }

// OwnedBy reports whether the job belongs to the task's anchor.
func OwnedBy(j *batchv1.Job, anchor types.UID) bool {
	for _, o := range j.OwnerReferences {
		if o.UID == anchor {
			return true
		}
	}
	return false
}
