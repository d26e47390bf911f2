package steps

import (
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// Fixtures shared by the tests of the package: a task as the TESK API passes
// it, its anchor, jobs and pods as the cluster would show them.

const (
	testTask = taskfixtures.TaskName
	testNS   = taskfixtures.Namespace
)

// The tasks shared with the tests of jobspec and runner (test/taskfixtures).
var (
	executorSpec = taskfixtures.ExecutorSpec
	taskWith     = taskfixtures.TaskWith
	withInput    = taskfixtures.WithInput
	withOutput   = taskfixtures.WithOutput
	withVolume   = taskfixtures.WithVolume
)

// A task's anchor, jobs and pods, shared with the tests of runner
// (test/taskfixtures).
var (
	testAnchor       = taskfixtures.TestAnchor
	t0               = taskfixtures.Now
	ago              = taskfixtures.Ago
	fullParts        = taskfixtures.FullParts
	progressOf       = taskfixtures.ProgressOf
	anchorWith       = taskfixtures.AnchorWith
	cancelled        = taskfixtures.Cancelled
	cond             = taskfixtures.Cond
	jobOf            = taskfixtures.JobOf
	completed        = taskfixtures.Completed
	failed           = taskfixtures.Failed
	running          = taskfixtures.Running
	annotate         = taskfixtures.Annotate
	ignoring         = taskfixtures.Ignoring
	deleting         = taskfixtures.Deleting
	failedByService  = taskfixtures.FailedByService
	jobsOf           = taskfixtures.JobsOf
	podOf            = taskfixtures.PodOf
	waiting          = taskfixtures.Waiting
	unschedulablePod = taskfixtures.UnschedulablePod
	pods             = taskfixtures.Pods
	quantity         = taskfixtures.Quantity
	terminatedPod    = taskfixtures.TerminatedPod
	runningPod       = taskfixtures.RunningPod
	rfc              = taskfixtures.RFC3339
	show             = taskfixtures.ShowLogs
	disruptedPod     = taskfixtures.DisruptedPod
	forbidden        = taskfixtures.ForbiddenExecutorChanges
	withParams       = taskfixtures.WithParams
	checkExecutorPod = taskfixtures.CheckExecutorPod
	checkFilerPod    = taskfixtures.CheckFilerPod
	allParams        = taskfixtures.AllParams
	withCPU          = taskfixtures.WithCPU
)

func ptr[T any](v T) *T { return &v }
