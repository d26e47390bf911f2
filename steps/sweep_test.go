package steps

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// swept is a task as a sweep lists it: its anchor's metadata, its jobs and
// its pending pods, under the name task.
type swept struct {
	anchor metav1.ObjectMeta
	jobs   []*batchv1.Job
	pods   []*corev1.Pod
}

func sweptAs(task string, created time.Time, s swept) swept {
	s.anchor.Name, s.anchor.UID = task, types.UID(task)
	s.anchor.Labels[taskmeta.LabelTask] = task
	s.anchor.CreationTimestamp = metav1.NewTime(created)
	for _, j := range s.jobs {
		_, part, _ := taskmeta.SplitJobName(j.Name)
		j.Name, j.Labels[taskmeta.LabelTask] = taskmeta.ObjectName(task, part), task
		j.OwnerReferences[0].Name, j.OwnerReferences[0].UID = task, types.UID(task)
	}
	for _, p := range s.pods {
		job := p.Labels[batchv1.JobNameLabel]
		_, part, _ := taskmeta.SplitJobName(job)
		job = taskmeta.ObjectName(task, part)
		p.Name = job + "-x7k2q"
		p.Labels = map[string]string{taskmeta.LabelTask: task, batchv1.JobNameLabel: job, "job-name": job}
	}
	return s
}

