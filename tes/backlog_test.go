package tes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// followMetadata gives the server a metadata client that holds every
// ConfigMap the typed fake is given from now on, as the API server's watch
// cache would (at once, or, with lag, not at all), and records the options
// of its lists.
func (a *apiTest) followMetadata(lag bool) *[]metav1.ListOptions {
	a.t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		a.t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme)
	var mu sync.Mutex
	var lists []metav1.ListOptions
	md.PrependReactor("list", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		lists = append(lists, action.(k8stesting.ListActionImpl).ListOptions)
		return false, nil, nil
	})
	a.client.PrependReactor("create", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		cm := action.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap)
		if !lag {
			m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: *cm.ObjectMeta.DeepCopy()}
			if err := md.Tracker().Create(configMapsResource, m, cm.Namespace); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	a.srv.Metadata = md
	return &lists
}

// anchorOf writes an anchor as another create, or another service, left it:
// its user's (none: ""), ended in state (none: ""), of size bytes (0: no
// size recorded).
func (a *apiTest) anchorOf(name, user, state string, size int64) {
	a.t.Helper()
	cm := taskmeta.NewAnchor("tes", name, []byte("x"), taskmeta.AnchorInfo{})
	if user != "" {
		cm.Labels[taskmeta.LabelCreator] = user
	}
	if state != "" {
		cm.Labels[taskmeta.LabelState] = state
		cm.Annotations[taskmeta.AnnotationState] = state
	}
	if size > 0 {
		cm.Annotations[taskmeta.AnnotationSize] = strconv.FormatInt(size, 10)
	}
	if _, err := a.client.CoreV1().ConfigMaps("tes").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		a.t.Fatal(err)
	}
}

// createAs creates helloTask as a user (X-User, as byHeader reads it); it
// returns the status, the error message and Retry-After.
func (a *apiTest) createAs(user string) (int, string, string) {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.url+"/tasks", strings.NewReader(helloTask))
	req.Header.Set("Content-Type", "application/json")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Error, resp.Header.Get("Retry-After")
}

// sameSelector reports whether two label selectors select the same.
func sameSelector(a, b string) bool {
	sa, errA := labels.Parse(a)
	sb, errB := labels.Parse(b)
	return errA == nil && errB == nil && sa.String() == sb.String()
}

// TestUnfinishedListOptions: the count is one LIST of the metadata of the
// user's anchors that carry no final state, from the API server's watch
// cache (resourceVersion 0: no read of etcd).
func TestUnfinishedListOptions(t *testing.T) {
	for _, c := range []struct{ user, selector string }{
		{"alice", "taskmaster-name,!tesk.ga4gh.org/state,creator-user-id=alice"},
		{"", "taskmaster-name,!tesk.ga4gh.org/state,!creator-user-id"},
	} {
		got := unfinishedListOptions(c.user)
		if got != (metav1.ListOptions{LabelSelector: c.selector, ResourceVersion: "0"}) {
			t.Errorf("user %q: %+v, want the selector %s and resourceVersion 0", c.user, got, c.selector)
		}
	}
}

// TestUnfinishedTasksBound: a user's creates are admitted while it has
// fewer tasks that have not ended than the bound; at the bound a create is
// a 429 naming the bound and its setting, and writes and posts nothing.
// Ended tasks, and other users' tasks, do not count; a task that ends makes
// room. The count is one metadata LIST of the user's unfinished anchors
// from the watch cache.
func TestUnfinishedTasksBound(t *testing.T) {
	a := newAPITestWith(t, byHeader{})
	lists := a.followMetadata(false)
	a.srv.Config.Backlog = Backlog{Tasks: 3}
	a.anchorOf("t-alice-1", "alice", "", 0)
	for i := range 3 {
		a.anchorOf(fmt.Sprintf("t-alice-done-%d", i), "alice", "COMPLETE", 0)
	}
	for i := range 2 {
		a.anchorOf(fmt.Sprintf("t-bob-%d", i), "bob", "", 0)
	}
	// A task's other ConfigMaps carry its label: not anchors, not counted.
	other := taskmeta.NewAnchor("tes", "t-alice-1-extra", nil, taskmeta.AnchorInfo{})
	other.Labels[taskmeta.LabelTask], other.Labels[taskmeta.LabelCreator] = "t-alice-1", "alice"
	if _, err := a.client.CoreV1().ConfigMaps("tes").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if code, msg, _ := a.createAs("alice"); code != http.StatusOK {
			t.Fatalf("alice's create %d under the bound: %d %s", i+1, code, msg)
		}
	}
	before, events := len(a.anchors(t)), len(a.sink.got())
	code, msg, retry := a.createAs("alice")
	if code != http.StatusTooManyRequests || retry != "60" || !strings.Contains(msg, "TES_MAX_UNFINISHED_TASKS_PER_USER") ||
		!strings.Contains(msg, "you have 3 tasks that have not ended") || !strings.Contains(msg, "each user have 3") {
		t.Fatalf("alice's create at the bound: %d %q, Retry-After %q; want 429 naming the bound, 60", code, msg, retry)
	}
	if n := len(a.anchors(t)); n != before || len(a.sink.got()) != events {
		t.Errorf("the refused create wrote %d anchors and posted %d events", n-before, len(a.sink.got())-events)
	}
	if code, msg, _ := a.createAs("bob"); code != http.StatusOK {
		t.Errorf("bob's create, with alice at her bound: %d %s", code, msg)
	}
	// Her first task ends: room for one more.
	if _, err := a.srv.Metadata.Resource(configMapsResource).Namespace("tes").Patch(context.Background(), "t-alice-1", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"`+taskmeta.LabelState+`":"COMPLETE"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, msg, _ := a.createAs("alice"); code != http.StatusOK {
		t.Errorf("alice's create once a task ended: %d %s", code, msg)
	}
	if code, _, _ := a.createAs("alice"); code != http.StatusTooManyRequests {
		t.Errorf("alice's create at the bound again: %d, want 429", code)
	}
	if len(*lists) == 0 || !sameSelector((*lists)[0].LabelSelector, "taskmaster-name,!tesk.ga4gh.org/state,creator-user-id=alice") {
		t.Errorf("lists %+v, want alice's unfinished anchors", *lists)
	}
}

