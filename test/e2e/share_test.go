//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/elixir-cloud-aai/tesk-knative/eventserver"
	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// namedUsers is a stand-in for the TES API's access control, for tests of
// what comes after it: the bearer token is the user's name.
type namedUsers struct{}

func (namedUsers) Authenticate(r *http.Request) (tes.Caller, error) {
	user := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tes.Caller{Subject: user, Label: tes.LabelSafe(user)}, nil
}

// TestSharesPerUser: under QUOTA_TASKS_PER_USER=2, with two handler
// processes deciding every submission at once, alice's 6 tasks never hold
// more than 2 places at once, bob's task starts meanwhile, and all 7
// complete, each waiting task started as alice's tasks end (events alone:
// no sweep runs).
func TestSharesPerUser(t *testing.T) {
	const share = 2
	quota := func(c *steps.Config) { c.Quota = steps.Quota{Tasks: share} }
	e := newEnv(t, envOptions{config: quota})
	e.slowPods("3s")
	second := e.secondHandler(quota)
	api := newTESAPIDashboard(t, e, "", tesAPIOptions{Auth: namedUsers{}, Steps: quota})

	starts := watchStarts(t, e)
	task := map[string]any{"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}}
	submitEverywhere := func(id string) {
		var wg sync.WaitGroup
		for _, url := range []string{e.url, second} {
			wg.Go(func() {
				if code, body := e.postTo(url, "task.submitted", map[string]any{"task": id, "namespace": e.ns}); code != http.StatusOK {
					t.Errorf("task.submitted of %s to %s: %d %s", id, url, code, body)
				}
			})
		}
		wg.Wait()
	}
	api.token = "alice"
	var alices []string
	for range 6 {
		alices = append(alices, api.create(task))
	}
	var wg sync.WaitGroup
	for _, id := range alices {
		wg.Go(func() { submitEverywhere(id) })
	}
	wg.Wait()
	api.token = "bob"
	bob := api.create(task)
	submitEverywhere(bob)
	api.waitState(bob, tesv1.StateComplete, 60*time.Second)
	api.token = "alice"
	for _, id := range alices {
		api.waitState(id, tesv1.StateComplete, 3*time.Minute)
	}
	most := starts.most("alice")
	if most > share {
		t.Errorf("alice held %d places at once, more than her share of %d", most, share)
	}
	if most < share {
		t.Errorf("alice never held her %d places at once (at most %d): the tasks did not overlap as the test needs", share, most)
	}
	ledger, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), steps.ShareName("alice"), metav1.GetOptions{})
	if err == nil {
		t.Errorf("alice's share is not given back once all her tasks ended: %v", ledger.Data)
	}
}

// secondHandler serves another handler process on the env's namespace,
// under the same Role, with the env's settings changed by config.
func (e *env) secondHandler(config func(*steps.Config)) string {
	e.t.Helper()
	rc := e.handlerRESTConfig()
	rc.QPS, rc.Burst = 500, 1000
	cfg := envConfig(e.ns)
	config(&cfg)
	srv, err := eventserver.New(rc, cfg, zaptest.NewLogger(e.t, zaptest.Level(e2eLogLevel())).Sugar().Named("second"))
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Echo())
	e.t.Cleanup(hs.Close)
	return hs.URL
}

// TestSharesAreFair: 20 users with 10 tasks each under a share of one:
// every user's first task starts before any user's third, no user ever
// holds two places, and all 200 complete.
func TestSharesAreFair(t *testing.T) {
	const users, each = 20, 10
	quota := func(c *steps.Config) { c.Quota = steps.Quota{Tasks: 1} }
	e := newEnv(t, envOptions{config: quota})
	e.slowPods("2s")
	api := newTESAPIDashboard(t, e, e.url, tesAPIOptions{Auth: namedUsers{}, Steps: quota})
	starts := watchStarts(t, e)
	task := map[string]any{"executors": []any{map[string]any{"image": "alpine", "command": []any{"true"}}}}
	ids := map[string][]string{}
	// Round the users: each user's first task is created before any
	// user's second.
	for range each {
		for u := range users {
			user := fmt.Sprintf("user-%02d", u)
			api.token = user
			ids[user] = append(ids[user], api.create(task))
		}
	}
	for u := range users {
		user := fmt.Sprintf("user-%02d", u)
		api.token = user
		for _, id := range ids[user] {
			api.waitState(id, tesv1.StateComplete, 5*time.Minute)
		}
	}
	order := starts.order()
	seen := map[string]int{}
	lastFirst, firstThird := -1, len(order)
	for i, st := range order {
		seen[st.owner]++
		switch seen[st.owner] {
		case 1:
			lastFirst = i
		case 3:
			firstThird = min(firstThird, i)
		}
	}
	if len(order) != users*each {
		t.Errorf("%d tasks started, want %d", len(order), users*each)
	}
	if lastFirst > firstThird {
		t.Errorf("a user's third task started (start %d) before another user's first (start %d)", firstThird+1, lastFirst+1)
	}
	for u := range users {
		if m := starts.most(fmt.Sprintf("user-%02d", u)); m > 1 {
			t.Errorf("user-%02d held %d places at once under a share of one", u, m)
		}
	}
}

// started is a task that started, and its owner.
type started struct{ task, owner string }

// startWatch follows the anchors of a namespace in the API server's order:
// which tasks started, in order, and how many of each owner's tasks held a
// place (started, not ended) at once.
type startWatch struct {
	mu      sync.Mutex
	active  map[string]map[string]bool
	highest map[string]int
	starts  []started
	seen    map[string]bool
}

// watchStarts watches the env's anchors until the test ends.
func watchStarts(t *testing.T, e *env) *startWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
	if err != nil {
		t.Fatal(err)
	}
	sw := &startWatch{active: map[string]map[string]bool{}, highest: map[string]int{}, seen: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Error {
				continue
			}
			owner := cm.Labels[taskmeta.LabelCreator]
			_, began := cm.Annotations[taskmeta.AnnotationProgress]
			ended := cm.Annotations[taskmeta.AnnotationState] != ""
			sw.mu.Lock()
			if sw.active[owner] == nil {
				sw.active[owner] = map[string]bool{}
			}
			if began && !sw.seen[cm.Name] {
				sw.seen[cm.Name] = true
				sw.starts = append(sw.starts, started{task: cm.Name, owner: owner})
			}
			if began && !ended && ev.Type != watch.Deleted {
				sw.active[owner][cm.Name] = true
			} else {
				delete(sw.active[owner], cm.Name)
			}
			sw.highest[owner] = max(sw.highest[owner], len(sw.active[owner]))
			sw.mu.Unlock()
		}
	}()
	return sw
}

// most is the most places the owner's tasks held at once.
func (sw *startWatch) most(owner string) int {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.highest[owner]
}

// order is the tasks in the order they started.
func (sw *startWatch) order() []started {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return append([]started(nil), sw.starts...)
}
