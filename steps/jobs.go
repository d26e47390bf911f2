package steps

import (
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IsMarkedFailed reports whether Kubernetes has marked the job Failed, which
// it does only once the job's pods have ended (after FailureTarget).
func IsMarkedFailed(j *batchv1.Job) bool {
	return hasCondition(j, batchv1.JobFailed)
}

// failureSince is when the job first counted as failed.
func failureSince(j *batchv1.Job) (time.Time, bool) {
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

func hasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
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
	if _, ok := j.Annotations[taskmeta.AnnotationFailed]; ok {
		return true
	}
	return j.Spec.ActiveDeadlineSeconds != nil && *j.Spec.ActiveDeadlineSeconds == 1
}

// failedAt is when the service failed the job, if it did.
func failedAt(j *batchv1.Job) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, j.Annotations[taskmeta.AnnotationFailedAt])
	return t, err == nil
}

// IgnoresErrors reports whether the executor's job has ignore-error: "true".
func IgnoresErrors(j *batchv1.Job) bool {
	return j.Annotations[taskmeta.AnnotationIgnoreError] == "true"
}

// isGone reports whether the job is being deleted.
func isGone(j *batchv1.Job) bool { return j.DeletionTimestamp != nil }

// ownedBy reports whether the job belongs to the task's anchor.
func ownedBy(j *batchv1.Job, anchor types.UID) bool {
	for _, o := range j.OwnerReferences {
		if o.UID == anchor {
			return true
		}
	}
	return false
}
