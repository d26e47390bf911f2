package tes

import (
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// maxCreateLimiters bounds the users whose create rate is kept: past it,
// those idle longest are forgotten (a forgotten user starts with a full
// burst again).
const maxCreateLimiters = 10000

// createLimits holds each user's rate of creates (TES_CREATE_RATE_PER_USER):
// a token bucket per user, of this TES API process. With several processes
// a user may reach the rate at each.
type createLimits struct {
	perMinute float64
	burst     int
	now       func() time.Time

	mu    sync.Mutex
	users map[string]*userLimit
}

// userLimit is one user's bucket and when it was last used.
type userLimit struct {
	l    *rate.Limiter
	used time.Time
}

// newCreateLimits allows perMinute creates a minute to each user, in bursts
// of up to burst (perMinute, at least 1, if 0).
func newCreateLimits(perMinute float64, burst int, now func() time.Time) *createLimits {
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perMinute)))
	}
	return &createLimits{perMinute: perMinute, burst: burst, now: now, users: map[string]*userLimit{}}
}

// wait is how long the user must wait before a create is allowed; 0 takes
// one now.
func (c *createLimits) wait(user string) time.Duration {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.users[user]
	if u == nil {
		if len(c.users) >= maxCreateLimiters {
			c.forgetIdlest()
		}
		u = &userLimit{l: rate.NewLimiter(rate.Limit(c.perMinute/60), c.burst)}
		c.users[user] = u
	}
	u.used = now
	r := u.l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// forgetIdlest drops the tenth of the users idle longest.
func (c *createLimits) forgetIdlest() {
	names := make([]string, 0, len(c.users))
	for name := range c.users {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return c.users[names[i]].used.Before(c.users[names[j]].used) })
	for _, name := range names[:max(1, len(names)/10)] {
		delete(c.users, name)
	}
}

// limitCreate answers 429 with Retry-After when the caller has created
// tasks faster than its rate.
func (s *Server) limitCreate(c echo.Context, user string) (bool, error) {
	if s.creates == nil {
		return false, nil
	}
	d := s.creates.wait(user)
	if d <= 0 {
		return false, nil
	}
	secs := int(math.Ceil(d.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return true, s.fail(c, echo.NewHTTPError(http.StatusTooManyRequests,
		"too many tasks created: this service takes "+strconv.FormatFloat(s.creates.perMinute, 'f', -1, 64)+" a minute from each user; try again in "+strconv.Itoa(secs)+" s"))
}
