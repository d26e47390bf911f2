package steps

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TaskCounts are a namespace's tasks by TES state, each in the state GET
// /tasks/{id} gives it. Oldest holds, for QUEUED, INITIALIZING and RUNNING,
// the earliest time a task in that state took its last step: when its
// latest parts were started, or when it was created if none was (a cancel
// records no time, so CANCELING has none).
type TaskCounts struct {
	States map[string]int       `json:"states"`
	Oldest map[string]time.Time `json:"oldest_step"`
	// Users are each owner's active and waiting tasks, kept only where
	// Config.MetricsUsers names users (nil otherwise).
	Users map[string]UserCounts `json:"users,omitempty"`
}

// UserCounts are an owner's tasks that have not ended, and of them those
// that wait for the owner's share.
type UserCounts struct {
	Active  int `json:"active"`
	Waiting int `json:"waiting"`
}

// OtherUsers names, in TopUsers, the owners past the most named.
const OtherUsers = "other"

// TopUsers are the n owners with the most active tasks (their names), the
// others summed as OtherUsers: what a gauge may name without an attribute
// of unbounded values.
func (c *TaskCounts) TopUsers(n int) map[string]UserCounts {
	if n <= 0 || c.Users == nil {
		return nil
	}
	names := make([]string, 0, len(c.Users))
	for u := range c.Users {
		names = append(names, u)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := c.Users[names[i]], c.Users[names[j]]
		if a.Active != b.Active {
			return a.Active > b.Active
		}
		if a.Waiting != b.Waiting {
			return a.Waiting > b.Waiting
		}
		return names[i] < names[j]
	})
	out := map[string]UserCounts{}
	for i, u := range names {
		if i < n {
			out[u] = c.Users[u]
			continue
		}
		o := out[OtherUsers]
		o.Active += c.Users[u].Active
		o.Waiting += c.Users[u].Waiting
		out[OtherUsers] = o
	}
	return out
}

// addUser counts an owner's task that has not ended.
func (c *TaskCounts) addUser(meta metav1.ObjectMeta, state string) {
	owner := meta.Labels[taskmeta.LabelCreator]
	if c.Users == nil || owner == "" || tesv1.IsFinal(state) {
		return
	}
	u := c.Users[owner]
	u.Active++
	if _, started := meta.Annotations[taskmeta.AnnotationProgress]; meta.Labels[taskmeta.LabelWaiting] == "true" && !started {
		u.Waiting++
	}
	c.Users[owner] = u
}

// ServiceStates are the TES states a task of this service takes.
var ServiceStates = []string{tesv1.StateQueued, tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling,
	tesv1.StateComplete, tesv1.StateExecutorError, tesv1.StateSystemError, tesv1.StateCanceled}

// NewTaskCounts counts no task yet: every state of ServiceStates at 0.
func NewTaskCounts() *TaskCounts {
	c := &TaskCounts{States: map[string]int{}, Oldest: map[string]time.Time{}}
	for _, s := range ServiceStates {
		c.States[s] = 0
	}
	return c
}

func (c *TaskCounts) add(state string, step time.Time) {
	c.States[state]++
	if tesv1.IsFinal(state) || state == tesv1.StateCanceling {
		return
	}
	if old, ok := c.Oldest[state]; !ok || step.Before(old) {
		c.Oldest[state] = step
	}
}

// Queued is the queue's depth: the tasks submitted with nothing started yet.
func (c *TaskCounts) Queued() int { return c.States[tesv1.StateQueued] }

// Tasks is how many tasks were counted.
func (c *TaskCounts) Tasks() int {
	n := 0
	for _, v := range c.States {
		n += v
	}
	return n
}

// Active is how many tasks have not ended.
func (c *TaskCounts) Active() int {
	n := 0
	for s, v := range c.States {
		if !tesv1.IsFinal(s) {
			n += v
		}
	}
	return n
}
