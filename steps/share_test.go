package steps

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

func TestQuotaRoom(t *testing.T) {
	share := Share{Tasks: map[string]float64{"a": 2, "b": 1.5}}
	for _, c := range []struct {
		name  string
		q     Quota
		task  string
		cores float64
		want  bool
	}{
		{"no quota", Quota{}, "c", 100, true},
		{"a third task under 3", Quota{Tasks: 3}, "c", 1, true},
		{"a third task under 2", Quota{Tasks: 2}, "c", 1, false},
		{"a task already in the share", Quota{Tasks: 2, CPU: 1}, "a", 2, true},
		{"cores that fit exactly", Quota{CPU: 4.5}, "c", 1, true},
		{"cores over", Quota{CPU: 4.5}, "c", 1.25, false},
		{"both, tasks over", Quota{Tasks: 2, CPU: 100}, "c", 0.5, false},
		{"both, cores over", Quota{Tasks: 5, CPU: 4}, "c", 1, false},
	} {
		if got := c.q.Room(share, c.task, c.cores); got != c.want {
			t.Errorf("%s: room %v, want %v", c.name, got, c.want)
		}
	}
	if why := (Quota{CPU: 4}).Never(8); why == "" {
		t.Error("a task of 8 cores under a share of 4 could wait for ever")
	}
	if why := (Quota{CPU: 4}).Never(4); why != "" {
		t.Errorf("a task of the whole share: %s", why)
	}
}

func TestShareEncoding(t *testing.T) {
	s, err := ParseShare(nil)
	if err != nil || len(s.Tasks) != 0 {
		t.Fatalf("no ledger: %+v %v", s, err)
	}
	s.Tasks["task-1"] = 2
	back, err := ParseShare(&corev1.ConfigMap{Data: map[string]string{ShareKey: s.Encode()}})
	if err != nil || back.Tasks["task-1"] != 2 || len(back.Tasks) != 1 {
		t.Errorf("round trip: %+v %v", back, err)
	}
	if _, err := ParseShare(&corev1.ConfigMap{Data: map[string]string{ShareKey: "{"}}); err == nil {
		t.Error("a ledger that does not parse was read")
	}
	if a, b := ShareName("alice"), ShareName("bob"); a == b || len(a) > 63 {
		t.Errorf("names %q %q", a, b)
	}
}

func TestTaskCores(t *testing.T) {
	job := func(cpu ...string) batchv1.Job {
		var j batchv1.Job
		for _, c := range cpu {
			ctr := corev1.Container{Name: "c"}
			if c != "" {
				ctr.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c)}
			}
			j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, ctr)
		}
		return j
	}
	limited := job("")
	limited.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}
	for _, c := range []struct {
		name string
		q    Quota
		t    taskspec.Task
		want float64
	}{
		{"the largest executor", Quota{}, taskspec.Task{Executors: []batchv1.Job{job("1"), job("2500m"), job("500m")}}, 2.5},
		{"containers of one pod add up", Quota{}, taskspec.Task{Executors: []batchv1.Job{job("1", "1")}}, 2},
		{"a limit without a request", Quota{}, taskspec.Task{Executors: []batchv1.Job{limited}}, 1.5},
		{"no requests: cpu_cores", Quota{}, taskspec.Task{Executors: []batchv1.Job{job("")}, Resources: taskspec.Resources{CPUCores: 3}}, 3},
		{"nothing asked: one core", Quota{}, taskspec.Task{Executors: []batchv1.Job{job("")}}, UnaskedCores},
		{"nothing asked under a share of 2", Quota{CPU: 2}, taskspec.Task{Executors: []batchv1.Job{job("")}}, 1},
		{"nothing asked under a share of half a core: all of it", Quota{CPU: 0.5}, taskspec.Task{Executors: []batchv1.Job{job("")}}, 0.5},
		{"a request of 0 is none", Quota{CPU: 2}, taskspec.Task{Executors: []batchv1.Job{job("0")}}, 1},
		{"a small request beside an executor that asks none", Quota{CPU: 2}, taskspec.Task{Executors: []batchv1.Job{job("1m"), job("")}}, 1},
		{"an executor that asks none beside a larger one", Quota{CPU: 8}, taskspec.Task{Executors: []batchv1.Job{job(""), job("4")}}, 4},
		{"an executor that asks none: cpu_cores", Quota{CPU: 8}, taskspec.Task{Executors: []batchv1.Job{job("500m"), job("")}, Resources: taskspec.Resources{CPUCores: 2}}, 2},
	} {
		if got := c.q.TaskCores(&c.t); got != c.want {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
	}
}

