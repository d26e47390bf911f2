//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
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
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elixir-cloud-aai/tesk-knative/server"
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

	// Every change of the anchors, in the API server's order: how many of
	// each owner's tasks have started and not ended.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := e.c.Client.CoreV1().ConfigMaps(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: taskmeta.LabelTask})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	active := map[string]map[string]bool{}
	most := map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Error {
				continue
			}
			owner := cm.Labels[taskmeta.LabelCreator]
			_, started := cm.Annotations[taskmeta.AnnotationProgress]
			ended := cm.Annotations[taskmeta.AnnotationState] != ""
			mu.Lock()
			if active[owner] == nil {
				active[owner] = map[string]bool{}
			}
			if started && !ended && ev.Type != watch.Deleted {
				active[owner][cm.Name] = true
			} else {
				delete(active[owner], cm.Name)
			}
			most[owner] = max(most[owner], len(active[owner]))
			mu.Unlock()
		}
	}()

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
	mu.Lock()
	defer mu.Unlock()
	if most["alice"] > share {
		t.Errorf("alice held %d places at once, more than her share of %d", most["alice"], share)
	}
	if most["alice"] < share {
		t.Errorf("alice never held her %d places at once (at most %d): the tasks did not overlap as the test needs", share, most["alice"])
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
	kubeconfig, err := e.c.ServiceAccountKubeconfig(context.Background(), e.ns, HandlerServiceAccount)
	if err != nil {
		e.t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		e.t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	cfg := envConfig(e.ns)
	config(&cfg)
	srv, err := server.New(rc, cfg, zaptest.NewLogger(e.t, zaptest.Level(e2eLogLevel())).Sugar().Named("second"))
	if err != nil {
		e.t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Echo())
	e.t.Cleanup(hs.Close)
	return hs.URL
}

// postTo sends a binary-mode CloudEvent to a handler.
func (e *env) postTo(url, typ string, data any) (int, string) {
	body, err := json.Marshal(data)
	if err != nil {
		return 0, err.Error()
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	req.Header.Set("Ce-Specversion", "1.0")
	req.Header.Set("Ce-Id", fmt.Sprintf("test-%d-%d", time.Now().UnixNano(), e.posted.Add(1)))
	req.Header.Set("Ce-Source", "e2e-test")
	req.Header.Set("Ce-Type", typ)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}
