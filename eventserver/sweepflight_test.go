package eventserver

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Pings that come while a sweep runs take its result: a burst of pings
// costs one sweep (its LIST of jobs once), and a ping after it ended
// sweeps again.
func TestPingsWhileASweepRunsShareIt(t *testing.T) {
	s := newTestServer()
	client := fake.NewSimpleClientset()
	var lists atomic.Int32
	entered, release := make(chan struct{}, 16), make(chan struct{})
	client.PrependReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		entered <- struct{}{}
		<-release
		return false, nil, nil
	})
	s.Runner.Client = client
	sc := metadatafake.NewTestScheme()
	sc.AddKnownTypeWithName(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMapList"}, &metav1.PartialObjectMetadataList{})
	s.Metadata = metadatafake.NewSimpleMetadataClient(sc)

	const pings = 6
	codes := make([]int, pings)
	bodies := make([]string, pings)
	var wg sync.WaitGroup
	ping := func(i int) {
		defer wg.Done()
		rec := post(t, s, "dev.knative.sources.ping", `{}`, nil)
		codes[i], bodies[i] = rec.Code, rec.Body.String()
	}
	wg.Add(1)
	go ping(0)
	<-entered
	for i := 1; i < pings; i++ {
		wg.Add(1)
		go ping(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.sweeps.waiting("tesk") < pings-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings wait for the sweep, want %d", s.sweeps.waiting("tesk"), pings-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if n := lists.Load(); n != 1 {
		t.Errorf("%d LISTs of jobs for %d pings at once, want 1", n, pings)
	}
	shared := 0
	for i := range pings {
		if codes[i] != http.StatusOK {
			t.Errorf("ping %d: %d %s", i, codes[i], bodies[i])
		}
		if strings.Contains(bodies[i], "covered this ping") {
			shared++
		}
	}
	if shared != pings-1 {
		t.Errorf("%d pings answered as covered, want %d: %q", shared, pings-1, bodies)
	}

	// The next ping sweeps again.
	go func() { <-entered }()
	if rec := post(t, s, "dev.knative.sources.ping", `{}`, nil); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "covered") {
		t.Errorf("a ping after the sweep: %d %s", rec.Code, rec.Body)
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("%d LISTs of jobs after a later ping, want 2", n)
	}
}
