package tes

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/kubeapi"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

// Backlog bounds what one user keeps on the cluster in tasks that have not
// ended: each is in etcd, its anchor from its create and its PVC, Jobs,
// Pods and Events as it runs, until it ends (and then until its TTL). A
// create past a bound is answered 429, and nothing is written. 0 is no
// bound.
type Backlog struct {
	// Tasks is the most tasks a user may have that have not ended
	// (TES_MAX_UNFINISHED_TASKS_PER_USER).
	Tasks int
	// Bytes is the most bytes those tasks may keep in etcd together
	// (TES_MAX_UNFINISHED_BYTES_PER_USER), each counted at the estimate
	// of its peak (Footprint) recorded at its create
	// (taskmeta.AnnotationSize).
	Bytes int64
}

// DefaultBacklog is the bound of a service whose operator set none, sized
// for 100 users on etcd's default quota of 2 GiB: 100 × 8 MiB = 800 MiB of
// unfinished tasks at most, as estimated, the rest of the quota left to
// the ended tasks kept until their TTL and to the rest of the cluster. The
// smallest task is estimated at 44.6 KB and a workflow engine's at about
// 46 KB, so 8 MiB holds 180 to 187 of them; 200 tasks bound the count
// where the bytes are raised (the arithmetic is in docs/operations.md).
func DefaultBacklog() Backlog { return Backlog{Tasks: 200, Bytes: 8 << 20} }

// backlogRetryAfter is the Retry-After of a create refused for a user's
// backlog: when its tasks end is not known; a minute is a polite wait.
const backlogRetryAfter = 60

// recentFor is how long a create this process made counts for its user
// although a list does not show it: the API server's watch cache, which
// the list reads, shows a create within a moment in a healthy cluster.
const recentFor = 10 * time.Second

// maxBacklogUsers bounds the users whose recent creates are kept before
// those whose creates all expired are forgotten.
const maxBacklogUsers = 10000

// backlogs holds, for each user, the creates this process admitted, by
// name, while they are written and for recentFor after: a list of the
// user's anchors may not show them yet. The zero backlogs is ready.
type backlogs struct {
	mu    sync.Mutex
	users map[string]map[string]recentAnchor
}

// recentAnchor is a create this process admitted: its size, and when it
// was written (zero while it is being written).
type recentAnchor struct {
	bytes int64
	at    time.Time
}

// admit counts a user's tasks that have not ended and their bytes (the
// anchors a list that started at listed showed, and those this process
// admitted that it may not show), and, when the create of size bytes
// keeps within the bound, reserves its place under key until done. Under
// one lock, so that two creates of this process never count the same.
func (b *backlogs) admit(user string, items []metav1.PartialObjectMetadata, listed time.Time, key string, size int64, bound Backlog) (tasks int, bytes int64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.users == nil {
		b.users = map[string]map[string]recentAnchor{}
	}
	recent := b.users[user]
	if recent == nil {
		if len(b.users) >= maxBacklogUsers {
			b.forget(listed)
		}
		recent = map[string]recentAnchor{}
		b.users[user] = recent
	}
	shown := make(map[string]bool, len(items))
	for i := range items {
		m := items[i].ObjectMeta
		if !taskmeta.IsAnchor(m) {
			continue
		}
		shown[m.Name] = true
		tasks++
		bytes += sizeOf(m)
	}
	for name, r := range recent {
		if shown[name] || expired(r, listed) {
			continue
		}
		tasks++
		bytes += r.bytes
	}
	if (bound.Tasks > 0 && tasks >= bound.Tasks) || (bound.Bytes > 0 && bytes+size > bound.Bytes) {
		return tasks, bytes, false
	}
	recent[key] = recentAnchor{bytes: size}
	return tasks, bytes, true
}

// expired reports whether a create was written long enough before a list
// started that the list shows it if it has not ended.
func expired(r recentAnchor, listed time.Time) bool {
	return !r.at.IsZero() && listed.Sub(r.at) > recentFor
}

