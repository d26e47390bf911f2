package tes

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// signIns is a Basic of a users file, with a clock the test moves and a
// verifier that counts bcrypt's comparisons.
type signIns struct {
	t        *testing.T
	b        *Basic
	file     string
	now      time.Time
	verifies int
}

func newSignIns(t *testing.T, l SignInLimits, lines ...string) *signIns {
	t.Helper()
	s := &signIns{t: t, file: filepath.Join(t.TempDir(), "users"), now: time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)}
	writeUsers(t, s.file, lines...)
	b, err := NewBasic(BasicConfig{File: s.file, Limits: l, Now: func() time.Time { return s.now },
		Verify: func(hash, password []byte) error {
			s.verifies++
			return bcrypt.CompareHashAndPassword(hash, password)
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	return s
}

// signIn signs in from remote; it returns "ok", "401" or "429 <seconds>"
// ("429 address <seconds>" for an address locked out) and the number of
// bcrypt comparisons it made.
func (s *signIns) signIn(user, password, remote string) (string, int) {
	s.t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, password)
	if remote != "" {
		r.RemoteAddr = remote
	}
	before := s.verifies
	c, err := s.b.Authenticate(r)
	n := s.verifies - before
	var th *SignInsThrottled
	switch {
	case errors.As(err, &th) && th.Address:
		return fmt.Sprintf("429 address %d", th.RetryAfter()), n
	case errors.As(err, &th):
		return fmt.Sprintf("429 %d", th.RetryAfter()), n
	case err != nil:
		return "401", n
	case c.Subject != user:
		s.t.Fatalf("signed in as %q, want %q", c.Subject, user)
	}
	return "ok", n
}

// step is one sign-in of a table: after the clock moved by after (and the
// users file was rewritten to file, if set), user signs in with password
// from remote ("" is 192.0.2.1:1234, httptest's); want is signIn's answer
// and verifies the bcrypt comparisons it makes.
type step struct {
	after          time.Duration
	file           []string
	user, password string
	remote         string
	want           string
	verifies       int
}

func (s *signIns) run(steps []step) {
	s.t.Helper()
	for i, st := range steps {
		s.now = s.now.Add(st.after)
		if st.file != nil {
			writeUsers(s.t, s.file, st.file...)
			if changed, err := s.b.Reload(); !changed || err != nil {
				s.t.Fatalf("step %d: the users file rewritten: changed %v, %v", i+1, changed, err)
			}
		}
		got, n := s.signIn(st.user, st.password, st.remote)
		if got != st.want || n != st.verifies {
			s.t.Errorf("step %d (%s:%s from %q, %v later): %s with %d bcrypt comparisons, want %s with %d", i+1, st.user, st.password, st.remote, st.after, got, n, st.want, st.verifies)
		}
	}
}

// TestSignInCache: a password that checked out is taken again without
// bcrypt until CacheFor has passed or the users file changed (a new hash,
// even of the same password; the user gone); a wrong password is always
// compared.
func TestSignInCache(t *testing.T) {
	alice := htpasswd(t, "alice", "wonderland")
	bob := htpasswd(t, "bob", "builder")
	s := newSignIns(t, SignInLimits{CacheFor: 5 * time.Minute}, alice, bob)
	s.run([]step{
		{user: "alice", password: "wonderland", want: "ok", verifies: 1},
		{user: "alice", password: "wonderland", want: "ok", verifies: 0},
		{user: "alice", password: "wonderland", remote: "198.51.100.7:80", want: "ok", verifies: 0},
		{user: "alice", password: "Wonderland", want: "401", verifies: 1},
		{user: "alice", password: "wonderland", want: "ok", verifies: 0},
		{user: "bob", password: "builder", want: "ok", verifies: 1},
		{user: "bob", password: "wonderland", want: "401", verifies: 1},
		{after: 5*time.Minute - time.Second, user: "alice", password: "wonderland", want: "ok", verifies: 0},
		{after: time.Second, user: "alice", password: "wonderland", want: "ok", verifies: 1},
		{user: "alice", password: "wonderland", want: "ok", verifies: 0},
		// A new hash of the same password: compared again.
		{file: []string{htpasswd(t, "alice", "wonderland"), bob}, user: "alice", password: "wonderland", want: "ok", verifies: 1},
		{user: "alice", password: "wonderland", want: "ok", verifies: 0},
		// A new password: the old one is refused at once.
		{file: []string{htpasswd(t, "alice", "looking-glass"), bob}, user: "alice", password: "wonderland", want: "401", verifies: 1},
		{user: "alice", password: "looking-glass", want: "ok", verifies: 1},
		{user: "alice", password: "looking-glass", want: "ok", verifies: 0},
		// The user gone: refused at once, at the cost of a comparison.
		{file: []string{bob}, user: "alice", password: "looking-glass", want: "401", verifies: 1},
		{user: "bob", password: "builder", want: "ok", verifies: 1},
	})
}

// TestVerifiedDigest: a remembered password matches only its user, its
// password and its hash, until its time.
func TestVerifiedDigest(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	v := newVerified(10)
	v.add("alice", "pw", []byte("hash-1"), now.Add(time.Minute))
	for _, c := range []struct {
		name, user, password, hash string
		at                         time.Duration
		want                       bool
	}{
		{"the same", "alice", "pw", "hash-1", 0, true},
		{"just before its time", "alice", "pw", "hash-1", time.Minute - 1, true},
		{"at its time", "alice", "pw", "hash-1", time.Minute, false},
		{"another password", "alice", "pw2", "hash-1", 0, false},
		{"another hash", "alice", "pw", "hash-2", 0, false},
		{"another user", "bob", "pw", "hash-1", 0, false},
		{"the boundary moved", "alice", "pwh", "ash-1", 0, false},
	} {
		if got := v.ok(c.user, c.password, []byte(c.hash), now.Add(c.at)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if w := newVerified(10); w.digest("alice", "pw", nil) == v.digest("alice", "pw", nil) {
		t.Error("two processes' digests of the same password are equal: the key is not random")
	}
	v.forget()
	if v.ok("alice", "pw", []byte("hash-1"), now) {
		t.Error("forget kept a password")
	}
}

// TestSignInLockout: limit failures of a user name within the window lock
// it out: its sign-ins, even with the right password, are a 429 without
// bcrypt until the lockout ends; each next lockout doubles, up to
// MaxLockout, and a quiet MaxLockout after one starts again from
// MinLockout. Other users and failures spread over more than the window
// are not locked out.
func TestSignInLockout(t *testing.T) {
	l := SignInLimits{PerUser: 3, PerAddress: 1000, Window: time.Minute, MinLockout: time.Second, MaxLockout: 4 * time.Second}
	s := newSignIns(t, l, htpasswd(t, "alice", "wonderland"), htpasswd(t, "bob", "builder"))
	fail3 := func(d time.Duration) []step {
		return []step{
			{user: "alice", password: "guess-1", want: "401", verifies: 1},
			{user: "alice", password: "guess-2", want: "401", verifies: 1},
			{user: "alice", password: "guess-3", want: "401", verifies: 1},
			{user: "alice", password: "guess-4", want: fmt.Sprintf("429 %d", int(d.Seconds())), verifies: 0},
			{user: "alice", password: "wonderland", want: fmt.Sprintf("429 %d", int(d.Seconds())), verifies: 0},
		}
	}
	var steps []step
	steps = append(steps, fail3(time.Second)...)
	steps = append(steps,
		step{user: "bob", password: "builder", want: "ok", verifies: 1},
		step{after: 999 * time.Millisecond, user: "alice", password: "wonderland", want: "429 1", verifies: 0},
		step{after: time.Millisecond, user: "alice", password: "wonderland", want: "ok", verifies: 1})
	steps = append(steps, fail3(2*time.Second)...)
	steps = append(steps,
		step{after: time.Second, user: "alice", password: "wonderland", want: "429 1", verifies: 0},
		step{after: time.Second, user: "alice", password: "wonderland", want: "ok", verifies: 0}) // remembered
	steps = append(steps, fail3(4*time.Second)...)
	steps = append(steps, step{after: 4 * time.Second, user: "alice", password: "wonderland", want: "ok", verifies: 0})
	steps = append(steps, fail3(4*time.Second)...) // the longest
	// Quiet for MaxLockout after the lockout: from the shortest again.
	steps = append(steps, step{after: 8 * time.Second, user: "alice", password: "wonderland", want: "ok", verifies: 0})
	steps = append(steps, fail3(time.Second)...)
	// Failures spread over more than the window lock nothing out.
	steps = append(steps,
		step{after: time.Second, user: "bob", password: "guess", want: "401", verifies: 1},
		step{user: "bob", password: "guess", want: "401", verifies: 1},
		step{after: time.Minute, user: "bob", password: "guess", want: "401", verifies: 1},
		step{user: "bob", password: "guess", want: "401", verifies: 1},
		step{user: "bob", password: "builder", want: "ok", verifies: 0}) // remembered
	// An unknown user name counts as a known one does.
	steps = append(steps,
		step{user: "mallory", password: "x", want: "401", verifies: 1},
		step{user: "mallory", password: "x", want: "401", verifies: 1},
		step{user: "mallory", password: "x", want: "401", verifies: 1},
		step{user: "mallory", password: "x", want: "429 1", verifies: 0})
	s.run(steps)
}

// TestSignInAddressLockout: PerAddress failures from one address, of any
// user names, lock the address out: a sign-in from it that bcrypt would
// have to check is a 429, one remembered passes; other addresses are not
// locked out; an IPv6 address counts as its /64.
func TestSignInAddressLockout(t *testing.T) {
	l := SignInLimits{PerUser: 100, PerAddress: 3, Window: time.Minute, MinLockout: 10 * time.Second, MaxLockout: time.Minute}
	s := newSignIns(t, l, htpasswd(t, "alice", "wonderland"), htpasswd(t, "bob", "builder"))
	const a, b = "203.0.113.5:4000", "203.0.113.6:4000"
	s.run([]step{
		{user: "alice", password: "wonderland", remote: a, want: "ok", verifies: 1},
		{user: "u1", password: "x", remote: a, want: "401", verifies: 1},
		{user: "u2", password: "x", remote: a, want: "401", verifies: 1},
		{user: "u3", password: "x", remote: "203.0.113.5:4001", want: "401", verifies: 1},
		{user: "u4", password: "x", remote: a, want: "429 address 10", verifies: 0},
		{user: "bob", password: "builder", remote: a, want: "429 address 10", verifies: 0},
		{user: "alice", password: "wonderland", remote: a, want: "ok", verifies: 0},
		{user: "alice", password: "guess", remote: a, want: "429 address 10", verifies: 0},
		{user: "bob", password: "builder", remote: b, want: "ok", verifies: 1},
		{after: 10 * time.Second, user: "u5", password: "x", remote: a, want: "401", verifies: 1},
		{user: "v1", password: "x", remote: "[2001:db8:1:2::1]:443", want: "401", verifies: 1},
		{user: "v2", password: "x", remote: "[2001:db8:1:2::ffff]:443", want: "401", verifies: 1},
		{user: "v3", password: "x", remote: "[2001:db8:1:2:abcd::9]:443", want: "401", verifies: 1},
		{user: "v4", password: "x", remote: "[2001:db8:1:2::1]:443", want: "429 address 10", verifies: 0},
		{user: "v5", password: "x", remote: "[2001:db8:1:3::1]:443", want: "401", verifies: 1},
		// A loopback peer is a proxy of the pod's own (Knative's
		// queue-proxy) that every client comes through: never locked out
		// as an address, so one client's guesses lock no one else out.
		{user: "w1", password: "x", remote: "127.0.0.1:5000", want: "401", verifies: 1},
		{user: "w2", password: "x", remote: "127.0.0.1:5001", want: "401", verifies: 1},
		{user: "w3", password: "x", remote: "127.0.0.1:5002", want: "401", verifies: 1},
		{user: "w4", password: "x", remote: "127.0.0.1:5003", want: "401", verifies: 1},
		{user: "bob", password: "builder", remote: "127.0.0.1:5004", want: "ok", verifies: 0},
		{user: "alice", password: "builder", remote: "[::1]:5005", want: "401", verifies: 1},
	})
}

// TestSignInChecksBounded: at most Checks bcrypt comparisons run at once;
// a sign-in that finds none free within Queue is a 429 without a
// comparison, and counts as no failure of its user name.
func TestSignInChecksBounded(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "alice", "wonderland"))
	started, release := make(chan struct{}, 4), make(chan struct{})
	var mu sync.Mutex
	verifies := 0
	b, err := NewBasic(BasicConfig{File: file, Limits: SignInLimits{Checks: 1, Queue: 20 * time.Millisecond, PerUser: 1},
		Verify: func(hash, password []byte) error {
			mu.Lock()
			verifies++
			mu.Unlock()
			started <- struct{}{}
			select {
			case <-release:
			case <-time.After(5 * time.Second): // a check not held back
			}
			return bcrypt.CompareHashAndPassword(hash, password)
		}})
	if err != nil {
		t.Fatal(err)
	}
	signIn := func(user, password string) error {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetBasicAuth(user, password)
		_, err := b.Authenticate(r)
		return err
	}
	first := make(chan error, 1)
	go func() { first <- signIn("alice", "wonderland") }()
	<-started
	var th *SignInsThrottled
	if err := signIn("mallory", "guess"); !errors.As(err, &th) || !th.Busy || th.RetryAfter() != 1 {
		t.Fatalf("a sign-in while every check is taken: %v, want a 429 (busy) with Retry-After 1", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the sign-in that held the check: %v", err)
	}
	if verifies != 1 {
		t.Errorf("%d bcrypt comparisons, want 1: the refused sign-in made none", verifies)
	}
	// The refusal was no failure of mallory's: one failure (PerUser 1)
	// locks it out now, not before.
	if err := signIn("mallory", "guess"); err == nil || errors.As(err, &th) {
		t.Fatalf("mallory's first checked guess: %v, want a 401", err)
	}
	if err := signIn("mallory", "guess"); !errors.As(err, &th) || th.Busy {
		t.Fatalf("mallory's second guess: %v, want the user name locked out", err)
	}
}

// TestAddressKey: the address is the connection's peer, never
// X-Forwarded-For; IPv4 in IPv6 is IPv4; IPv6 counts as its /64.
func TestAddressKey(t *testing.T) {
	for _, c := range []struct{ remote, xff, want string }{
		{"192.0.2.1:1234", "", "192.0.2.1"},
		{"192.0.2.1:1234", "198.51.100.9", "192.0.2.1"},
		{"127.0.0.1:55000", "203.0.113.1, 10.0.0.3", ""},
		{"[::1]:8080", "", ""},
		{"[::ffff:127.0.0.2]:80", "", ""},
		{"[::ffff:192.0.2.1]:80", "", "192.0.2.1"},
		{"[2001:db8::1]:80", "", "2001:db8::/64"},
		{"[fe80::1%eth0]:80", "", "fe80::/64"},
		{"not an address", "", "not an address"},
		{"192.0.2.1", "", "192.0.2.1"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := addressKey(r); got != c.want {
			t.Errorf("%q (X-Forwarded-For %q): %q, want %q", c.remote, c.xff, got, c.want)
		}
	}
}

// TestSignInKeysBounded: however many user names and addresses fail, and
// however many users sign in, at most MaxKeys of each are kept; the least
// recently used goes first.
func TestSignInKeysBounded(t *testing.T) {
	var lines []string
	for i := range 8 {
		lines = append(lines, htpasswd(t, fmt.Sprintf("user-%d", i), "pw"))
	}
	s := newSignIns(t, SignInLimits{MaxKeys: 5, PerUser: 2, PerAddress: 1000}, lines...)
	for i := range 50 {
		s.signIn(fmt.Sprintf("guess-%d", i), "x", fmt.Sprintf("198.51.100.%d:1", i))
	}
	if u, a := s.b.failedUsers.keys(), s.b.failedAddresses.keys(); u != 5 || a != 5 {
		t.Errorf("%d user names and %d addresses tracked, want 5 of each", u, a)
	}
	for i := range 8 {
		s.signIn(fmt.Sprintf("user-%d", i), "pw", "")
	}
	if n := s.b.cache.m.len(); n != 5 {
		t.Errorf("%d passwords remembered, want 5", n)
	}
	if got, n := s.signIn("user-7", "pw", ""); got != "ok" || n != 0 {
		t.Errorf("the user signed in last: %s with %d comparisons, want it remembered", got, n)
	}
	if got, n := s.signIn("user-0", "pw", ""); got != "ok" || n != 1 {
		t.Errorf("the user signed in first: %s with %d comparisons, want it forgotten", got, n)
	}

	// The least recently failed key goes, the one that failed since
	// stays: its count, and so its lockout, hold.
	f := newFailures(2, SignInLimits{MaxKeys: 3}.withDefaults())
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for _, k := range []string{"a", "b", "c", "a", "d", "a"} {
		f.fail(k, now)
	}
	if f.wait("a", now) == 0 {
		t.Error("a, failing again and again, was forgotten and not locked out")
	}
	if _, ok := f.m.get("b"); ok {
		t.Error("b, the least recently failed, is still tracked")
	}
}

// TestSignInLimitsDefaults: a zero field is its default; the defaults are
// the documented ones.
func TestSignInLimitsDefaults(t *testing.T) {
	want := SignInLimits{CacheFor: 5 * time.Minute, PerUser: 10, PerAddress: 100, Window: time.Minute, MinLockout: time.Second, MaxLockout: 5 * time.Minute, MaxKeys: 10000,
		Checks: runtime.GOMAXPROCS(0), Queue: 2 * time.Second}
	if got := (SignInLimits{}).withDefaults(); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	if got := (SignInLimits{MinLockout: 10 * time.Minute}).withDefaults(); got.MaxLockout != 10*time.Minute {
		t.Errorf("a first lockout past the default longest: longest %v, want 10m", got.MaxLockout)
	}
}

// TestSignInThrottledOverHTTP: through the API, failed sign-ins end in a
// 429 with Retry-After and a JSON message, no challenge and no bcrypt; the
// lockout ends; a bearer token is not locked out with Basic.
func TestSignInThrottledOverHTTP(t *testing.T) {
	file := filepath.Join(t.TempDir(), "users")
	writeUsers(t, file, htpasswd(t, "alice", "wonderland"))
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	verifies := 0
	b, err := NewBasic(BasicConfig{File: file, Limits: SignInLimits{PerUser: 2, MinLockout: 30 * time.Second},
		Now: func() time.Time { return now },
		Verify: func(hash, password []byte) error {
			verifies++
			return bcrypt.CompareHashAndPassword(hash, password)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range []struct {
		name string
		auth Authenticator
	}{{"basic", b}, {"schemes", Schemes{Basic: b}}} {
		a := newAPITestWith(t, api.auth)
		get := func(user, password string) (*http.Response, string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, a.url+"/tasks/no-such-task", nil)
			req.SetBasicAuth(user, password)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp, string(body)
		}
		for i := range 2 {
			if resp, body := get("alice", "guess"); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s: failure %d: %d %s", api.name, i+1, resp.StatusCode, body)
			}
		}
		before := verifies
		resp, body := get("alice", "wonderland")
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" ||
			!strings.Contains(body, `"error":"too many failed sign-ins for this user name: try again in 30 s"`) ||
			resp.Header.Get("WWW-Authenticate") != "" || verifies != before {
			t.Errorf("%s: locked out: %d, Retry-After %q, WWW-Authenticate %q, %s, %d comparisons; want 429, 30, none, the message, none",
				api.name, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("WWW-Authenticate"), body, verifies-before)
		}
		now = now.Add(25 * time.Second)
		if resp, _ := get("alice", "wonderland"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "5" {
			t.Errorf("%s: 25 s later: %d, Retry-After %q; want 429, 5", api.name, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		now = now.Add(5 * time.Second)
		if resp, body := get("alice", "wonderland"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: the lockout over: %d %s, want 404 (signed in, no such task)", api.name, resp.StatusCode, body)
		}
		now = now.Add(time.Hour) // the next API starts afresh
	}
}