// A sweep's page of anchors, with the jobs and pending pods it listed, gives
// the tasks by the state GET /tasks/{id} gives them, the time of the oldest
// last step of each state that has one, and the tasks due.
func TestSweepPageCounts(t *testing.T) {
	started := func(at time.Time, parts ...string) *taskmeta.Progress {
		p := progressOf(fullParts, "ev", at, parts...)
		return &p
	}
	submittedBy := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		m.Annotations[taskmeta.AnnotationSubmittedBy] = taskmeta.SubmittedByTESAPI
		return m
	}
	waitingForSubmission := swept{anchor: anchorWith(nil)}
	submissionLost := swept{anchor: submittedBy(anchorWith(nil))}
	initializing := swept{anchor: anchorWith(started(ago(20*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler)),
		jobs: []*batchv1.Job{running(taskmeta.PartInputsFiler)}}
	runningTask := func(at time.Time) swept {
		return swept{anchor: anchorWith(started(at, taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
			jobs: []*batchv1.Job{completed(taskmeta.PartInputsFiler), running("ex-00")}}
	}
	unscheduled := swept{anchor: anchorWith(started(ago(5*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00")),
		jobs: []*batchv1.Job{completed(taskmeta.PartInputsFiler), running("ex-00")},
		pods: []*corev1.Pod{unschedulablePod("ex-00", ago(5*time.Minute))}}
	lastPassed := swept{anchor: anchorWith(started(ago(3*time.Minute), fullParts...)),
		jobs: []*batchv1.Job{completed(taskmeta.PartInputsFiler), completed("ex-00"), completed("ex-01"), annotate(completed(taskmeta.PartOutputsFiler), taskmeta.AnnotationOutputFileLogs, "[]")}}
	cancelling := swept{anchor: cancelled(anchorWith(started(ago(2*time.Hour), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"))),
		jobs: []*batchv1.Job{completed(taskmeta.PartInputsFiler), running("ex-00")}}
	ended := func(state string) swept {
		return swept{anchor: anchorWith(started(ago(time.Hour), fullParts...), taskmeta.AnnotationState, state, taskmeta.AnnotationEnded, rfc(ago(time.Minute)))}
	}
	// A ConfigMap of task-a's that is not its anchor.
	notAnAnchor := sweptAs("task-a", ago(time.Hour), swept{anchor: anchorWith(nil)})
	notAnAnchor.anchor.Name = "task-a-filer-config"

	cases := []struct {
		name           string
		tasks          []swept
		states         map[string]int
		oldest         map[string]time.Time
		unstarted, due []string
	}{
		{name: "no task", states: map[string]int{}, oldest: map[string]time.Time{}},
		{name: "a ConfigMap that is not an anchor is not a task",
			tasks: []swept{notAnAnchor}, states: map[string]int{}, oldest: map[string]time.Time{}},
		{name: "QUEUED: waiting for its task.submitted, or for a node; the oldest by creation or its last step",
			tasks: []swept{
				sweptAs("task-a", ago(10*time.Second), waitingForSubmission),
				sweptAs("task-b", ago(time.Minute), submissionLost),
				sweptAs("task-c", ago(time.Hour), unscheduled),
			},
			states:    map[string]int{tesv1.StateQueued: 3},
			oldest:    map[string]time.Time{tesv1.StateQueued: ago(5 * time.Minute)},
			unstarted: []string{"task-b"}},
		{name: "INITIALIZING and RUNNING, with the time of their oldest last step",
			tasks: []swept{
				sweptAs("task-a", ago(time.Hour), initializing),
				sweptAs("task-b", ago(3*time.Hour), runningTask(ago(2*time.Hour))),
				sweptAs("task-c", ago(time.Hour), runningTask(ago(30*time.Minute))),
			},
			states: map[string]int{tesv1.StateInitializing: 1, tesv1.StateRunning: 2},
			oldest: map[string]time.Time{tesv1.StateInitializing: ago(20 * time.Minute), tesv1.StateRunning: ago(2 * time.Hour)}},
		{name: "an executor that ended without a record of its log does not make a task due",
			tasks: []swept{sweptAs("task-a", ago(time.Hour), func() swept {
				p := started(ago(10*time.Minute), taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00", "ex-01")
				p.Done = []string{taskmeta.PartInputsFiler, "ex-00"}
				return swept{anchor: anchorWith(p), jobs: []*batchv1.Job{completed(taskmeta.PartInputsFiler), completed("ex-00"), running("ex-01")}}
			}())},
			states: map[string]int{tesv1.StateRunning: 1}, oldest: map[string]time.Time{tesv1.StateRunning: ago(10 * time.Minute)}},
		{name: "a task whose last part passed is RUNNING until its end is written, and due",
			tasks:  []swept{sweptAs("task-a", ago(time.Hour), lastPassed)},
			states: map[string]int{tesv1.StateRunning: 1}, oldest: map[string]time.Time{tesv1.StateRunning: ago(3 * time.Minute)},
			due: []string{"task-a"}},
		{name: "a cancelled task whose job runs is CANCELING, due, with no time",
			tasks:  []swept{sweptAs("task-a", ago(3*time.Hour), cancelling)},
			states: map[string]int{tesv1.StateCanceling: 1}, oldest: map[string]time.Time{},
			due: []string{"task-a"}},
		{name: "ended tasks count in their final state, with no time",
			tasks: []swept{
				sweptAs("task-a", ago(2*time.Hour), ended(tesv1.StateComplete)),
				sweptAs("task-b", ago(2*time.Hour), ended(tesv1.StateComplete)),
				sweptAs("task-c", ago(2*time.Hour), ended(tesv1.StateExecutorError)),
				sweptAs("task-d", ago(2*time.Hour), ended(tesv1.StateSystemError)),
				sweptAs("task-e", ago(2*time.Hour), ended(tesv1.StateCanceled)),
			},
			states: map[string]int{tesv1.StateComplete: 2, tesv1.StateExecutorError: 1, tesv1.StateSystemError: 1, tesv1.StateCanceled: 1},
			oldest: map[string]time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var anchors []metav1.ObjectMeta
			jobsOf := map[string][]SweptJob{}
			podsOf := map[string][]*corev1.Pod{}
			for _, s := range c.tasks {
				anchors = append(anchors, s.anchor)
				for _, j := range s.jobs {
					jobsOf[j.Labels[taskmeta.LabelTask]] = append(jobsOf[j.Labels[taskmeta.LabelTask]], Swept(j))
				}
				for _, p := range s.pods {
					podsOf[p.Labels[taskmeta.LabelTask]] = append(podsOf[p.Labels[taskmeta.LabelTask]], CompactPod(p))
				}
			}
			counts := NewTaskCounts()
			unstarted, due, _ := SweepPage(anchors, jobsOf, podsOf, DefaultConfig(), t0, "sweep-1", counts)
			want := map[string]int{}
			total, active := 0, 0
			for _, s := range ServiceStates {
				want[s] = c.states[s]
				total += c.states[s]
				if !tesv1.IsFinal(s) {
					active += c.states[s]
				}
			}
			if !reflect.DeepEqual(counts.States, want) {
				t.Errorf("states %v, want %v", counts.States, want)
			}
			if !reflect.DeepEqual(counts.Oldest, c.oldest) {
				t.Errorf("oldest steps %v, want %v", counts.Oldest, c.oldest)
			}
			if counts.Queued() != c.states[tesv1.StateQueued] || counts.Tasks() != total || counts.Active() != active {
				t.Errorf("queued %d tasks %d active %d, want %d %d %d", counts.Queued(), counts.Tasks(), counts.Active(), c.states[tesv1.StateQueued], total, active)
			}
			if !reflect.DeepEqual(unstarted, c.unstarted) || !reflect.DeepEqual(due, c.due) {
				t.Errorf("unstarted %v due %v, want %v %v", unstarted, due, c.unstarted, c.due)
			}
		})
	}
}

// Counting adds up over the pages of a sweep.
func TestTaskCountsOverPages(t *testing.T) {
	counts := NewTaskCounts()
	a := anchorWith(nil)
	b := anchorWith(nil)
	b.Name, b.Labels = "task-b", map[string]string{taskmeta.LabelTask: "task-b"}
	b.CreationTimestamp = metav1.NewTime(ago(2 * time.Hour))
	SweepPage([]metav1.ObjectMeta{a}, nil, nil, DefaultConfig(), t0, "sweep-1", counts)
	SweepPage([]metav1.ObjectMeta{b}, nil, nil, DefaultConfig(), t0, "sweep-1", counts)
	if counts.Queued() != 2 || !counts.Oldest[tesv1.StateQueued].Equal(ago(2*time.Hour)) {
		t.Fatalf("queued %d, oldest %v; want 2, %v", counts.Queued(), counts.Oldest[tesv1.StateQueued], ago(2*time.Hour))
	}
}
