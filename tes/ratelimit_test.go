package tes

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCreateRate: each user has its own bucket of creates a minute, filled
// again as time passes; a user past it waits, another does not.
func TestCreateRate(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	c := newCreateLimits(2, 0, func() time.Time { return now })
	for i := 0; i < 2; i++ {
		if d := c.wait("alice"); d != 0 {
			t.Fatalf("alice's create %d waits %v", i+1, d)
		}
	}
	if d := c.wait("alice"); d != 30*time.Second {
		t.Errorf("alice's third create waits %v, want 30s", d)
	}
	if d := c.wait("bob"); d != 0 {
		t.Errorf("bob waits %v for alice's rate", d)
	}
	now = now.Add(30 * time.Second)
	if d := c.wait("alice"); d != 0 {
		t.Errorf("alice waits %v after 30 s", d)
	}
	if d := c.wait("alice"); d == 0 {
		t.Error("alice creates again at once")
	}
	// Past maxCreateLimiters users, the idlest are forgotten: the number
	// kept stays bounded.
	for i := 0; i < maxCreateLimiters+50; i++ {
		now = now.Add(time.Millisecond)
		c.wait(fmt.Sprintf("user-%d", i))
	}
	if n := len(c.users); n > maxCreateLimiters {
		t.Errorf("%d users kept, more than %d", n, maxCreateLimiters)
	}
}

// TestCreateRateLimited: a create past the caller's rate is a 429 with
// Retry-After, and writes nothing.
func TestCreateRateLimited(t *testing.T) {
	a := newAPITest(t)
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	a.srv.creates = newCreateLimits(1, 0, func() time.Time { return now })
	if code, body := a.do(http.MethodPost, "/tasks", helloTask); code != http.StatusOK {
		t.Fatalf("the first create: %d %v", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, a.url+"/tasks", strings.NewReader(helloTask))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
		t.Errorf("the second create: %d, Retry-After %q; want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := len(a.anchors(t)); n != 1 {
		t.Errorf("%d anchors, want the first create's only", n)
	}
}
