package tes

import (
	"context"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
)

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

// pageOf scans a page of up to size anchors and the token of the next; and
// for each anchor of the page, the token that resumes after it (to end the
// page there).
func pageOf(ctx context.Context, sc *scanner, size int) ([]metav1.ObjectMeta, []string, string, error) {
	var page []metav1.ObjectMeta
	var afters []string
	var last *scanned
	for len(page) < size {
		m, ok, err := sc.more(ctx, size-len(page))
		if err != nil {
			return nil, nil, "", err
		}
		if !ok {
			return page, afters, sc.token(last, true), nil
		}
		page, last = append(page, m.meta), &m
		afters = append(afters, m.after.String())
	}
	more, err := sc.hasMore(ctx)
	if err != nil || !more {
		return page, afters, "", err
	}
	return page, afters, sc.token(last, false), nil
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
