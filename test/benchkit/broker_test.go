package benchkit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func post(t *testing.T, url, id, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Ce-Id", id)
	req.Header.Set("Ce-Type", "job.finished")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBrokerDeliversEachEventOnceWithinItsParallelism(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	var inFlight, most atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.Header.Get("Ce-Id")] += string(body)
		mu.Unlock()
	}))
	defer target.Close()
	b := NewBroker(target.URL, 3, 100)
	front := httptest.NewServer(b)
	defer front.Close()
	defer b.Close()
	for i := range 20 {
		id := string(rune('a' + i))
		if code := post(t, front.URL, id, "body-"+id); code != http.StatusAccepted {
			t.Fatalf("event %s answered %d, want 202", id, code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Fatalf("delivered %d distinct events, want 20", len(got))
	}
	for id, body := range got {
		if body != "body-"+id {
			t.Errorf("event %s arrived as %q (headers or body mixed up, or delivered twice)", id, body)
		}
	}
	if m := most.Load(); m > 3 || m < 2 {
		t.Errorf("at most %d deliveries ran at once, want 2-3 of a parallelism of 3", m)
	}
	c := b.Counts()
	if c.Accepted != 20 || c.Delivered != 20 || c.Retried != 0 || c.Dead != 0 || c.MaxQueued < 1 {
		t.Errorf("counts %+v", c)
	}
}

func TestBrokerRetriesWithBackoffThenGivesUp(t *testing.T) {
	var calls sync.Map // Ce-Id -> *atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, _ := calls.LoadOrStore(r.Header.Get("Ce-Id"), new(atomic.Int64))
		n := v.(*atomic.Int64).Add(1)
		switch {
		case r.Header.Get("Ce-Id") == "flaky" && n <= 2:
			w.WriteHeader(http.StatusInternalServerError)
		case r.Header.Get("Ce-Id") == "broken":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer target.Close()
	b := NewBroker(target.URL, 2, 10)
	b.Retries, b.BackoffDelay = 3, 10*time.Millisecond
	front := httptest.NewServer(b)
	defer front.Close()
	defer b.Close()
	start := time.Now()
	post(t, front.URL, "flaky", "x")
	post(t, front.URL, "broken", "y")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	count := func(id string) int64 {
		v, ok := calls.Load(id)
		if !ok {
			return 0
		}
		return v.(*atomic.Int64).Load()
	}
	if n := count("flaky"); n != 3 {
		t.Errorf("flaky: %d attempts, want 3 (two failures, then success)", n)
	}
	if n := count("broken"); n != 4 {
		t.Errorf("broken: %d attempts, want 4 (the first and 3 retries)", n)
	}
	// broken waited 10 + 20 + 40 ms between its attempts.
	if d := time.Since(start); d < 70*time.Millisecond {
		t.Errorf("the retries took %s, less than their backoff of 70ms", d)
	}
	c := b.Counts()
	if c.Delivered != 1 || c.Dead != 1 || c.Retried != 5 {
		t.Errorf("counts %+v, want 1 delivered, 1 dead, 5 retries", c)
	}
}

func TestBrokerRefusesWhenItsQueueIsFull(t *testing.T) {
	release := make(chan struct{})
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer target.Close()
	b := NewBroker(target.URL, 1, 1)
	front := httptest.NewServer(b)
	defer front.Close()
	defer b.Close()
	// One event held by the only delivery, one in the queue, the next refused.
	codes := []int{post(t, front.URL, "1", "")}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.queue) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	codes = append(codes, post(t, front.URL, "2", ""), post(t, front.URL, "3", ""))
	close(release)
	want := []int{http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("answers %v, want %v", codes, want)
		}
	}
	if c := b.Counts(); c.Refused != 1 || c.Accepted != 2 {
		t.Errorf("counts %+v", c)
	}
}
