package tes

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

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

// list serves GET /tasks: a page of the tasks the caller may see that the
// query keeps, in its view, and the token of the next page.
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
	switch {
	case slices.Contains(passingStates, q.State):
		var afters []string
		page, afters, resp.Tasks, resp.NextPageToken, err = s.pageInState(ctx, sc, q)
		if err == nil && q.View == tesv1.ViewFull {
			// FULL within the page's byte budget, as any FULL page.
			return s.fullPage(c, page, afters, resp.NextPageToken, nil)
		}
	case q.View == tesv1.ViewFull:
		var afters []string
		page, afters, resp.NextPageToken, err = pageOf(ctx, sc, q.PageSize)
		if err == nil {
			return s.fullPage(c, page, afters, resp.NextPageToken, sc.read)
		}
	default:
		page, _, resp.NextPageToken, err = pageOf(ctx, sc, q.PageSize)
		if err == nil {
			resp.Tasks = make([]tesv1.Task, len(page))
			err = s.views(ctx, page, q.View, resp.Tasks, sc.read)
		}
	}
	if err != nil {
		return s.fail(c, err)
	}
	if resp.Tasks == nil {
		// An empty page is an empty list, never null: tasks is required.
		resp.Tasks = []tesv1.Task{}
	}
	return c.JSON(http.StatusOK, resp)
}

// DefaultListBytes bounds the tasks of a FULL page (Config.ListBytes):
// their inline contents and logs may be large.
const DefaultListBytes = 16 << 20

// fullChunk is how many tasks of a FULL page are read and encoded at a
// time.
const fullChunk = 32

// fullPage answers a FULL page within the byte budget: its tasks are read
// and encoded a chunk at a time, and the page ends before the first task
// that would take it past the budget (the first task is served whatever
// its size), with the token that resumes there. Only the encoded page and
// one chunk's tasks are held at once.
func (s *Server) fullPage(c echo.Context, page []metav1.ObjectMeta, afters []string, next string, read map[string]*corev1.ConfigMap) error {
	budget := s.Config.ListBytes
	if budget <= 0 {
		budget = DefaultListBytes
	}
	var buf bytes.Buffer
	buf.WriteString(`{"tasks":[`)
	used, n := 0, 0
	for from := 0; from < len(page); from += fullChunk {
		chunk := page[from:min(from+fullChunk, len(page))]
		tasks := make([]tesv1.Task, len(chunk))
		if err := s.views(c.Request().Context(), chunk, tesv1.ViewFull, tasks, read); err != nil {
			return s.fail(c, err)
		}
		for i := range tasks {
			b, err := json.Marshal(tasks[i])
			if err != nil {
				return s.fail(c, err)
			}
			if n > 0 && used+len(b) > budget {
				next = afters[from+i-1]
				return s.writePage(c, &buf, next)
			}
			if n > 0 {
				buf.WriteByte(',')
			}
			buf.Write(b)
			used, n = used+len(b), n+1
		}
		for _, m := range chunk {
			delete(read, m.Name)
		}
	}
	return s.writePage(c, &buf, next)
}

// writePage ends a page's JSON begun by fullPage and answers it.
func (s *Server) writePage(c echo.Context, buf *bytes.Buffer, next string) error {
	buf.WriteByte(']')
	if next != "" {
		tok, _ := json.Marshal(next)
		buf.WriteString(`,"next_page_token":`)
		buf.Write(tok)
	}
	buf.WriteByte('}')
	return c.JSONBlob(http.StatusOK, buf.Bytes())
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

// pageInState is a page of the tasks in q.State, a state a task passes
// through: the anchor's metadata may lag a running task's state by a step,
// so the tasks that have not ended (and that the other filters keep) have
// their state derived as GET derives it, from their jobs and pods, a chunk
// of candidates at a time, until the page is full or the scan's budget is
// spent. afters are the tokens that resume after each task of the page; a
// FULL page's views are left to fullPage.
func (s *Server) pageInState(ctx context.Context, sc *scanner, q ListQuery) ([]metav1.ObjectMeta, []string, []tesv1.Task, string, error) {
	var page []metav1.ObjectMeta
	var afters []string
	var tasks []tesv1.Task
	fill := func(token string) ([]metav1.ObjectMeta, []string, []tesv1.Task, string, error) {
		if q.View == tesv1.ViewFull {
			return page, afters, tasks, token, nil
		}
		return page, afters, tasks, token, s.fill(ctx, page, q.View, tasks)
	}
	for {
		var chunk []scanned
		stopped := false
		for len(chunk) < viewChunk {
			m, ok, err := sc.more(ctx, listChunk)
			if err != nil {
				return nil, nil, nil, "", err
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
			return nil, nil, nil, "", err
		}
		for i, t := range states {
			if t.State != q.State {
				continue
			}
			page, tasks = append(page, metas[i]), append(tasks, t)
			afters = append(afters, chunk[i].after.String())
			if len(page) == q.PageSize {
				more := i < len(chunk)-1
				if !more {
					var err error
					if more, err = sc.hasMore(ctx); err != nil {
						return nil, nil, nil, "", err
					}
				}
				token := ""
				if more {
					token = chunk[i].after.String()
				}
				return fill(token)
			}
		}
		if stopped {
			return fill(sc.token(nil, true))
		}
	}
}
