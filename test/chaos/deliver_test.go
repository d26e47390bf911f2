package chaos

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDeliveryProxyForwardsDuplicatesAndDrops(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Ce-Id") != string(b) {
			t.Errorf("header Ce-Id %q does not match body %q", r.Header.Get("Ce-Id"), b)
		}
		mu.Lock()
		got[string(b)]++
		mu.Unlock()
	}))
	defer target.Close()

	p := NewDeliveryProxy(target.URL, 7, 0.1, 3, 20*time.Millisecond)
	front := httptest.NewServer(p)
	defer front.Close()

	const n = 300
	for i := range n {
		id := fmt.Sprintf("ev-%d", i)
		req, _ := http.NewRequest(http.MethodPost, front.URL, strings.NewReader(id))
		req.Header.Set("Ce-Id", id)
		req.Header.Set("Ce-Type", []string{"a", "b"}[i%2])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	p.Wait()
	c := p.Counts()

	if c.Received != n {
		t.Errorf("received %d, want %d", c.Received, n)
	}
	if c.Failed != 0 {
		t.Errorf("%d forwards failed", c.Failed)
	}
	var dup, copies int64
	for _, k := range got {
		if k < 1 || k > 3 {
			t.Errorf("an event arrived %d times", k)
		}
		if k > 1 {
			dup++
		}
		copies += int64(k)
	}
	if int64(len(got)) != n-c.Dropped {
		t.Errorf("%d distinct events arrived, want %d received - %d dropped", len(got), n, c.Dropped)
	}
	if dup != c.Duplicated || copies != c.Forwarded {
		t.Errorf("arrived dup=%d copies=%d, counted dup=%d forwarded=%d", dup, copies, c.Duplicated, c.Forwarded)
	}
	// 10 % of 300: a binomial count far outside 10..60 means the rate is wrong.
	if c.Dropped < 10 || c.Dropped > 60 {
		t.Errorf("dropped %d of %d at rate 0.1", c.Dropped, n)
	}
	if dup == 0 {
		t.Errorf("no event was duplicated")
	}
	if c.DroppedByType["a"]+c.DroppedByType["b"] != c.Dropped || c.DroppedByType["a"] == 0 || c.DroppedByType["b"] == 0 {
		t.Errorf("dropped by type %v, dropped %d", c.DroppedByType, c.Dropped)
	}
}
