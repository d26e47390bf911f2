package chaos

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAPIFaultProxyFaultsWritesAndForwardsTheRest(t *testing.T) {
	var backendWrites, backendReads atomic.Int64
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet {
			backendReads.Add(1)
		} else {
			backendWrites.Add(1)
		}
		w.Write([]byte(`{}`))
	}))
	defer api.Close()
	u, _ := url.Parse(api.URL)
	p := NewAPIFaultProxy(u, api.Client().Transport, 3)
	p.MaxReadDelay = 5 * time.Millisecond
	p.LostAnswerRate = 0.03
	front := httptest.NewTLSServer(p)
	defer front.Close()
	c := front.Client()

	const n = 1000
	faults := map[int]int{}
	for i := range n {
		method := []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}[i%4]
		req, _ := http.NewRequest(method, front.URL+"/api/v1/namespaces/x/pods", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			faults[resp.StatusCode]++
		case http.StatusInternalServerError, http.StatusConflict:
			faults[resp.StatusCode]++
		default:
			t.Fatalf("unexpected status %d", resp.StatusCode)
		}
	}
	for range 100 {
		req, _ := http.NewRequest(http.MethodGet, front.URL+"/api/v1/pods", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("read answered %d", resp.StatusCode)
		}
	}

	cnt := p.Counts()
	total, lost := 0, cnt.Lost()
	for _, v := range cnt.Faulted {
		total += v
	}
	if byCode := cnt.ByCode(429) + cnt.ByCode(500) + cnt.ByCode(409); byCode != total {
		t.Errorf("faults by code %d, %d, %d: %d in all, want %d", cnt.ByCode(429), cnt.ByCode(500), cnt.ByCode(409), byCode, total)
	}
	if len(cnt.LostAnswers) != 4 {
		t.Errorf("lost answers by verb %v, want each of the 4 write verbs", cnt.LostAnswers)
	}
	// A lost answer's write was done: it reached the API server.
	if cnt.Writes != n || int(backendWrites.Load()) != n-total {
		t.Errorf("writes %d, forwarded %d, faulted %d, done and answered 500 %d", cnt.Writes, backendWrites.Load(), total, lost)
	}
	if faults[429]+faults[500]+faults[409] != total+lost {
		t.Errorf("client saw %v, proxy counted %v", faults, cnt.Faulted)
	}
	// 3 % of 1000: far outside 8..60 means the rate is wrong.
	if lost < 8 || lost > 60 {
		t.Errorf("%d of %d writes done and answered 500 at rate 0.03", lost, n)
	}
	// 5 % of 1000: far outside 20..90 means the rate is wrong.
	if total < 20 || total > 90 {
		t.Errorf("faulted %d of %d writes at rate 0.05", total, n)
	}
	if len(faults) != 3 {
		t.Errorf("not all fault codes seen: %v", faults)
	}
	// The codes come in turn: their counts differ by at most one.
	if c := []int{cnt.ByCode(429), cnt.ByCode(500), cnt.ByCode(409)}; max(c[0], c[1], c[2])-min(c[0], c[1], c[2]) > 1 {
		t.Errorf("codes 429, 500, 409 answered %v times: not in turn", c)
	}
	if backendReads.Load() != 100 || cnt.ReadsDelay == 0 {
		t.Errorf("reads forwarded %d, delayed %d", backendReads.Load(), cnt.ReadsDelay)
	}
}
