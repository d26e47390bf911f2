// Package taskmeta is the task's model as the cluster holds it, shared by the
// event decoder, the handler's steps, the sweep and the TES API: the names,
// labels, annotations and data keys of a task's objects; the anchor (built,
// recognised, cancelled, its record format); the progress record and the TTL
// on it; the notes of the Kubernetes Events on it that name a job; a job's
// status and marks as its conditions and annotations give them; and why a
// pending pod is stuck. Of the project it imports only taskspec, for the key
// of the task JSON on the anchor.
package taskmeta

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Labels and annotations, as TESK's tooling knows them.
const (
	LabelTask       = "taskmaster-name"
	LabelJobType    = "job-type"
	LabelExecutorNo = "executor-no"
	LabelStatus     = "task-status"
	StatusCancelled = "Cancelled"
	JobTypeExecutor = "executor"

	AnnotationIgnoreError    = "ignore-error"
	AnnotationOutputFileLogs = "output-file-logs"

	// LabelCreator (anchor, executor jobs) is the label-safe form of the
	// user who created the task, as the TESK API writes it.
	LabelCreator = "creator-user-id"
	// AnnotationTaskName (anchor, executor jobs) is the task's TES name.
	AnnotationTaskName = "tes-task-name"
)

// The service's own annotations: the task's progress on its anchor, and the
// marks it leaves on jobs it ended itself.
const (
	AnnotationPrefix = "tesk.ga4gh.org/"
	// AnnotationFormat (anchor) is the record format the task is written
	// in (Format); none means 1.
	AnnotationFormat = AnnotationPrefix + "format"
	// AnnotationProgress (anchor) records what was started, before it is
	// started, and what the service deleted, before it deletes it.
	AnnotationProgress = AnnotationPrefix + "progress"
	// AnnotationState (anchor) is the task's final TES state, once it ended.
	AnnotationState = AnnotationPrefix + "state"
	// AnnotationEnded (anchor) is when the task ended (RFC 3339).
	AnnotationEnded = AnnotationPrefix + "ended"
	// AnnotationReason (anchor) says why the task stopped (TES system_logs).
	AnnotationReason = AnnotationPrefix + "reason"
	// AnnotationPVCLeft (anchor) is why the PVC of a task that ended could
	// not be deleted at its end: each sweep deletes it again until it goes,
	// and then removes the annotation.
	AnnotationPVCLeft = AnnotationPrefix + "pvc-left"
	// AnnotationStateEventsOwed (anchor) lists the task's state changes
	// whose events could not be delivered (JSON: old, new, time), in
	// order: each sweep tells them again, and removes those told.
	AnnotationStateEventsOwed = AnnotationPrefix + "state-events-owed"
	// AnnotationSystemLog (anchor) is a line the task's system_logs show
	// from its start (e.g. the backend parameters the TES API ignored).
	AnnotationSystemLog = AnnotationPrefix + "system-log"
	// AnnotationTTL (anchor) is the task's TTL in seconds (NoTTL for no
	// TTL), fixed by the first write on the task (TASK_TTL_SECONDS then):
	// TTLValue writes it, TaskTTLOf reads it.
	AnnotationTTL = AnnotationPrefix + "ttl-seconds"
	// AnnotationExecutorLog (executor job) is the executor's TES log as the
	// step that saw the job end recorded it: exit code, times, and the ends
	// of stdout and stderr (JSON), so that they outlive the job's pods.
	AnnotationExecutorLog = AnnotationPrefix + "executor-log"
	// AnnotationFailed (job) says why and when the service failed the job.
	AnnotationFailed = AnnotationPrefix + "failed"
	// AnnotationFailedState (job) is the final state the task takes when the
	// service failed the job for a cause other than the job's own
	// (PREEMPTED); none means the part's failure state.
	AnnotationFailedState = AnnotationPrefix + "failed-state"
	// AnnotationPreempted (executor job) lists the job's pods the cluster
	// took away (DisruptionTarget: evicted, preempted, lost with their
	// node), comma-separated, as the service counted them.
	AnnotationPreempted = AnnotationPrefix + "preempted"
	// AnnotationFailedAt (job) is when the service failed the job (RFC 3339).
	AnnotationFailedAt = AnnotationPrefix + "failed-at"
	// AnnotationCreator (anchor) is the subject that created the task
	// through the TES API (LabelCreator is its label-safe form).
	AnnotationCreator = AnnotationPrefix + "creator"
	// AnnotationSubmittedBy (anchor) is SubmittedByTESAPI on a task the
	// TES API created: the sweep starts it if its task.submitted event is
	// lost.
	AnnotationSubmittedBy = AnnotationPrefix + "submitted-by"
	// AnnotationTags (anchor) holds the task's TES tags as JSON, for the
	// TES API's list to filter by.
	AnnotationTags = AnnotationPrefix + "tags"
	// AnnotationSize (anchor) is, in bytes, the TES API's estimate at the
	// task's create of what the task keeps in etcd at its peak: its anchor
	// as created, its executors' Jobs and Pods, its PVC, its filers and
	// its Events (tes.Footprint), for the TES API to sum a user's
	// unfinished tasks from their anchors' metadata. An anchor an earlier
	// version created holds its own size there.
	AnnotationSize = AnnotationPrefix + "size"
)

