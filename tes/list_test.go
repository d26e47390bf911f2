package tes

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// pagedAnchors lists anchors' metadata as the API server pages a LIST: the
// label selector applied, names in order, at most Limit, and a continue
// token that resumes after the last name listed. A token of an earlier
// generation has expired (410), with the way on when inconsistent is set.
type pagedAnchors struct {
	items             []metav1.ObjectMeta
	generation        int
	inconsistent      bool
	requests, objects int
}

func (p *pagedAnchors) list(_ context.Context, o metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	p.requests++
	sel, err := labels.Parse(o.LabelSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	after := ""
	if o.Continue != "" {
		gen, name, ok := strings.Cut(o.Continue, "/")
		g, err := strconv.Atoi(gen)
		if !ok || err != nil {
			return nil, apierrors.NewBadRequest("continue key is not valid")
		}
		b, _ := base64.RawURLEncoding.DecodeString(name)
		after = string(b)
		if g < p.generation {
			expired := apierrors.NewResourceExpired("The provided continue parameter is too old")
			if p.inconsistent {
				expired.ErrStatus.ListMeta.Continue = p.cont(after)
			}
			return nil, expired
		}
	}
	sorted := slices.SortedFunc(slices.Values(p.items), func(a, b metav1.ObjectMeta) int { return strings.Compare(a.Name, b.Name) })
	out := &metav1.PartialObjectMetadataList{}
	for _, m := range sorted {
		if m.Name <= after || !sel.Matches(labels.Set(m.Labels)) {
			continue
		}
		if o.Limit > 0 && int64(len(out.Items)) == o.Limit {
			out.Continue = p.cont(out.Items[len(out.Items)-1].Name)
			break
		}
		out.Items = append(out.Items, metav1.PartialObjectMetadata{ObjectMeta: m})
	}
	p.objects += len(out.Items)
	return out, nil
}

func (p *pagedAnchors) cont(after string) string {
	return strconv.Itoa(p.generation) + "/" + base64.RawURLEncoding.EncodeToString([]byte(after))
}

// anchorMeta is an anchor's metadata as the TES API writes it (the ordered
// label on ids of taskmeta.NewID).
func anchorMeta(id string, ann map[string]string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: id, Labels: map[string]string{taskmeta.LabelTask: id}, Annotations: map[string]string{}}
	if _, ok := taskmeta.IDTime(id); ok {
		m.Labels[taskmeta.LabelOrderedID] = "true"
	}
	for k, v := range ann {
		m.Annotations[k] = v
	}
	if s := ann[taskmeta.AnnotationState]; s != "" && m.Labels[taskmeta.LabelOrderedID] != "" {
		m.Labels[taskmeta.LabelState] = s
	}
	return m
}

