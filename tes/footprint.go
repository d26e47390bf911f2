package tes

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// The fixed parts of a task's footprint in etcd, from what `make
// bench-etcd` read of four tasks on the local cluster, the run of
// 2026-12-07 (../BENCHMARKS.md#make-bench-etcd-what-one-task-keeps-in-etcd).
// Each object is counted as etcd holds it: its protobuf encoding as the
// API server writes it, with the fields the API server, the controllers
// and the kubelet add.
const (
	// footprintPerExecutor is what an executor keeps beyond twice its Job
	// spec as the handler builds it (once in its Job, once in its Pod):
	// what the API server and the controllers add to the Job and the Pod
	// (defaults, status, managedFields) and the Events about them. The
	// task of 8 executors and one output held 29,678 bytes of 9 Jobs,
	// 32,077 of 9 Pods and 34,697 of 50 Events, the small task (one input,
	// one executor, one output) 11,043 of 3 Jobs, 12,707 of 3 Pods and
	// 13,508 of 19 Events: solved for one executor and one filer, an
	// executor's Job and Pod hold 6,651 bytes and its Events 3,532, 10,183
	// in all, of which its Job spec, 612 bytes as the handler builds it,
	// is 1,224 twice: 8,959, rounded up to 10 KiB.
	footprintPerExecutor = 10 << 10
	// footprintPerTask is what a task keeps whatever its executors: what
	// the handler adds to its anchor as it runs (the small task's grew
	// from 784 bytes at its create to 2,050), its PVC (1,610) and the PV
	// bound to it (1,535), its two filers' Jobs and Pods (17,099) and
	// their Events (7,063), and the Events about the task (2,914): the
	// small task's 42,453 bytes at its peak less its anchor at its create
	// (784) and its executor's share (2 × 641 + 8,959), 31,428, rounded up
	// to 32 KiB.
	footprintPerTask = 32 << 10
)

// sizeUID stands for the anchor's UID, which the API server gives it at
// its create, in the executor Job the footprint sizes: the Job names the
// anchor as its owner by it, and a UID is always this long.
const sizeUID = "00000000-0000-0000-0000-000000000000"

// Footprint estimates what a task keeps in etcd at its peak, from the
// task as submitted: its anchor's bytes as created (anchorBytes, its
// protobuf encoding), plus for each executor twice its Job spec as the
// handler builds it (its Job holds it, and its Pod again: a long command
// is in etcd twice) and footprintPerExecutor, plus footprintPerTask for
// its PVC and PV, its filers' Jobs and Pods, and its Events. t is the
// converted task (Convert) of the task named a.Name in a.Namespace, and
// cfg the handler's configuration, which the TES API shares. Against
// what make bench-etcd measured it is at least the peak of each task
// measured and at most 1.23 times it (footprint_test.go). It leaves out
// what an executor writes: the handler records the end of its stdout and
// stderr on its Job (TES_LOG_TAIL_BYTES, at most 200,000 bytes).
//
// Footprint is anchorBytes plus what does not depend on it.
func Footprint(anchorBytes int64, t *taskspec.Task, a taskmeta.Anchor, cfg steps.Config) int64 {
	n := anchorBytes + footprintPerTask
	if len(t.Executors) == 0 {
		return n
	}
	if a.UID == "" {
		a.UID = sizeUID
	}
	// The handler adds the same to every executor's Job (its owner, its
	// volumes and mounts, its security context, its placement): built
	// once, for the first, not for each of up to TES_MAX_EXECUTORS.
	added := int64(jobspec.ExecutorJob(a, t, 0, cfg.Config).Size() - t.Executors[0].Size())
	for i := range t.Executors {
		n += 2*(int64(t.Executors[i].Size())+added) + footprintPerExecutor
	}
	return n
}

// recordFootprint writes into an anchor about to be created the task's
// footprint (taskmeta.AnnotationSize: Footprint, of the anchor with the
// annotation included) and returns it.
func recordFootprint(cm *corev1.ConfigMap, t *taskspec.Task, a taskmeta.Anchor, cfg steps.Config) int64 {
	rest := Footprint(0, t, a, cfg)
	v := ""
	for {
		cm.Annotations[taskmeta.AnnotationSize] = v
		n := strconv.FormatInt(int64(cm.Size())+rest, 10)
		if n == v {
			return int64(cm.Size()) + rest
		}
		v = n
	}
}