// TestShareOfTasksThatAskNoCPU: under QUOTA_CPU_PER_USER, tasks that ask
// for no CPU hold cores too, so a user starts only the share's worth of
// them at once, whether each is admitted as it is submitted (Room) or the
// waiting ones are started by a sweep (FairOrder).
func TestShareOfTasksThatAskNoCPU(t *testing.T) {
	noCPU := taskspec.Task{Executors: []batchv1.Job{{}}}
	for _, c := range []struct {
		name  string
		q     Quota
		tasks int
		want  int
	}{
		{"a share of 2 cores", Quota{CPU: 2}, 10, 2},
		{"a share of 2.5 cores", Quota{CPU: 2.5}, 10, 2},
		{"a share of half a core: one at a time", Quota{CPU: 0.5}, 10, 1},
		{"fewer tasks than the share", Quota{CPU: 4}, 3, 3},
		{"a share of tasks and of cores, the tasks bound it", Quota{Tasks: 1, CPU: 2}, 10, 1},
	} {
		cores := c.q.TaskCores(&noCPU)
		if why := c.q.Never(cores); why != "" {
			t.Errorf("%s: a task that asks no CPU can never start: %s", c.name, why)
			continue
		}
		share := Share{Tasks: map[string]float64{}}
		var waiting []Waiting
		for i := 0; i < c.tasks; i++ {
			task := fmt.Sprintf("task-%d", i)
			if c.q.Room(share, task, cores) {
				share.Tasks[task] = cores
			}
			waiting = append(waiting, Waiting{Task: task, Owner: "alice", Cores: cores, Created: time.Unix(int64(i), 0)})
		}
		if len(share.Tasks) != c.want {
			t.Errorf("%s: %d started as submitted, want %d", c.name, len(share.Tasks), c.want)
		}
		if got := FairOrder(waiting, nil, c.q); len(got) != c.want {
			t.Errorf("%s: %d started by a sweep, want %d", c.name, len(got), c.want)
		}
	}
}

// TestFairOrder: among owners with room, the one with the fewest active
// tasks first, then the oldest waiting; an owner's tasks in submission
// order; no owner past its share.
func TestFairOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	w := func(owner string, n int, cores float64) Waiting {
		return Waiting{Task: fmt.Sprintf("%s-%d", owner, n), Owner: owner, Cores: cores, Created: t0.Add(time.Duration(n) * time.Second)}
	}
	names := func(ws []Waiting) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.Task)
		}
		return out
	}
	for _, c := range []struct {
		name    string
		waiting []Waiting
		shares  map[string]Share
		q       Quota
		want    []string
	}{
		{"one owner, share of 2, one active", []Waiting{w("a", 3, 1), w("a", 1, 1), w("a", 2, 1)},
			map[string]Share{"a": {Tasks: map[string]float64{"a-0": 1}}}, Quota{Tasks: 2}, []string{"a-1"}},
		{"the owner with fewer active first", []Waiting{w("a", 1, 1), w("b", 2, 1)},
			map[string]Share{"a": {Tasks: map[string]float64{"a-0": 1}}}, Quota{Tasks: 3}, []string{"b-2", "a-1"}},
		{"a tie goes to the oldest waiting", []Waiting{w("b", 2, 1), w("a", 5, 1), w("b", 6, 1), w("a", 7, 1)},
			nil, Quota{Tasks: 2}, []string{"b-2", "a-5", "b-6", "a-7"}},
		{"cores bound it", []Waiting{w("a", 1, 2), w("a", 2, 2), w("b", 3, 3)},
			nil, Quota{CPU: 3}, []string{"a-1", "b-3"}},
		{"an owner whose next task does not fit waits in order", []Waiting{w("a", 1, 3), w("a", 2, 1)},
			map[string]Share{"a": {Tasks: map[string]float64{"a-0": 1}}}, Quota{CPU: 3}, nil},
		{"no room for anyone", []Waiting{w("a", 1, 1)},
			map[string]Share{"a": {Tasks: map[string]float64{"a-0": 1}}}, Quota{Tasks: 1}, nil},
	} {
		got := names(FairOrder(c.waiting, c.shares, c.q))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// 20 owners with 10 waiting tasks each, under a share of 1: each first
	// task, and nothing more.
	var many []Waiting
	for o := 0; o < 20; o++ {
		for n := 0; n < 10; n++ {
			many = append(many, w(fmt.Sprintf("u%02d", o), o*10+n, 1))
		}
	}
	got := FairOrder(many, nil, Quota{Tasks: 1})
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g.Owner] {
			t.Fatalf("%s started twice under a share of 1", g.Owner)
		}
		seen[g.Owner] = true
	}
	if len(got) != 20 {
		t.Errorf("%d started, want 20", len(got))
	}
}

// TestTopUsers: the owners with the most active tasks are named, the rest
// summed as OtherUsers; none without a bound.
func TestTopUsers(t *testing.T) {
	c := &TaskCounts{Users: map[string]UserCounts{
		"a": {Active: 5, Waiting: 3}, "b": {Active: 2}, "c": {Active: 2, Waiting: 1}, "d": {Active: 1, Waiting: 1},
	}}
	got := c.TopUsers(2)
	want := map[string]UserCounts{"a": {Active: 5, Waiting: 3}, "c": {Active: 2, Waiting: 1}, OtherUsers: {Active: 3, Waiting: 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("top 2: %v, want %v", got, want)
	}
	if got := c.TopUsers(0); got != nil {
		t.Errorf("no bound: %v", got)
	}
	// Counted from the anchors: ended tasks and tasks without an owner are
	// not; a waiting task is active and waiting.
	c = &TaskCounts{Users: map[string]UserCounts{}}
	owned := func(owner string, waiting bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Labels: map[string]string{taskmeta.LabelCreator: owner}, Annotations: map[string]string{}}
		if waiting {
			m.Labels[taskmeta.LabelWaiting] = "true"
		}
		return m
	}
	c.addUser(owned("a", false), tesv1.StateRunning)
	c.addUser(owned("a", true), tesv1.StateQueued)
	c.addUser(owned("a", false), tesv1.StateComplete)
	c.addUser(owned("", false), tesv1.StateRunning)
	if fmt.Sprint(c.Users) != fmt.Sprint(map[string]UserCounts{"a": {Active: 2, Waiting: 1}}) {
		t.Errorf("counted %v", c.Users)
	}
}
