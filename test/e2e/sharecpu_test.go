//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestSharesOfCPUPerUser: under QUOTA_CPU_PER_USER=3 (read as the handler
// reads its environment), with two handler processes taking every event
// (the submissions and the adapter's), alice's 10 tasks asking for 17
// cores together (one asking for none, which counts as one core) never
// hold more than 3 cores at once, at any change of their anchors, some
// run side by side, and all complete.
func TestSharesOfCPUPerUser(t *testing.T) {
	const share = 3
	quota := func(c *steps.Config) {
		cfg, issues := steps.LoadEnv(*c, func(name string) string {
			if name == "QUOTA_CPU_PER_USER" {
				return strconv.Itoa(share)
			}
			return ""
		})
		if len(issues) > 0 {
			t.Fatalf("QUOTA_CPU_PER_USER=%d: %v", share, issues)
		}
		*c = cfg
	}
	// Every event the adapter delivers goes to the second handler too, at
	// the same time.
	var second atomic.Pointer[string]
	both := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, hdr := readAll(r), r.Header.Clone()
			var wg sync.WaitGroup
			if url := second.Load(); url != nil {
				wg.Go(func() {
					// A failure once the second handler stopped is none.
					if err := forward(*url, hdr, body); err != nil && second.Load() != nil {
						t.Errorf("an event (%s) forwarded to the second handler: %v", hdr.Get("Ce-Type"), err)
					}
				})
			}
			h.ServeHTTP(w, replay(r, hdr, body))
			wg.Wait()
		})
	}
	e := newEnv(t, envOptions{config: quota, sink: both})
	e.slowPods("3s")
	url := e.secondHandler(quota)
	second.Store(&url)
	// The second handler stops before the adapter does: its last events
	// go to the first only.
	t.Cleanup(func() { second.Store(nil) })
	api := newTESAPIDashboard(t, e, "", tesAPIOptions{Auth: namedUsers{}, Steps: quota})

	cores := []int{2, 1, 3, 1, 2, 0, 2, 1, 1, 3}
	held := watchCores(t, e, "alice", share, func(name string) float64 {
		n, err := strconv.Atoi(strings.TrimPrefix(name, "cores-"))
		if err != nil {
			t.Errorf("task named %q: not one of the test's", name)
		}
		return max(float64(n), steps.UnaskedCores) // none asked counts as a core
	})
	api.token = "alice"
	var ids []string
	total := 0
	for _, c := range cores {
		task := map[string]any{"name": fmt.Sprintf("cores-%d", c),
			"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}}
		if c > 0 {
			task["resources"] = map[string]any{"cpu_cores": c}
		}
		ids = append(ids, api.create(task))
		total += max(c, 1)
	}
	if total < 5*share {
		t.Fatalf("the tasks ask for %d cores together, not several shares of %d", total, share)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, to := range []string{e.url, url} {
			wg.Go(func() {
				if code, body := e.postTo(to, "task.submitted", map[string]any{"task": id, "namespace": e.ns}); code != http.StatusOK {
					t.Errorf("task.submitted of %s to %s: %d %s", id, to, code, body)
				}
			})
		}
	}
	wg.Wait()
	for _, id := range ids {
		api.waitState(id, tesv1.StateComplete, 3*time.Minute)
	}
	over, most, highest := held.result()
	t.Logf("alice's tasks held at most %g cores and %d places at once", highest, most)
	for i, o := range over {
		if i == 3 {
			t.Errorf("... %d observations over the share in all", len(over))
			break
		}
		t.Errorf("alice's started tasks held %g cores at once, more than her share of %d: %s", o.cores, share, o.tasks)
	}
	if most < 2 {
		t.Errorf("at most %d of alice's tasks held cores at once: the tasks did not overlap as the test needs", most)
	}
	if ledger, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), steps.ShareName("alice"), metav1.GetOptions{}); err == nil {
		t.Errorf("alice's share is not given back once all her tasks ended: %v", ledger.Data)
	}
}

// forward posts an event, as the adapter sent it, to another handler.
func forward(url string, hdr http.Header, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = hdr.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// coresHeld follows one owner's anchors in the API server's order and
// weighs, at each change, the cores of the owner's tasks that started and
// have not ended.
type coresHeld struct {
	mu sync.Mutex
	// active are the tasks that started and have not ended, by anchor,
	// with their cores.
	active map[string]float64
	over   []overShare
	most   int
	// highest is the most cores held at one observation.
	highest float64
}

// overShare is an observation of more cores held than the share.
type overShare struct {
	cores float64
	tasks string
}

// watchCores watches the env's anchors of owner until the test ends, and
// notes each observation of more than limit cores held; the cores of a
// task are coresOf its TES name.
func watchCores(t *testing.T, e *env, owner string, limit float64, coresOf func(name string) float64) *coresHeld {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelCreator + "=" + owner})
	if err != nil {
		t.Fatal(err)
	}
	h := &coresHeld{active: map[string]float64{}}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Error || !taskmeta.IsAnchor(cm.ObjectMeta) {
				continue
			}
			_, began := cm.Annotations[taskmeta.AnnotationProgress]
			ended := cm.Annotations[taskmeta.AnnotationState] != ""
			h.mu.Lock()
			if began && !ended && ev.Type != watch.Deleted {
				h.active[cm.Name] = coresOf(cm.Annotations[taskmeta.AnnotationTaskName])
			} else {
				delete(h.active, cm.Name)
			}
			var sum float64
			var tasks []string
			for name, c := range h.active {
				sum += c
				tasks = append(tasks, fmt.Sprintf("%s (%g)", name, c))
			}
			if sum > limit+1e-9 {
				h.over = append(h.over, overShare{cores: sum, tasks: strings.Join(tasks, ", ")})
			}
			h.most = max(h.most, len(h.active))
			h.highest = max(h.highest, sum)
			h.mu.Unlock()
		}
	}()
	return h
}

// result is what the watch saw: each observation over the share, the most
// tasks that held cores at once, and the most cores held at once.
func (h *coresHeld) result() ([]overShare, int, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]overShare(nil), h.over...), h.most, h.highest
}