// done ends the reservation of key: the create it admitted was written
// under the name created, at now, or failed (created "").
func (b *backlogs) done(user, key, created string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	recent := b.users[user]
	if recent == nil {
		return
	}
	r := recent[key]
	delete(recent, key)
	if created != "" {
		r.at = now
		recent[created] = r
	}
	// A list takes far less than a minute: what expired a minute ago is
	// expired for every list that may still be counted.
	for name, r := range recent {
		if expired(r, now.Add(-time.Minute)) {
			delete(recent, name)
		}
	}
	if len(recent) == 0 {
		delete(b.users, user)
	}
}

// forget drops the users whose creates all expired a minute ago (under
// b.mu).
func (b *backlogs) forget(now time.Time) {
	for user, recent := range b.users {
		left := false
		for _, r := range recent {
			if !expired(r, now.Add(-time.Minute)) {
				left = true
				break
			}
		}
		if !left {
			delete(b.users, user)
		}
	}
}

// sizeOf is a task's footprint recorded on its anchor (recordFootprint);
// 0 for an anchor without one (the TESK API's, and those created before
// sizes were recorded). An anchor an earlier version created records its
// own size there, not the task's footprint.
func sizeOf(m metav1.ObjectMeta) int64 {
	n, err := strconv.ParseInt(m.Annotations[taskmeta.AnnotationSize], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// unfinishedListOptions list a user's anchors (its creator label; "" for
// the tasks created without one, as without access control) that carry no
// final state, the tasks that have not ended, from the API server's watch
// cache (resourceVersion 0).
func unfinishedListOptions(user string) metav1.ListOptions {
	sel := taskmeta.LabelTask + ",!" + taskmeta.LabelState
	if user == "" {
		sel += ",!" + taskmeta.LabelCreator
	} else {
		sel += "," + taskmeta.LabelCreator + "=" + user
	}
	return metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"}
}

// UnfinishedAnchors lists the metadata of a user's anchors that have not
// ended, as the API server's watch cache holds them (resourceVersion 0: no
// read of etcd, and no quorum; the cache may lag etcd by a moment).
func (st Store) UnfinishedAnchors(ctx context.Context, user string) ([]metav1.PartialObjectMetadata, error) {
	l, err := kubeapi.Get(ctx, func(ctx context.Context) (*metav1.PartialObjectMetadataList, error) {
		return st.Metadata.Resource(configMapsResource).Namespace(st.Namespace).List(ctx, unfinishedListOptions(user))
	})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// admitCreate refuses a create that would take the user past a bound of
// Config.Backlog: 429 naming the bound and its setting; 400 for a task
// larger than the bound of bytes, which no wait would admit. An admitted
// create holds its place under key until done is called with the name it
// was written as ("" if it failed).
func (s *Server) admitCreate(c echo.Context, user, key string, size int64) (done func(created string), err error) {
	l := s.Config.Backlog
	if l.Tasks <= 0 && l.Bytes <= 0 {
		return func(string) {}, nil
	}
	if l.Bytes > 0 && size > l.Bytes {
		return nil, bad("the task would keep about %d bytes in etcd (its ConfigMap, Jobs, Pods, PVC and Events, as estimated), more than the %d bytes of unfinished tasks this service lets each user hold (TES_MAX_UNFINISHED_BYTES_PER_USER)", size, l.Bytes)
	}
	listed := s.now()
	items, err := s.store().UnfinishedAnchors(c.Request().Context(), user)
	if err != nil {
		return nil, err
	}
	tasks, bytes, ok := s.backlogs.admit(user, items, listed, key, size, l)
	if ok {
		return func(created string) { s.backlogs.done(user, key, created, s.now()) }, nil
	}
	why := fmt.Sprintf("too many unfinished tasks: you have %d tasks that have not ended, and this service lets each user have %d (TES_MAX_UNFINISHED_TASKS_PER_USER); create more as they end", tasks, l.Tasks)
	if l.Tasks <= 0 || tasks < l.Tasks {
		why = fmt.Sprintf("too many bytes in unfinished tasks: your %d tasks that have not ended keep about %d bytes in etcd, and this one's %d would pass the %d bytes this service lets each user hold (TES_MAX_UNFINISHED_BYTES_PER_USER); create more as they end", tasks, bytes, size, l.Bytes)
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(backlogRetryAfter))
	return nil, echo.NewHTTPError(http.StatusTooManyRequests, why)
}