// SubmittedByTESAPI is the value of AnnotationSubmittedBy on the anchors the
// TES API writes.
const SubmittedByTESAPI = "tes-api"

// TESTaskKey (anchor, BinaryData) holds the TES task as submitted to the TES
// API (gzipped JSON), for its BASIC and FULL views; the task JSON is under
// taskspec.ConfigMapKey.
const TESTaskKey = "TES_TASK.gz"

// The service's own labels on an anchor, for the TES API's list to select
// by on the API server.
const (
	// LabelState (anchor) is the task's final TES state, written with
	// AnnotationState in the same patch.
	LabelState = AnnotationPrefix + "state"
	// LabelOrderedID (anchor) says the task's id is one of NewID's, which
	// sort the newer task first.
	LabelOrderedID = AnnotationPrefix + "ordered-id"
	// LabelWaiting (anchor, "true") marks a task that waits for its
	// owner's share of the cluster (QUOTA_TASKS_PER_USER,
	// QUOTA_CPU_PER_USER): set before the share is asked for, removed
	// when the task starts.
	LabelWaiting = AnnotationPrefix + "waiting"
	// LabelShare ("true") marks an owner's share ledger, a ConfigMap of the
	// tasks' namespace listing the owner's active tasks.
	LabelShare = AnnotationPrefix + "share"
)

// AnnotationCores (anchor) is the CPU cores a waiting task holds once it
// starts, written with LabelWaiting, so that a sweep weighs waiting tasks
// against their owners' shares from the anchors' metadata.
const AnnotationCores = AnnotationPrefix + "cores"

// Parts of a task, in the order they run. The job names are TESK's:
// <task>-inputs-filer, <task>-ex-NN, <task>-outputs-filer.
const (
	PartPVC          = "pvc"
	PartInputsFiler  = "inputs-filer"
	PartOutputsFiler = "outputs-filer"
)

// ExecutorPart is the part name of the i-th executor (ex-00, ex-01, ...).
func ExecutorPart(i int) string { return fmt.Sprintf("ex-%02d", i) }

// ExecutorIndex returns i for ex-NN.
func ExecutorIndex(part string) (int, bool) {
	n, ok := strings.CutPrefix(part, "ex-")
	if !ok || len(n) < 2 {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 {
		return 0, false
	}
	return i, true
}

// IsFilerPart reports whether a part is one of the filer jobs.
func IsFilerPart(part string) bool { return part == PartInputsFiler || part == PartOutputsFiler }

// ObjectName is the Kubernetes name of a task's part.
func ObjectName(task, part string) string { return task + "-" + part }

// PVCName is the name of the task's volume claim.
func PVCName(task string) string { return ObjectName(task, PartPVC) }

var jobNameRE = regexp.MustCompile(`^(.+)-(inputs-filer|outputs-filer|ex-[0-9]{2,})$`)

// SplitJobName splits a job name into its task and part.
func SplitJobName(job string) (task, part string, ok bool) {
	m := jobNameRE.FindStringSubmatch(job)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

var podNameRE = regexp.MustCompile(`^(.+-(?:inputs-filer|outputs-filer|ex-[0-9]{2,}))-[a-z0-9]{5}$`)

// JobOfPodName returns the job of a pod named by the Job controller
// (<job>-<5 characters>).
func JobOfPodName(pod string) (string, bool) {
	m := podNameRE.FindStringSubmatch(pod)
	if m == nil {
		return "", false
	}
	return m[1], true
}