// scanPage lists one page of a query over p.
func scanPage(t *testing.T, p *pagedAnchors, query string, token string) ([]string, string) {
	t.Helper()
	v, _ := url.ParseQuery(query)
	if token != "" {
		v.Set("page_token", token)
	}
	q, err := ParseListQuery(v)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scanner{list: p.list, q: q, selector: taskmeta.LabelTask, keep: keeps(q, func(metav1.ObjectMeta) bool { return true }), budget: q.PageSize + ScanBeyond}
	if q.Token != nil {
		sc.pos = *q.Token
	}
	page, _, next, err := pageOf(context.Background(), sc, q.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, m := range page {
		names = append(names, m.Name)
	}
	return names, next
}

// Pages come newest first (the ordered ids), then TESK's ids in id order,
// each task once, none left out, whatever is created meanwhile; a page
// without a filter the API server cannot apply reads exactly its tasks.
func TestPagesNewestFirstWithoutDuplicatesOrGaps(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := &pagedAnchors{}
	var ordered []string
	for i := range 300 {
		// Several tasks in a millisecond: their order is random.
		id := taskmeta.NewID(t0.Add(time.Duration(i/3) * time.Millisecond))
		ordered = append(ordered, id)
		p.items = append(p.items, anchorMeta(id, nil))
	}
	var legacy []string
	for i := range 50 {
		id := fmt.Sprintf("task-%08x", i*7919)
		legacy = append(legacy, id)
		p.items = append(p.items, anchorMeta(id, nil))
	}
	p.items = append(p.items, metav1.ObjectMeta{Name: "other", Labels: map[string]string{"app": "x"}})

	var got []string
	token := ""
	for pages := 0; ; pages++ {
		p.requests, p.objects = 0, 0
		page, next := scanPage(t, p, "page_size=64", token)
		if p.objects > 64 || p.requests > 2 {
			t.Errorf("page %d read %d objects in %d requests, want at most its 64 in 2", pages, p.objects, p.requests)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		token = next
		// Tasks created meanwhile are newer: they come before the first
		// page and do not move the others.
		p.items = append(p.items, anchorMeta(taskmeta.NewID(t0.Add(time.Hour+time.Duration(pages)*time.Millisecond)), nil))
	}
	byTime := func(a, b string) int {
		ta, _ := taskmeta.IDTime(a)
		tb, _ := taskmeta.IDTime(b)
		return tb.Compare(ta)
	}
	if len(got) != 350 || !slices.IsSortedFunc(got[:300], byTime) || !slices.Equal(slices.Sorted(slices.Values(got[:300])), slices.Sorted(slices.Values(ordered))) ||
		!slices.Equal(got[300:], slices.Sorted(slices.Values(legacy))) {
		t.Errorf("%d tasks listed; want the 300 ordered newest first, then the 50 others in id order:\n%v", len(got), got)
	}
}

func TestListFilters(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	id := func(i int) string { return taskmeta.NewID(t0.Add(time.Duration(i) * time.Second)) }
	ids := []string{id(1), id(2), id(3), id(4)}
	p := &pagedAnchors{items: []metav1.ObjectMeta{
		anchorMeta(ids[0], map[string]string{taskmeta.AnnotationTaskName: "align-1", taskmeta.AnnotationTags: `{"foo":"bar","baz":"bat"}`}),
		anchorMeta(ids[1], map[string]string{taskmeta.AnnotationTaskName: "align-2", taskmeta.AnnotationTags: `{"foo":"bat"}`, taskmeta.AnnotationState: tesv1.StateComplete}),
		anchorMeta(ids[2], map[string]string{taskmeta.AnnotationTaskName: "call-1", taskmeta.AnnotationTags: `{"foo":""}`}),
		anchorMeta(ids[3], map[string]string{taskmeta.AnnotationTaskName: "call-2"}),
		// TESK's ids: one ended before its state was labelled.
		anchorMeta("task-0000000a", map[string]string{taskmeta.AnnotationTaskName: "align-3", taskmeta.AnnotationState: tesv1.StateComplete}),
		anchorMeta("task-0000000b", map[string]string{taskmeta.AnnotationTaskName: "call-3", taskmeta.AnnotationTags: `{"foo":"bar"}`}),
		{Name: "other", Labels: map[string]string{"app": "x"}},
		// A ConfigMap of a task that is not its anchor.
		{Name: ids[0] + "-outputs", Labels: map[string]string{taskmeta.LabelTask: ids[0]}},
	}}
	cases := []struct {
		query string
		want  []string
	}{
		{"", []string{ids[3], ids[2], ids[1], ids[0], "task-0000000a", "task-0000000b"}},
		{"name_prefix=align", []string{ids[1], ids[0], "task-0000000a"}},
		{"state=COMPLETE", []string{ids[1], "task-0000000a"}},
		{"state=EXECUTOR_ERROR", []string{}},
		// A state a task passes through: the tasks not ended, whose state
		// the caller derives (TestListStateFilterAgreesWithGet).
		{"state=QUEUED", []string{ids[3], ids[2], ids[0], "task-0000000b"}},
		{"tag_key=foo&tag_value=bar", []string{ids[0], "task-0000000b"}},
		{"tag_key=foo", []string{ids[2], ids[1], ids[0], "task-0000000b"}},
		{"tag_key=foo&tag_value=bar&tag_key=baz&tag_value=bat", []string{ids[0]}},
		{"tag_key=foo&tag_value=bat&tag_key=baz", []string{}},
		{"tag_key=missing", []string{}},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			got, next := scanPage(t, p, c.query, "")
			if !slices.Equal(got, c.want) || next != "" {
				t.Errorf("got %v (next %q), want %v", got, next, c.want)
			}
			// Page by page, the same tasks.
			var paged []string
			token := ""
			for range 20 {
				page, next := scanPage(t, p, c.query+"&page_size=1", token)
				paged = append(paged, page...)
				if token = next; token == "" {
					break
				}
			}
			if !slices.Equal(append([]string{}, paged...), c.want) && !(len(paged) == 0 && len(c.want) == 0) {
				t.Errorf("a task a page: %v, want %v", paged, c.want)
			}
		})
	}
}

// A filter the API server cannot apply reads at most PageSize+ScanBeyond
// anchors a page: a rare match comes on a later page, with tokens between.
func TestScanIsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := &pagedAnchors{}
	var want []string
	for i := range 10000 {
		name := "bulk"
		if i%3001 == 0 {
			name = "rare"
		}
		id := taskmeta.NewID(t0.Add(-time.Duration(i) * time.Second))
		if name == "rare" {
			want = append(want, id)
		}
		p.items = append(p.items, anchorMeta(id, map[string]string{taskmeta.AnnotationTaskName: name}))
	}
	var got []string
	token := ""
	pages := 0
	for ; pages < 20; pages++ {
		p.objects = 0
		page, next := scanPage(t, p, "name_prefix=rare&page_size=10", token)
		if p.objects > 10+ScanBeyond {
			t.Errorf("page %d read %d anchors, more than %d", pages, p.objects, 10+ScanBeyond)
		}
		got = append(got, page...)
		if token = next; token == "" {
			break
		}
	}
	if !slices.Equal(got, want) || pages < 2 {
		t.Errorf("got %v in %d pages, want %v over several", got, pages+1, want)
	}
}

