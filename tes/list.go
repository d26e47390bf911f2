package tes

import (
	"context"
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
