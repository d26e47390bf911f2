package tes

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Paging of the list.
const (
	DefaultPageSize = 256
	MaxPageSize     = 2048
	// ScanBeyond bounds what one page reads beyond the page itself: at
	// most PageSize+ScanBeyond anchors' metadata. A filter the API server
	// cannot apply (a name prefix, tags, a state a task passes through)
	// that keeps fewer tasks than that returns a shorter page, perhaps an
	// empty one, with a next_page_token.
	ScanBeyond = 4096
)

// pageToken is where the next page starts. Anchors are listed in two runs,
// each in the order the API server lists names: first the tasks of ordered
// ids (taskmeta.NewID: newest first), then the others (TESK's ids: in id
// order). Continue is the API server's continue token of the LIST chunk
// the page ended in ("" for the first), After the last task it served or
// looked at: the next page lists that chunk again and skips up to After.
type pageToken struct {
	Unordered bool   `json:"u,omitempty"`
	Continue  string `json:"k,omitempty"`
	After     string `json:"a,omitempty"`
}

func (p pageToken) String() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parsePageToken(s string) (*pageToken, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var p pageToken
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&p)
	}
	if err != nil || p == (pageToken{}) {
		return nil, bad("page_token: %q is not a token this service gave", s)
	}
	return &p, nil
}

// ListQuery is a list request.
type ListQuery struct {
	NamePrefix string
	State      string
	Tags       map[string]string
	PageSize   int
	Token      *pageToken
	View       string
}

// ParseListQuery reads the list's parameters.
func ParseListQuery(q url.Values) (ListQuery, error) {
	lq := ListQuery{NamePrefix: q.Get("name_prefix"), State: q.Get("state"), PageSize: DefaultPageSize}
	if lq.State != "" && !contains(tesv1.States, lq.State) {
		return lq, bad("state: %q is not a TES state", lq.State)
	}
	if ps := q.Get("page_size"); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 {
			return lq, bad("page_size: %q is not a positive integer", ps)
		}
		lq.PageSize = min(n, MaxPageSize)
	}
	var err error
	if lq.Token, err = parsePageToken(q.Get("page_token")); err != nil {
		return lq, err
	}
	keys, values := q["tag_key"], q["tag_value"]
	if len(values) > len(keys) {
		return lq, bad("tag_value: %d values for %d tag_key", len(values), len(keys))
	}
	if len(keys) > 0 {
		lq.Tags = map[string]string{}
		for i, k := range keys {
			v := ""
			if i < len(values) {
				v = values[i]
			}
			lq.Tags[k] = v
		}
	}
	switch v := q.Get("view"); v {
	case "":
		lq.View = tesv1.ViewMinimal
	case tesv1.ViewMinimal, tesv1.ViewBasic, tesv1.ViewFull:
		lq.View = v
	default:
		return lq, bad("view: %q is none of MINIMAL, BASIC, FULL", v)
	}
	return lq, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MatchTags is the specification's tag filter: every key of the filter must
// be a tag of the task, with the same value unless the filter's is empty.
func MatchTags(filter, tags map[string]string) bool {
	for k, v := range filter {
		tv, ok := tags[k]
		if !ok || (v != "" && tv != v) {
			return false
		}
	}
	return true
}

// metaLister is one LIST of anchors' metadata.
type metaLister func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)