// A page token that outlived the API server's history goes on from where
// it stood: through the API server's inconsistent continue token, or
// else from the start of its run, skipping what was served.
func TestExpiredPageToken(t *testing.T) {
	for _, inconsistent := range []bool{true, false} {
		t.Run(fmt.Sprint("inconsistent=", inconsistent), func(t *testing.T) {
			t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
			p := &pagedAnchors{inconsistent: inconsistent}
			for i := range 30 {
				p.items = append(p.items, anchorMeta(taskmeta.NewID(t0.Add(-time.Duration(i)*time.Second)), nil))
			}
			all, _ := scanPage(t, p, "page_size=100", "")
			first, token := scanPage(t, p, "page_size=10", "")
			p.generation++ // compacted
			second, _ := scanPage(t, p, "page_size=10", token)
			if !slices.Equal(append(first, second...), all[:20]) {
				t.Errorf("pages %v + %v, want %v", first, second, all[:20])
			}
		})
	}
	// A token whose position the API server refuses is the client's error.
	v := url.Values{"page_token": {pageToken{Continue: "garbage", After: "task-x"}.String()}}
	q, err := ParseListQuery(v)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scanner{list: (&pagedAnchors{}).list, q: q, selector: taskmeta.LabelTask, keep: keeps(q, func(metav1.ObjectMeta) bool { return true }), budget: 100, pos: *q.Token}
	if _, _, _, err := pageOf(context.Background(), sc, 10); err == nil || !strings.Contains(err.Error(), "page_token") {
		t.Errorf("a refused position: %v, want an error naming page_token", err)
	}
}

// A full page that ends the list has no token; one that ends the ordered
// ids has one if TESK's ids follow.
func TestFullLastPageHasNoToken(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	p := &pagedAnchors{}
	for i := range 10 {
		p.items = append(p.items, anchorMeta(taskmeta.NewID(t0.Add(time.Duration(i)*time.Second)), nil))
	}
	for _, q := range []string{"page_size=10", "page_size=10&state=QUEUED"} {
		page, next := scanPage(t, p, q, "")
		if len(page) != 10 || next != "" {
			t.Errorf("%s: %d tasks, token %q; want 10 and none", q, len(page), next)
		}
	}
	p.items = append(p.items, anchorMeta("task-00000001", nil))
	page, next := scanPage(t, p, "page_size=10", "")
	if len(page) != 10 || next == "" {
		t.Fatalf("%d tasks, token %q; want 10 and a token", len(page), next)
	}
	if page, next = scanPage(t, p, "page_size=10", next); !slices.Equal(page, []string{"task-00000001"}) || next != "" {
		t.Errorf("the next page: %v, token %q; want TESK's id alone and no token", page, next)
	}
}

// A BASIC page without a filter the API server cannot apply reads its
// anchors whole in the scan's LISTs (the ordered ids, then TESK's, none
// here) and reads them no second time; with a name prefix it scans
// metadata and reads the page's anchors once, in one LIST; MINIMAL reads
// metadata alone. Each page then lists its jobs and its pods once, and
// makes no other request of the API server: no GET of an anchor.
func TestBasicPageReadsItsAnchorsOnce(t *testing.T) {
	a := newAPITest(t)
	for i := range 3 {
		if code, body := a.do(http.MethodPost, "/tasks", fmt.Sprintf(`{"name":"t-%d","executors":[{"image":"a","command":["x"]}]}`, i)); code != http.StatusOK {
			t.Fatalf("create: %d %v", code, body)
		}
	}
	a.withMetadata()
	meta := a.srv.Metadata.(*metadatafake.FakeMetadataClient)
	for q, want := range map[string][]string{
		"view=BASIC": {"typed list configmaps", "typed list configmaps", "typed list jobs", "typed list pods"},
		"view=BASIC&name_prefix=t-": {"metadata list configmaps", "metadata list configmaps",
			"typed list configmaps", "typed list jobs", "typed list pods"},
		"view=MINIMAL": {"metadata list configmaps", "metadata list configmaps", "typed list jobs", "typed list pods"},
	} {
		a.client.ClearActions()
		meta.ClearActions()
		code, body := a.do(http.MethodGet, "/tasks?"+q, "")
		tasks, _ := body["tasks"].([]any)
		if code != http.StatusOK || len(tasks) != 3 {
			t.Fatalf("%s: %d %v", q, code, body)
		}
		if q != "view=MINIMAL" && tasks[0].(map[string]any)["name"] == nil {
			t.Errorf("%s: no name in %v", q, tasks[0])
		}
		var got []string
		for client, acts := range map[string][]k8stesting.Action{"typed": a.client.Actions(), "metadata": meta.Actions()} {
			for _, act := range acts {
				got = append(got, client+" "+act.GetVerb()+" "+act.GetResource().Resource)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: requests to the API server\n %q\nwant\n %q", q, got, want)
		}
	}
}
