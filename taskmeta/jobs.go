package taskmeta

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

// Unschedulable returns the scheduler's message for a pod it cannot place.
func Unschedulable(pod *corev1.Pod) (string, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.Message, true
		}
	}
	return "", false
}
