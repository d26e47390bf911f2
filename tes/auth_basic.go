package tes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Basic authenticates callers by HTTP Basic credentials against a users
// file of bcrypt hashes, one "user:hash" a line (htpasswd -B). The user name
// is the subject: it owns the tasks it creates, as a token's subject does;
// the users in Admins see every task. The file is read again by Reload
// (Watch calls it on a timer); a file that no longer parses keeps the users
// read before.
//
// A password that checked out is taken again without bcrypt for
// SignInLimits.CacheFor (a keyed digest of it is kept, never the password),
// until the users file changes. Failed sign-ins lock out their user name,
// and their client's address, for a while that grows with each lockout:
// a sign-in of a name or from an address locked out is refused
// (SignInsThrottled) before its password is checked, whatever it is, and a
// remembered password does not pass a user name locked out.
type Basic struct {
	path   string
	admins map[string]bool
	limits SignInLimits
	now    func() time.Time
	verify func(hash, password []byte) error
	logf   func(msg string, kv ...any)

	// cache holds the passwords that checked out; users and addresses
	// count the failures.
	cache                        *verified
	failedUsers, failedAddresses *failures
	checks                       chan struct{} // the bcrypt comparisons running

	mu    sync.RWMutex
	users map[string][]byte
	sum   [sha256.Size]byte
	// dummy is compared with for an unknown user, so that an unknown user
	// takes as long as a wrong password.
	dummy []byte
}

// BasicConfig is the users file and the administrators.
type BasicConfig struct {
	File   string
	Admins []string
	// Limits bound the bcrypt work and the failed sign-ins (the zero
	// value: DefaultSignInLimits).
	Limits SignInLimits
	// Logf, when set, logs each lockout.
	Logf func(msg string, kv ...any)
	// Now and Verify replace the clock and bcrypt's comparison in tests.
	Now    func() time.Time
	Verify func(hash, password []byte) error
}

// DefaultBasicReload is how often Watch reads the users file again.
const DefaultBasicReload = 30 * time.Second

// BasicChallenge is the WWW-Authenticate challenge of HTTP Basic.
const BasicChallenge = `Basic realm="GA4GH TES", charset="UTF-8"`

// BearerChallenge is the WWW-Authenticate challenge of a refused bearer
// token.
const BearerChallenge = `Bearer error="invalid_token"`

// NewBasic reads the users file; an error names the file and the line.
func NewBasic(c BasicConfig) (*Basic, error) {
	if c.File == "" {
		return nil, errors.New("HTTP Basic needs a users file")
	}
	l := c.Limits.withDefaults()
	b := &Basic{path: c.File, admins: map[string]bool{}, limits: l, now: c.Now, verify: c.Verify, logf: c.Logf,
		cache: newVerified(l.MaxKeys), failedUsers: newFailures(l.PerUser, l), failedAddresses: newFailures(l.PerAddress, l),
		checks: make(chan struct{}, l.Checks)}
	if b.now == nil {
		b.now = time.Now
	}
	if b.verify == nil {
		b.verify = bcrypt.CompareHashAndPassword
	}
	if b.logf == nil {
		b.logf = func(string, ...any) {}
	}
	for _, a := range c.Admins {
		if a = strings.TrimSpace(a); a != "" {
			b.admins[a] = true
		}
	}
	if _, err := b.Reload(); err != nil {
		return nil, err
	}
	return b, nil
}

// ParseUsers reads a users file: "user:hash" lines, the hash bcrypt ($2a$,
// $2b$ or $2y$); blank lines and lines starting with # are left out. It
// returns the highest cost of the hashes.
func ParseUsers(data []byte) (map[string][]byte, int, error) {
	users := map[string][]byte{}
	first := map[string]int{}
	maxCost := bcrypt.MinCost
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		switch {
		case !ok:
			return nil, 0, fmt.Errorf("line %d: not user:hash", n)
		case user == "":
			return nil, 0, fmt.Errorf("line %d: no user name", n)
		case first[user] != 0:
			return nil, 0, fmt.Errorf("line %d: user %q again (first on line %d)", n, user, first[user])
		}
		if !strings.HasPrefix(hash, "$2a$") && !strings.HasPrefix(hash, "$2b$") && !strings.HasPrefix(hash, "$2y$") {
			return nil, 0, fmt.Errorf("line %d: user %q: the hash is not bcrypt ($2y$…, htpasswd -B)", n, user)
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: user %q: the bcrypt hash does not parse: %v", n, user, err)
		}
		maxCost = max(maxCost, cost)
		users[user], first[user] = []byte(hash), n
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if len(users) == 0 {
		return nil, 0, errors.New("no users")
	}
	return users, maxCost, nil
}

// Reload reads the users file again, and reports whether it changed. On an
// error the users read before stay.
func (b *Basic) Reload() (bool, error) {
	data, err := os.ReadFile(b.path)
	if err != nil {
		return false, fmt.Errorf("users file: %w", err)
	}
	sum := sha256.Sum256(data)
	b.mu.RLock()
	same := b.users != nil && sum == b.sum
	dummy := b.dummy
	b.mu.RUnlock()
	if same {
		return false, nil
	}
	users, cost, err := ParseUsers(data)
	if err != nil {
		return false, fmt.Errorf("users file %s: %w", b.path, err)
	}
	if c, err := bcrypt.Cost(dummy); err != nil || c != cost {
		if dummy, err = bcrypt.GenerateFromPassword([]byte("no such user"), cost); err != nil {
			return false, err
		}
	}
	b.mu.Lock()
	b.users, b.sum, b.dummy = users, sum, dummy
	b.mu.Unlock()
	// Each remembered password is of a hash that may be gone: the digests
	// name their hash, and are dropped too.
	b.cache.forget()
	return true, nil
}