// TestUnfinishedBytesBound: what a user's unfinished tasks keep in etcd is
// summed from the estimates their creates recorded (Footprint: the
// anchor, its executors' Jobs and Pods, the task's PVC, filers and
// Events); a create that would pass
// the bound is a 429 naming it and writes nothing; ended tasks and other
// users' tasks do not count. A task larger than the whole bound is a 400:
// no wait admits it.
func TestUnfinishedBytesBound(t *testing.T) {
	a := newAPITestWith(t, byHeader{})
	a.followMetadata(false)
	if code, msg, _ := a.createAs("carol"); code != http.StatusOK {
		t.Fatalf("carol's create: %d %s", code, msg)
	}
	l, err := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("anchors %v %v", l, err)
	}
	cm := l.Items[0]
	size, err := strconv.ParseInt(cm.Annotations[taskmeta.AnnotationSize], 10, 64)
	if want := int64(cm.Size()) + footprintPerTask + footprintPerExecutor; err != nil || size < want || size > want+4000 {
		t.Fatalf("the task's recorded footprint %q, want its anchor (%d bytes), its executor's Job and Pod and the rest of the task (%d)", cm.Annotations[taskmeta.AnnotationSize], cm.Size(), want)
	}
	// Sizes differ by a few bytes from task to task (the id is in the
	// gzipped task): the bound leaves room for one more, not two.
	bound := 3*size + 50
	a.srv.Config.Backlog = Backlog{Bytes: bound}
	a.anchorOf("t-alice-1", "alice", "", size+100)
	a.anchorOf("t-alice-done", "alice", "COMPLETE", 100*size)
	a.anchorOf("t-bob-1", "bob", "", 100*size)
	// An anchor without a recorded size (the TESK API's) counts as a task.
	a.anchorOf("t-alice-tesk", "alice", "", 0)
	code, msg, _ := a.createAs("alice")
	if code != http.StatusOK {
		t.Fatalf("alice's create within the bound: %d %s", code, msg)
	}
	held := size + 100 + recorded(t, a, "alice")
	before := len(a.anchors(t))
	code, msg, retry := a.createAs("alice")
	wantMsg := fmt.Sprintf("your 3 tasks that have not ended keep about %d bytes in etcd, and this one's", held)
	if code != http.StatusTooManyRequests || retry != "60" || !strings.Contains(msg, "TES_MAX_UNFINISHED_BYTES_PER_USER") || !strings.Contains(msg, wantMsg) ||
		!strings.Contains(msg, fmt.Sprintf("would pass the %d bytes this service lets each user hold", bound)) {
		t.Fatalf("alice's create past the bound: %d %q, Retry-After %q; want 429 saying %q", code, msg, retry, wantMsg)
	}
	if n := len(a.anchors(t)); n != before {
		t.Errorf("the refused create wrote %d anchors", n-before)
	}
	if code, msg, _ := a.createAs("dave"); code != http.StatusOK {
		t.Errorf("dave's create: %d %s", code, msg)
	}
	a.srv.Config.Backlog = Backlog{Bytes: size - 100}
	code, msg, _ = a.createAs("dave")
	if code != http.StatusBadRequest || !strings.Contains(msg, "TES_MAX_UNFINISHED_BYTES_PER_USER") || !strings.Contains(msg, "would keep about ") ||
		!strings.Contains(msg, fmt.Sprintf("bytes in etcd (its ConfigMap, Jobs, Pods, PVC and Events, as estimated), more than the %d bytes", size-100)) {
		t.Errorf("a task larger than the bound: %d %q, want 400 naming the bound", code, msg)
	}
	a.srv.Config.Backlog = Backlog{}
	if code, msg, _ := a.createAs("alice"); code != http.StatusOK {
		t.Errorf("alice's create without bounds: %d %s", code, msg)
	}
}

