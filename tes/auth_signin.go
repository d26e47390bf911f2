package tes

import (
	"container/list"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"time"
)

// SignInLimits bound HTTP Basic's work and the guesses it answers: a
// password that checked out is remembered for a while, and failed sign-ins
// lock out their user name and their client's address for a while that
// doubles with each lockout. The zero value of a field is its default.
type SignInLimits struct {
	// CacheFor is how long a password that checked out against its
	// user's bcrypt hash is taken again without bcrypt (5 min).
	CacheFor time.Duration
	// PerUser is how many failed sign-ins of one user name within Window
	// lock it out (10); PerAddress how many from one client address (100).
	PerUser, PerAddress int
	// Window is the time over which failures are counted (1 min).
	Window time.Duration
	// MinLockout is the first lockout (1 s), doubled by each next one up
	// to MaxLockout (5 min); a key MaxLockout past its lockout without a
	// failure starts again from MinLockout.
	MinLockout, MaxLockout time.Duration
	// MaxKeys bounds each of the remembered passwords, the user names and
	// the addresses tracked: past it, the one used least recently is
	// forgotten (10,000).
	MaxKeys int
	// Checks is how many bcrypt comparisons run at once (the cores the
	// process may use); a sign-in that finds none free within Queue (2 s)
	// is answered 429, so that a flood of wrong passwords costs the API a
	// bounded share of its CPU, whatever names and addresses it comes from.
	Checks int
	Queue  time.Duration
}

// DefaultSignInLimits are the limits of a zero SignInLimits.
func DefaultSignInLimits() SignInLimits {
	return SignInLimits{
		CacheFor:   5 * time.Minute,
		PerUser:    10,
		PerAddress: 100,
		Window:     time.Minute,
		MinLockout: time.Second,
		MaxLockout: 5 * time.Minute,
		MaxKeys:    10000,
		Checks:     runtime.GOMAXPROCS(0),
		Queue:      2 * time.Second,
	}
}

// withDefaults fills the fields left zero.
func (l SignInLimits) withDefaults() SignInLimits {
	d := DefaultSignInLimits()
	orDefault(&l.CacheFor, d.CacheFor)
	orDefault(&l.PerUser, d.PerUser)
	orDefault(&l.PerAddress, d.PerAddress)
	orDefault(&l.Window, d.Window)
	orDefault(&l.MinLockout, d.MinLockout)
	if l.MaxLockout < l.MinLockout {
		l.MaxLockout = max(d.MaxLockout, l.MinLockout)
	}
	orDefault(&l.MaxKeys, d.MaxKeys)
	orDefault(&l.Checks, d.Checks)
	orDefault(&l.Queue, d.Queue)
	return l
}

// orDefault sets *v to d where it is not above zero.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// SignInsThrottled refuses a sign-in, before its password is checked,
// after too many failed ones: the API answers 429 with Retry-After.
type SignInsThrottled struct {
	// Wait is how long until the lockout ends.
	Wait time.Duration
	// Address: the client's address is locked out, not the user name.
	Address bool
	// Busy: every bcrypt comparison was taken (SignInLimits.Checks).
	Busy bool
}

// RetryAfter is Wait in whole seconds, at least 1 (Retry-After).
func (e *SignInsThrottled) RetryAfter() int {
	return max(1, int(math.Ceil(e.Wait.Seconds())))
}

func (e *SignInsThrottled) Error() string {
	if e.Busy {
		return fmt.Sprintf("too many sign-ins being checked at once: try again in %d s", e.RetryAfter())
	}
	of := "for this user name"
	if e.Address {
		of = "from this address"
	}
	return fmt.Sprintf("too many failed sign-ins %s: try again in %d s", of, e.RetryAfter())
}

// lru is a map bounded to max entries: past it, the entry used least
// recently goes. Not safe for concurrent use.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // of *lruEntry, most recent first
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}}
}