// Users is the number of users.
func (b *Basic) Users() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.users)
}

// Watch reads the users file again every interval until ctx ends, and
// logs a change or a file that does not parse.
func (b *Basic) Watch(ctx context.Context, every time.Duration, logf func(msg string, kv ...any)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := b.Reload()
		switch {
		case err != nil:
			logf("Users file not read again; the users read before stay", "error", err)
		case changed:
			logf("Users file read again", "file", b.path, "users", b.Users())
		}
	}
}

// Authenticate checks the request's Basic credentials. A user name locked
// out is refused first, whatever the password; then a password that
// checked out less than CacheFor ago passes without bcrypt; then an
// address locked out is refused; then bcrypt compares, and a failure counts
// against the user name and the address (known or not, alike).
func (b *Basic) Authenticate(r *http.Request) (Caller, error) {
	user, password, ok := r.BasicAuth()
	if !ok {
		return Caller{}, errors.New("a user name and password are required (Authorization: Basic <base64 of user:password>)")
	}
	now := b.now()
	ukey := userKey(user)
	if d := b.failedUsers.wait(ukey, now); d > 0 {
		return Caller{}, &SignInsThrottled{Wait: d}
	}
	b.mu.RLock()
	hash, known := b.users[user]
	if !known {
		hash = b.dummy
	}
	b.mu.RUnlock()
	caller := Caller{Subject: user, Label: LabelSafe(user), All: b.admins[user]}
	if known && b.cache.ok(user, password, hash, now) {
		return caller, nil
	}
	addr := addressKey(r)
	if addr != "" {
		if d := b.failedAddresses.wait(addr, now); d > 0 {
			return Caller{}, &SignInsThrottled{Wait: d, Address: true}
		}
	}
	if err := b.check(r, hash, []byte(password)); err != nil || !known {
		var busy *SignInsThrottled
		if errors.As(err, &busy) {
			return Caller{}, err
		}
		if d := b.failedUsers.fail(ukey, now); d > 0 {
			b.logf("Failed sign-ins: a user name locked out", "user", logName(user), "lockout", d.String())
		}
		if addr != "" {
			if d := b.failedAddresses.fail(addr, now); d > 0 {
				b.logf("Failed sign-ins: an address locked out", "address", addr, "lockout", d.String())
			}
		}
		return Caller{}, errors.New("the user name or password is not valid")
	}
	b.cache.add(user, password, hash, now.Add(b.limits.CacheFor))
	return caller, nil
}

// check runs the bcrypt comparison in one of the limits' Checks slots,
// waiting for one at most Queue (or until the request ends): past it, the
// sign-in is answered 429.
func (b *Basic) check(r *http.Request, hash, password []byte) error {
	t := time.NewTimer(b.limits.Queue)
	defer t.Stop()
	select {
	case b.checks <- struct{}{}:
	case <-t.C:
		return &SignInsThrottled{Wait: time.Second, Busy: true}
	case <-r.Context().Done():
		return &SignInsThrottled{Wait: time.Second, Busy: true}
	}
	defer func() { <-b.checks }()
	return b.verify(hash, password)
}

// logName is a user name for the log, cut to 64 bytes: a caller chooses
// it.
func logName(user string) string {
	if len(user) > 64 {
		return fmt.Sprintf("%q…", user[:64])
	}
	return fmt.Sprintf("%q", user)
}

// Challenges is the WWW-Authenticate challenge of a refused request.
func (b *Basic) Challenges() []string { return []string{BasicChallenge} }

// Challenger is an Authenticator that names the WWW-Authenticate
// challenges of a 401 (BearerChallenge if it is not one).
type Challenger interface {
	Challenges() []string
}

// Schemes sends a request to the authenticator of its Authorization
// header's scheme: Bearer to Bearer, Basic to Basic. A nil one is a scheme
// not accepted. With both, a Basic user is another owner than the token
// subject of the same name (its subject is BasicSubjectPrefix and the user
// name) unless SharedOwners says that the users file names the issuer's
// subjects.
type Schemes struct {
	Bearer, Basic Authenticator
	SharedOwners  bool
}

// BasicSubjectPrefix marks the subject of a Basic user when tokens are
// accepted too: "basic:alice" owns what Basic user alice creates, and a
// token whose subject is "alice" does not.
const BasicSubjectPrefix = "basic:"

// Authenticate finds the caller by the request's scheme.
func (s Schemes) Authenticate(r *http.Request) (Caller, error) {
	scheme, _, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && s.Bearer != nil:
		return s.Bearer.Authenticate(r)
	case strings.EqualFold(scheme, "Basic") && s.Basic != nil:
		c, err := s.Basic.Authenticate(r)
		if err == nil && s.Bearer != nil && !s.SharedOwners {
			c.Subject = BasicSubjectPrefix + c.Subject
			c.Label = LabelSafe(c.Subject)
		}
		return c, err
	}
	var want []string
	if s.Bearer != nil {
		want = append(want, "Authorization: Bearer <token>")
	}
	if s.Basic != nil {
		want = append(want, "Authorization: Basic <base64 of user:password>")
	}
	return Caller{}, fmt.Errorf("credentials are required: %s", strings.Join(want, ", or "))
}

// Challenges names the schemes accepted.
func (s Schemes) Challenges() []string {
	var c []string
	if s.Bearer != nil {
		c = append(c, BearerChallenge)
	}
	if s.Basic != nil {
		c = append(c, BasicChallenge)
	}
	return c
}
