package tes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// Paging of the list.
const (
	DefaultPageSize = 256
	MaxPageSize     = 2048
)

// pageToken is the position after the last task of a page: tasks are listed
// newest first, by creation time and then name, so a token stays valid
// whatever is created or deleted meanwhile.
type pageToken struct {
	Created int64  `json:"c"`
	Name    string `json:"n"`
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
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.Name == "" {
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

// Page selects a page of anchors: those the query's filters keep (of a
// record format this version reads), newest first, after its token. It
// returns the page and whether more follow. A
// final state filters on the anchor's record; a state a task passes through
// is left to the caller, who derives it from the jobs and pods.
func Page(anchors []metav1.ObjectMeta, q ListQuery) ([]metav1.ObjectMeta, bool) {
	var kept []metav1.ObjectMeta
	for _, m := range anchors {
		if !taskmeta.IsAnchor(m) || taskmeta.CheckFormat(m) != nil {
			continue
		}
		if q.NamePrefix != "" && !strings.HasPrefix(m.Annotations[taskmeta.AnnotationTaskName], q.NamePrefix) {
			continue
		}
		if q.State != "" && !slices.Contains(passingStates, q.State) && m.Annotations[taskmeta.AnnotationState] != q.State {
			continue
		}
		if len(q.Tags) > 0 && !MatchTags(q.Tags, Tags(m)) {
			continue
		}
		kept = append(kept, m)
	}
	sort.Slice(kept, func(i, k int) bool { return newer(kept[i], kept[k]) })
	start := 0
	if q.Token != nil {
		start = sort.Search(len(kept), func(i int) bool {
			m := kept[i]
			c := m.CreationTimestamp.Unix()
			return c < q.Token.Created || (c == q.Token.Created && m.Name < q.Token.Name)
		})
	}
	kept = kept[start:]
	if len(kept) > q.PageSize {
		return kept[:q.PageSize], true
	}
	return kept, false
}

func newer(a, b metav1.ObjectMeta) bool {
	ca, cb := a.CreationTimestamp.Unix(), b.CreationTimestamp.Unix()
	if ca != cb {
		return ca > cb
	}
	return a.Name > b.Name
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
	anchors, err := s.store().AnchorMetadata(ctx, sel, caller.mayAccess)
	if err != nil {
		return s.fail(c, err)
	}
	var page []metav1.ObjectMeta
	var more bool
	var resp tesv1.ListTasksResponse
	if slices.Contains(passingStates, q.State) {
		page, more, resp.Tasks, err = s.pageInState(ctx, anchors, q)
		if err != nil {
			return s.fail(c, err)
		}
	} else {
		page, more = Page(anchors, q)
		resp.Tasks = make([]tesv1.Task, len(page))
		if err := s.views(ctx, page, q.View, resp.Tasks); err != nil {
			return s.fail(c, err)
		}
	}
	if more {
		last := page[len(page)-1]
		resp.NextPageToken = pageToken{Created: last.CreationTimestamp.Unix(), Name: last.Name}.String()
	}
	return c.JSON(http.StatusOK, resp)
}

// passingStates are the states a task of this service passes through
// (never UNKNOWN, PAUSED or PREEMPTED).
var passingStates = []string{tesv1.StateQueued, tesv1.StateInitializing, tesv1.StateRunning, tesv1.StateCanceling}

// pageInState is a page of the tasks in q.State, a state a task passes
// through: the anchor's metadata may lag a running task's state by a step,
// so the tasks that have not ended (and that the other filters keep) have
// their state derived as GET derives it, from their jobs and pods, a chunk
// at a time, newest first, until the page is full. A task ended is known
// from its anchor alone, so the final states are filtered as before.
func (s *Server) pageInState(ctx context.Context, anchors []metav1.ObjectMeta, q ListQuery) ([]metav1.ObjectMeta, bool, []tesv1.Task, error) {
	all := q
	all.State, all.PageSize = "", len(anchors)+1
	candidates, _ := Page(anchors, all)
	var live []metav1.ObjectMeta
	for _, m := range candidates {
		if m.Annotations[taskmeta.AnnotationState] == "" {
			live = append(live, m)
		}
	}
	var page []metav1.ObjectMeta
	var tasks []tesv1.Task
	for from := 0; from < len(live); from += viewChunk {
		chunk := live[from:min(from+viewChunk, len(live))]
		states := make([]tesv1.Task, len(chunk))
		if err := s.views(ctx, chunk, tesv1.ViewMinimal, states); err != nil {
			return nil, false, nil, err
		}
		for i, t := range states {
			if t.State != q.State {
				continue
			}
			if len(page) == q.PageSize {
				return page, true, tasks, s.fill(ctx, page, q.View, tasks)
			}
			page, tasks = append(page, chunk[i]), append(tasks, t)
		}
	}
	return page, false, tasks, s.fill(ctx, page, q.View, tasks)
}