// get is the key's value, without counting it as a use.
func (m *lru[K, V]) get(k K) (V, bool) {
	if e, ok := m.items[k]; ok {
		return e.Value.(*lruEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put sets the key's value and makes it the most recently used.
func (m *lru[K, V]) put(k K, v V) {
	if e, ok := m.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		m.order.MoveToFront(e)
		return
	}
	for len(m.items) >= m.max {
		oldest := m.order.Back()
		delete(m.items, oldest.Value.(*lruEntry[K, V]).key)
		m.order.Remove(oldest)
	}
	m.items[k] = m.order.PushFront(&lruEntry[K, V]{key: k, val: v})
}

func (m *lru[K, V]) delete(k K) {
	if e, ok := m.items[k]; ok {
		delete(m.items, k)
		m.order.Remove(e)
	}
}

func (m *lru[K, V]) len() int { return len(m.items) }

func (m *lru[K, V]) clear() {
	m.order.Init()
	clear(m.items)
}

// verified remembers, for each user, a keyed digest of the user name, the
// password that checked out and the hash it checked out against, until
// when it may be taken without bcrypt. The key is random and the process's
// own: the digest neither is the password nor can be checked against a
// guess without the key.
type verified struct {
	key []byte
	mu  sync.Mutex
	m   *lru[string, verifiedEntry]
}

type verifiedEntry struct {
	sum   [sha256.Size]byte
	until time.Time
}

func newVerified(maxUsers int) *verified {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return &verified{key: key, m: newLRU[string, verifiedEntry](maxUsers)}
}

// digest is HMAC-SHA256 of the three, each preceded by its length.
func (v *verified) digest(user, password string, hash []byte) [sha256.Size]byte {
	mac := hmac.New(sha256.New, v.key)
	for _, p := range [][]byte{[]byte(user), []byte(password), hash} {
		writeLen(mac, len(p))
		mac.Write(p)
	}
	var sum [sha256.Size]byte
	mac.Sum(sum[:0])
	return sum
}

func writeLen(h hash.Hash, n int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

// ok reports whether the password checked out against hash for the user
// less than CacheFor ago.
func (v *verified) ok(user, password string, hash []byte, now time.Time) bool {
	sum := v.digest(user, password, hash)
	v.mu.Lock()
	e, found := v.m.get(user)
	v.mu.Unlock()
	return found && now.Before(e.until) && hmac.Equal(e.sum[:], sum[:])
}

// add remembers that the password checked out against hash, until until.
func (v *verified) add(user, password string, hash []byte, until time.Time) {
	sum := v.digest(user, password, hash)
	v.mu.Lock()
	v.m.put(user, verifiedEntry{sum: sum, until: until})
	v.mu.Unlock()
}

// forget drops every password remembered (the users file changed).
func (v *verified) forget() {
	v.mu.Lock()
	v.m.clear()
	v.mu.Unlock()
}

// failures counts failed sign-ins by key (a user name, an address) and
// locks a key out for a while once limit of them came within the window.
type failures struct {
	limit int
	l     SignInLimits

	mu sync.Mutex
	m  *lru[string, *failed]
}

// failed is one key's record.
type failed struct {
	count  int       // failures since since
	since  time.Time // the window's start
	level  int       // lockouts in a row: the next lasts MinLockout << level
	locked time.Time // the lockout's end
}

func newFailures(limit int, l SignInLimits) *failures {
	return &failures{limit: limit, l: l, m: newLRU[string, *failed](l.MaxKeys)}
}

// wait is how long the key is still locked out (0: it is not).
func (f *failures) wait(key string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.m.get(key); ok && now.Before(r.locked) {
		return r.locked.Sub(now)
	}
	return 0
}

// fail counts a failure of the key; it returns the lockout it starts, if
// it is the one that reaches the limit.
func (f *failures) fail(key string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.m.get(key)
	if !ok {
		r = &failed{since: now}
	}
	f.m.put(key, r)
	if r.level > 0 && now.Sub(r.locked) >= f.l.MaxLockout {
		r.level = 0 // quiet long enough: start again from the shortest
	}
	if now.Sub(r.since) >= f.l.Window {
		r.count, r.since = 0, now
	}
	r.count++
	if r.count < f.limit {
		return 0
	}
	d := f.l.MinLockout
	for i := 0; i < r.level && d < f.l.MaxLockout; i++ {
		d *= 2
	}
	d = min(d, f.l.MaxLockout)
	r.level++
	r.count, r.since, r.locked = 0, now, now.Add(d)
	return d
}

// keys is how many keys are tracked.
func (f *failures) keys() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.len()
}

// userKey is the key of a user name: its SHA-256, so that a long name
// costs no more to track than a short one.
func userKey(user string) string {
	sum := sha256.Sum256([]byte(user))
	return string(sum[:])
}

// addressKey is the key of the request's client address as the server sees
// it: the address of the connection's peer (RemoteAddr), never a header a
// client can set (X-Forwarded-For). An IPv6 address counts as its /64, the
// least a client is usually given. A loopback peer has no key: it is a
// proxy of the pod's own (behind Knative, queue-proxy for every request),
// whose lockout would lock every client out; there Checks bounds the
// bcrypt work, and the user names' lockouts the guessing.
func addressKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.IsLoopback() {
		return ""
	}
	if a.Is6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
	return a.String()
}