// scanner reads the anchors a list query may keep, in list order, a LIST
// chunk at a time, from a page token; it reads no more than its budget.
type scanner struct {
	list metaLister
	// whole, when set, lists whole anchors where the API server applies
	// every filter; read keeps them by name.
	whole func(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	read  map[string]*corev1.ConfigMap
	q     ListQuery
	// selector is the label selector of every LIST (the task label, the
	// caller's creator label); keep is the filter the API server cannot
	// apply.
	selector string
	keep     func(metav1.ObjectMeta) bool
	// budget is how many objects are left to read.
	budget int

	pos       pageToken // the chunk being read (Continue) and the last name seen
	chunk     []metav1.ObjectMeta
	next      string // the chunk's own continue token
	listed    bool   // the chunk at pos was read
	exhausted bool   // both runs were read to their end
}

// scanned is an anchor the scan kept, with the token that resumes after it.
type scanned struct {
	meta  metav1.ObjectMeta
	after pageToken
}

// runSelector is the selector of one run: the ordered or the other ids,
// narrowed on the API server to the query's state where the labels tell
// it. A task that ended is labelled with its final state when it ends; the
// anchors of TESK's ids may have ended before that label existed (until a
// sweep labels them), so their final states are filtered by the anchor's
// annotation alone.
func (sc *scanner) runSelector() string {
	sel := sc.selector
	if sc.pos.Unordered {
		sel += ",!" + taskmeta.LabelOrderedID
	} else {
		sel += "," + taskmeta.LabelOrderedID
	}
	switch {
	case sc.q.State == "":
	case slices.Contains(passingStates, sc.q.State):
		sel += ",!" + taskmeta.LabelState
	case !sc.pos.Unordered:
		sel += "," + taskmeta.LabelState + "=" + sc.q.State
	}
	return sel
}

// filtered reports whether the run has a filter the API server cannot
// apply: a LIST then reads whole chunks rather than what the page lacks.
func (sc *scanner) filtered() bool {
	return sc.q.NamePrefix != "" || len(sc.q.Tags) > 0 || slices.Contains(passingStates, sc.q.State) ||
		(sc.q.State != "" && sc.pos.Unordered)
}

// listChunk reads the chunk at sc.pos: want objects at most (what the page
// lacks) when the API server applies every filter, else a whole chunk; no
// more than the budget left.
func (sc *scanner) listChunk(ctx context.Context, want int) error {
	limit := want
	if sc.filtered() {
		limit = listChunk
	}
	limit = max(1, min(limit, sc.budget))
	// A page that keeps every anchor it reads, in a view that shows the
	// submitted task, reads the anchors whole: the page's blobs, and no
	// other, in the same request.
	whole := sc.whole != nil && !sc.filtered()
	list := func(cont string) ([]metav1.ObjectMeta, string, error) {
		opts := metav1.ListOptions{LabelSelector: sc.runSelector(), Limit: int64(limit), Continue: cont}
		if whole {
			l, err := sc.whole(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			metas := make([]metav1.ObjectMeta, len(l.Items))
			for i := range l.Items {
				metas[i] = l.Items[i].ObjectMeta
				sc.read[l.Items[i].Name] = &l.Items[i]
			}
			return metas, l.Continue, nil
		}
		l, err := sc.list(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		metas := make([]metav1.ObjectMeta, len(l.Items))
		for i := range l.Items {
			metas[i] = l.Items[i].ObjectMeta
		}
		return metas, l.Continue, nil
	}
	items, next, err := list(sc.pos.Continue)
	var st apierrors.APIStatus
	switch {
	case err != nil && apierrors.IsResourceExpired(err) && errors.As(err, &st) && st.Status().Continue != "":
		// The token outlived the API server's history: go on from where
		// it stood, as the objects are now.
		sc.pos.Continue = st.Status().Continue
		items, next, err = list(sc.pos.Continue)
	case err != nil && sc.pos.Continue != "" && (apierrors.IsResourceExpired(err) || apierrors.IsBadRequest(err)):
		if apierrors.IsBadRequest(err) {
			return bad("page_token: the API server refused its position (%v)", err)
		}
		// Expired with no way on: the run again from its start, skipping
		// to After.
		sc.pos.Continue = ""
		items, next, err = list("")
	}
	if err != nil {
		return err
	}
	// The API server lists names in order; the order is what the token
	// rests on, so it is made sure of.
	slices.SortFunc(items, func(a, b metav1.ObjectMeta) int { return strings.Compare(a.Name, b.Name) })
	sc.budget -= len(items)
	sc.chunk, sc.next, sc.listed = items, next, true
	return nil
}

// more reads the next anchor the filters keep; false when the runs are
// read to their end or the budget is spent (sc.exhausted tells which).
// want is how many more the page lacks.
func (sc *scanner) more(ctx context.Context, want int) (scanned, bool, error) {
	for {
		if !sc.listed {
			if sc.budget <= 0 {
				return scanned{}, false, nil
			}
			if err := sc.listChunk(ctx, want); err != nil {
				return scanned{}, false, err
			}
		}
		for len(sc.chunk) > 0 {
			m := sc.chunk[0]
			sc.chunk = sc.chunk[1:]
			if sc.pos.After != "" && m.Name <= sc.pos.After {
				continue
			}
			sc.pos.After = m.Name
			if len(sc.chunk) == 0 {
				sc.advance()
			}
			if sc.keep(m) {
				return scanned{meta: m, after: sc.pos}, true, nil
			}
		}
		if sc.listed {
			sc.advance()
		}
		if sc.exhausted {
			return scanned{}, false, nil
		}
	}
}

// advance moves past the chunk read: to the next chunk of the run, or to
// the start of the second run, or to the end.
func (sc *scanner) advance() {
	sc.listed = false
	switch {
	case sc.next != "":
		sc.pos.Continue = sc.next
	case !sc.pos.Unordered:
		sc.pos = pageToken{Unordered: true}
	default:
		sc.exhausted = true
	}
	sc.next = ""
}

// token is where a page ends that served up to last: after it, or where
// the scan stopped if it looked further; none when nothing is left.
func (sc *scanner) token(last *scanned, stopped bool) string {
	switch {
	case stopped && sc.exhausted:
		return ""
	case stopped:
		return sc.pos.String()
	case last == nil:
		return ""
	}
	return last.after.String()
}

// keeps is the filter of a query that the API server cannot apply: an
// anchor of a record format this version reads, that the caller may see,
// of the name prefix and the tags, in the final state asked for (or, for a
// state a task passes through, not ended: the caller derives its state).
func keeps(q ListQuery, mayAccess func(metav1.ObjectMeta) bool) func(metav1.ObjectMeta) bool {
	return func(m metav1.ObjectMeta) bool {
		if !taskmeta.IsAnchor(m) || taskmeta.CheckFormat(m) != nil || !mayAccess(m) {
			return false
		}
		if q.NamePrefix != "" && !strings.HasPrefix(m.Annotations[taskmeta.AnnotationTaskName], q.NamePrefix) {
			return false
		}
		if q.State != "" && !slices.Contains(passingStates, q.State) && m.Annotations[taskmeta.AnnotationState] != q.State {
			return false
		}
		if slices.Contains(passingStates, q.State) && m.Annotations[taskmeta.AnnotationState] != "" {
			return false
		}
		return len(q.Tags) == 0 || MatchTags(q.Tags, Tags(m))
	}
}

func (s *Server) list(c echo.Context) error {
	q, err := ParseListQuery(c.QueryParams())
	if err != nil {
		return s.fail(c, err)
	}
	ctx := c.Request().Context()
	caller := callerOf(c)
	sel := taskmeta.LabelTask
	if !caller.All {
		sel += "," + taskmeta.LabelCreator + "=" + caller.Label
	}
	sc := s.scanner(q, sel, keeps(q, caller.mayAccess))
	var resp tesv1.ListTasksResponse
	var page []metav1.ObjectMeta
	if slices.Contains(passingStates, q.State) {
		page, resp.Tasks, resp.NextPageToken, err = s.pageInState(ctx, sc, q)
	} else {
		page, resp.NextPageToken, err = pageOf(ctx, sc, q.PageSize)
		if err == nil {
			resp.Tasks = make([]tesv1.Task, len(page))
			err = s.views(ctx, page, q.View, resp.Tasks, sc.read)
		}
	}
	if err != nil {
		return s.fail(c, err)
	}
	return c.JSON(http.StatusOK, resp)
}

// scanner is a scan of the namespace's anchors for a query, from its token.
func (s *Server) scanner(q ListQuery, selector string, keep func(metav1.ObjectMeta) bool) *scanner {
	sc := &scanner{list: s.store().AnchorChunk, q: q, selector: selector, keep: keep, budget: q.PageSize + ScanBeyond,
		read: map[string]*corev1.ConfigMap{}}
	if q.View != tesv1.ViewMinimal {
		sc.whole = s.store().AnchorsChunk
	}
	if q.Token != nil {
		sc.pos = *q.Token
	}
	return sc
}

// pageOf scans a page of up to size anchors and the token of the next.
func pageOf(ctx context.Context, sc *scanner, size int) ([]metav1.ObjectMeta, string, error) {
	var page []metav1.ObjectMeta
	var last *scanned
	for len(page) < size {
		m, ok, err := sc.more(ctx, size-len(page))
		if err != nil {
			return nil, "", err
		}
		if !ok {
			return page, sc.token(last, true), nil
		}
		page, last = append(page, m.meta), &m
	}
	more, err := sc.hasMore(ctx)
	if err != nil || !more {
		return page, "", err
	}
	return page, sc.token(last, false), nil
}

// hasMore reports whether anything is left to scan after a full page: the
// rest of a chunk, a chunk after it, or, at the start of the second run,
// an anchor in it (one LIST of one object).
func (sc *scanner) hasMore(ctx context.Context) (bool, error) {
	switch {
	case sc.exhausted:
		return false, nil
	case sc.listed && len(sc.chunk) > 0, sc.pos.Continue != "", !sc.pos.Unordered:
		return true, nil
	}
	l, err := sc.list(ctx, metav1.ListOptions{LabelSelector: sc.runSelector(), Limit: 1})
	if err != nil {
		return false, err
	}
	return len(l.Items) > 0, nil
}

// passingStates are the states a task of this service passes through
// (never UNKNOWN, PAUSED or PREEMPTED).
var passingStates = []string{tesv1.StateQueued, tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling}

// pageInState is a page of the tasks in q.State, a state a task passes
// through: the anchor's metadata may lag a running task's state by a step,
// so the tasks that have not ended (and that the other filters keep) have
// their state derived as GET derives it, from their jobs and pods, a chunk
// of candidates at a time, until the page is full or the scan's budget is
// spent.
func (s *Server) pageInState(ctx context.Context, sc *scanner, q ListQuery) ([]metav1.ObjectMeta, []tesv1.Task, string, error) {
	var page []metav1.ObjectMeta
	var tasks []tesv1.Task
	for {
		var chunk []scanned
		stopped := false
		for len(chunk) < viewChunk {
			m, ok, err := sc.more(ctx, listChunk)
			if err != nil {
				return nil, nil, "", err
			}
			if !ok {
				stopped = true
				break
			}
			chunk = append(chunk, m)
		}
		metas := make([]metav1.ObjectMeta, len(chunk))
		for i, m := range chunk {
			metas[i] = m.meta
		}
		states := make([]tesv1.Task, len(chunk))
		if err := s.views(ctx, metas, tesv1.ViewMinimal, states, nil); err != nil {
			return nil, nil, "", err
		}
		for i, t := range states {
			if t.State != q.State {
				continue
			}
			page, tasks = append(page, metas[i]), append(tasks, t)
			if len(page) == q.PageSize {
				more := i < len(chunk)-1
				if !more {
					var err error
					if more, err = sc.hasMore(ctx); err != nil {
						return nil, nil, "", err
					}
				}
				token := ""
				if more {
					token = chunk[i].after.String()
				}
				return page, tasks, token, s.fill(ctx, page, q.View, tasks)
			}
		}
		if stopped {
			return page, tasks, sc.token(nil, true), s.fill(ctx, page, q.View, tasks)
		}
	}
}