// recorded is the size recorded on the one anchor a user created through
// the API.
func recorded(t *testing.T, a *apiTest, user string) int64 {
	t.Helper()
	l, err := a.client.CoreV1().ConfigMaps("tes").List(context.Background(), metav1.ListOptions{LabelSelector: taskmeta.LabelCreator + "=" + user + "," + taskmeta.LabelOrderedID})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("%s's anchors: %v %v", user, l, err)
	}
	n, err := strconv.ParseInt(l.Items[0].Annotations[taskmeta.AnnotationSize], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUnfinishedWithoutAccessControl: without access control every task
// is the one anonymous user's, counted from the anchors without a creator
// label.
func TestUnfinishedWithoutAccessControl(t *testing.T) {
	a := newAPITest(t)
	lists := a.followMetadata(false)
	a.srv.Config.Backlog = Backlog{Tasks: 2}
	a.anchorOf("t-alice-1", "alice", "", 0)
	a.anchorOf("t-anon-1", "", "", 0)
	if code, msg, _ := a.createAs(""); code != http.StatusOK {
		t.Fatalf("create under the bound: %d %s", code, msg)
	}
	if code, _, _ := a.createAs(""); code != http.StatusTooManyRequests {
		t.Errorf("create at the bound: %d, want 429", code)
	}
	if sel := (*lists)[0].LabelSelector; !sameSelector(sel, "taskmaster-name,!tesk.ga4gh.org/state,!creator-user-id") {
		t.Errorf("selector %q", sel)
	}
}

// TestUnfinishedConcurrentCreates: creates of one user that reach one TES
// API process at once are admitted up to the bound, not each on the same
// count; and while the watch cache does not show the tasks created, the
// process counts them itself.
func TestUnfinishedConcurrentCreates(t *testing.T) {
	for _, lag := range []bool{false, true} {
		t.Run(fmt.Sprintf("lag=%v", lag), func(t *testing.T) {
			a := newAPITestWith(t, byHeader{})
			a.followMetadata(lag)
			a.srv.Config.Backlog = Backlog{Tasks: 5}
			var wg sync.WaitGroup
			codes := make([]int, 20)
			for i := range codes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					codes[i], _, _ = a.createAs("alice")
				}()
			}
			wg.Wait()
			ok := 0
			for _, c := range codes {
				switch c {
				case http.StatusOK:
					ok++
				case http.StatusTooManyRequests:
				default:
					t.Errorf("a create answered %d", c)
				}
			}
			if n := len(a.anchors(t)); ok != 5 || n != 5 {
				t.Errorf("%d creates admitted, %d anchors written; want 5 and 5", ok, n)
			}
			if code, _, _ := a.createAs("alice"); code != http.StatusTooManyRequests {
				t.Errorf("a create after them: %d, want 429", code)
			}
		})
	}
}

// TestBacklogsForgetExpired: a create this process made counts until a list
// that started recentFor after it was written (the watch cache shows it by
// then, or the task ended); one still being written always counts; a
// failed create frees its place; users whose creates expired are
// forgotten.
func TestBacklogsForgetExpired(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	var b backlogs
	bound := Backlog{Tasks: 2}
	if _, _, ok := b.admit("alice", nil, t0, "k1", 10, bound); !ok {
		t.Fatal("the first create refused")
	}
	if _, _, ok := b.admit("alice", nil, t0, "k2", 10, bound); !ok {
		t.Fatal("the second create refused")
	}
	if n, bytes, ok := b.admit("alice", nil, t0.Add(time.Hour), "k3", 10, bound); ok || n != 2 || bytes != 20 {
		t.Errorf("while two are written: %d tasks %d bytes admitted %v; want 2, 20, refused", n, bytes, ok)
	}
	b.done("alice", "k1", "", t0)
	b.done("alice", "k2", "t2", t0)
	shown := []metav1.PartialObjectMetadata{{ObjectMeta: taskmeta.NewAnchor("tes", "t2", nil, taskmeta.AnchorInfo{}).ObjectMeta}}
	for _, c := range []struct {
		name   string
		items  []metav1.PartialObjectMetadata
		listed time.Time
		want   int
	}{
		{"not shown yet", nil, t0.Add(time.Second), 1},
		{"shown", shown, t0.Add(time.Second), 1},
		{"expired", nil, t0.Add(recentFor + time.Second), 0},
	} {
		n, _, _ := b.admit("alice", c.items, c.listed, "probe", 0, Backlog{Tasks: 1000})
		b.done("alice", "probe", "", t0)
		if n != c.want {
			t.Errorf("%s: %d tasks, want %d", c.name, n, c.want)
		}
	}
	b.done("bob", "none", "", t0.Add(2*time.Minute))
	b.done("alice", "none", "", t0.Add(2*time.Minute))
	if len(b.users) != 0 {
		t.Errorf("users kept after their creates expired: %v", b.users)
	}
}
