package steps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// Each owner's share of the cluster is a ledger on the cluster: a
// ConfigMap of the tasks' namespace (ShareName) listing the owner's active
// tasks and the cores each holds. A task starts only once it is in its
// owner's ledger, and a write of the ledger is conditional on the version
// read (the API server refuses it with a conflict if another step wrote
// in between), so no owner is ever over its share, however many handler
// pods decide at once. A task leaves the ledger when it ends.

// Quota is the most an owner's tasks may hold at once (QUOTA_TASKS_PER_USER,
// QUOTA_CPU_PER_USER); 0 is no limit.
type Quota struct {
	Tasks int
	CPU   float64
}

// On reports whether the quota limits anything.
func (q Quota) On() bool { return q.Tasks > 0 || q.CPU > 0 }

// String says the quota as its settings do.
func (q Quota) String() string {
	switch {
	case q.Tasks > 0 && q.CPU > 0:
		return fmt.Sprintf("%d tasks and %g CPU cores a user at once", q.Tasks, q.CPU)
	case q.Tasks > 0:
		return fmt.Sprintf("%d tasks a user at once", q.Tasks)
	case q.CPU > 0:
		return fmt.Sprintf("%g CPU cores a user at once", q.CPU)
	}
	return "no limit"
}

// Share is an owner's ledger: its active tasks and the cores each holds.
type Share struct {
	Tasks map[string]float64 `json:"tasks"`
}

// Cores is what the share's tasks hold together.
func (s Share) Cores() float64 {
	var sum float64
	for _, c := range s.Tasks {
		sum += c
	}
	return sum
}

// Room reports whether a task of these cores fits beside the share's
// tasks; a task already in the share fits.
func (q Quota) Room(s Share, task string, cores float64) bool {
	if _, in := s.Tasks[task]; in {
		return true
	}
	if q.Tasks > 0 && len(s.Tasks) >= q.Tasks {
		return false
	}
	return q.CPU <= 0 || s.Cores()+cores <= q.CPU+1e-9
}

// Never says why a task can never fit its owner's share (it asks for more
// cores than the whole share), or "".
func (q Quota) Never(cores float64) string {
	if q.CPU > 0 && cores > q.CPU+1e-9 {
		return fmt.Sprintf("the task asks for %g CPU cores, more than each user's share of %g (QUOTA_CPU_PER_USER)", cores, q.CPU)
	}
	return ""
}

// ShareName is the name of an owner's ledger (its creator-user-id label
// hashed: a label value may hold characters a name may not).
func ShareName(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "tesk-share-" + hex.EncodeToString(sum[:10])
}

// ShareKey is the ledger's data key.
const ShareKey = "tasks"

// ParseShare reads a ledger; a missing one is an empty share.
func ParseShare(cm *corev1.ConfigMap) (Share, error) {
	s := Share{Tasks: map[string]float64{}}
	if cm == nil || cm.Data[ShareKey] == "" {
		return s, nil
	}
	if err := json.Unmarshal([]byte(cm.Data[ShareKey]), &s); err != nil {
		return s, fmt.Errorf("share %s: %w", cm.Name, err)
	}
	if s.Tasks == nil {
		s.Tasks = map[string]float64{}
	}
	return s, nil
}

// Encode is the ledger's data value.
func (s Share) Encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// UnaskedCores is what an executor whose pod asks for no CPU (no request
// nor limit, or 0) counts as in its owner's share when the task names no
// cpu_cores either: one core. Such a pod gets no CPU request from the
// handler, so it may take what its node has free; counted as 0 cores, an
// owner could run any number of them under QUOTA_CPU_PER_USER. Under a
// share of less than one core such an executor counts as the whole share,
// so that one at a time runs. A LimitRange's default request is given to
// the pod only when it is created, after the share: it is not seen here.
const UnaskedCores = 1.0

// TaskCores is the CPU cores a task holds in its owner's share while it
// runs: the most any one executor's pod requests (its executors run one
// after another). A pod that asks for none counts as the task's cpu_cores,
// or UnaskedCores where the task names none (at most the whole share).
func (q Quota) TaskCores(t *taskspec.Task) float64 {
	unasked := t.Resources.CPUCores
	if unasked <= 0 {
		unasked = UnaskedCores
		if q.CPU > 0 {
			unasked = math.Min(unasked, q.CPU)
		}
	}
	var most float64
	for _, ex := range t.Executors {
		var pod float64
		for _, c := range ex.Spec.Template.Spec.Containers {
			if v, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
				pod += float64(v.MilliValue()) / 1000
			} else if v, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				pod += float64(v.MilliValue()) / 1000
			}
		}
		if pod <= 0 {
			pod = unasked
		}
		most = math.Max(most, pod)
	}
	return most
}

// Waiting is a task that waits for its owner's share.
type Waiting struct {
	Task, Owner string
	Cores       float64
	Created     time.Time
}

// FairOrder says which waiting tasks to start now, in order: while an owner
// has room, the owner with the fewest active tasks goes first (the owner
// whose oldest waiting task is older on a tie), with its oldest waiting
// task. shares holds each owner's ledger as read; it is not changed.
func FairOrder(waiting []Waiting, shares map[string]Share, q Quota) []Waiting {
	byOwner := map[string][]Waiting{}
	for _, w := range waiting {
		byOwner[w.Owner] = append(byOwner[w.Owner], w)
	}
	active := map[string]Share{}
	for owner, ws := range byOwner {
		sort.SliceStable(ws, func(i, j int) bool {
			if !ws[i].Created.Equal(ws[j].Created) {
				return ws[i].Created.Before(ws[j].Created)
			}
			return ws[i].Task < ws[j].Task
		})
		s := Share{Tasks: map[string]float64{}}
		for t, c := range shares[owner].Tasks {
			s.Tasks[t] = c
		}
		active[owner] = s
	}
	var out []Waiting
	for {
		best := ""
		for owner, ws := range byOwner {
			if len(ws) == 0 || !q.Room(active[owner], ws[0].Task, ws[0].Cores) {
				continue
			}
			if best == "" || fairer(owner, best, active, byOwner) {
				best = owner
			}
		}
		if best == "" {
			return out
		}
		w := byOwner[best][0]
		byOwner[best] = byOwner[best][1:]
		active[best].Tasks[w.Task] = w.Cores
		out = append(out, w)
	}
}

// fairer reports whether owner a goes before owner b: fewer active tasks,
// then the older oldest waiting task, then the name.
func fairer(a, b string, active map[string]Share, waiting map[string][]Waiting) bool {
	if na, nb := len(active[a].Tasks), len(active[b].Tasks); na != nb {
		return na < nb
	}
	if ta, tb := waiting[a][0].Created, waiting[b][0].Created; !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a < b
}
