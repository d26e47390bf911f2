package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/elixir-cloud-aai/tesk-knative/steps"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// apiCounter counts the API requests of the TES API and the bytes it reads.
type apiCounter struct {
	next            http.RoundTripper
	requests, bytes atomic.Int64
}

func (c *apiCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	resp, err := c.next.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// tesCreates is how many tasks the TES API's benchmark creates one after
// another, before any runs.
const tesCreates = 300

// benchBacklog is the bound of each user's unfinished tasks the TES API of
// the benchmark runs with: on, as deployed (tes.DefaultBacklog), so that a
// create costs the requests it costs there (the LIST of the user's
// unfinished tasks, then the create), and raised to admit the benchmark's
// creates, each counted at 64 KiB at most (its small task is estimated at
// about 45 KB).
func benchBacklog(creates int) tes.Backlog {
	b := tes.DefaultBacklog()
	b.Tasks = max(b.Tasks, creates+1)
	b.Bytes = max(b.Bytes, int64(creates)*(64<<10))
	return b
}

var flagTESTasks = flag.String("tes-namespace-tasks", "10000,100000", "tasks in the namespace of the TES API's list benchmark, comma-separated, rising")

// benchTES measures the TES API: create, get and list latency, and a page of
// 256 tasks in a namespace of many (latency, API requests, bytes read).
func benchTES(ctx context.Context, c *cluster.Cluster) error {
	if err := parseTESCounts(); err != nil {
		return err
	}
	ns := "bench-tes"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := devstack.ApplyTESRBAC(ctx, c, filepath.Join("config", "knative", "tes-rbac.yaml"), ns); err != nil {
		return err
	}
	rc, err := serviceAccountConfig(ctx, c, ns, devstack.TESRole)
	if err != nil {
		return err
	}
	counter := &apiCounter{}
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return err
	}
	cfg := steps.DefaultConfig()
	cfg.Namespace = ns
	srv := &tes.Server{Client: client, Metadata: md, Log: zap.NewNop().Sugar(),
		Config: tes.Config{Namespace: ns, Steps: cfg, Backlog: benchBacklog(tesCreates), Info: tesv1.ServiceInfo{ID: "bench", Name: "bench", Version: "1"}}}
	hs := httptest.NewServer(srv.Echo())
	defer hs.Close()
	api := hs.URL + tes.BasePath
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

	type figure struct {
		ds              []time.Duration
		requests, bytes []int64
	}
	measure := func(f *figure, do func() error) error {
		r0, b0 := counter.requests.Load(), counter.bytes.Load()
		start := time.Now()
		if err := do(); err != nil {
			return err
		}
		f.ds = append(f.ds, time.Since(start))
		f.requests = append(f.requests, counter.requests.Load()-r0)
		f.bytes = append(f.bytes, (counter.bytes.Load()-b0)>>10)
		return nil
	}
	call := func(method, url string, body []byte, out any) error {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
		if out != nil {
			return json.Unmarshal(b, out)
		}
		return nil
	}
	task, _ := json.Marshal(map[string]any{
		"name": "bench", "tags": map[string]string{"k": "v"},
		"inputs":    []any{map[string]any{"path": "/data/in.txt", "content": "hello"}},
		"outputs":   []any{map[string]any{"path": "/data/out.txt", "url": "s3://b/out.txt"}},
		"executors": []any{map[string]any{"image": "alpine", "command": []string{"cat", "/data/in.txt"}, "stdout": "/data/out.txt"}},
	})

	const n = tesCreates
	fmt.Printf("== TES API: %d tasks created one after another, run to COMPLETE, each read\n", n)
	var create, getMin, getFull figure
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var r tesv1.CreateTaskResponse
		if err := measure(&create, func() error { return call(http.MethodPost, api+"/tasks", task, &r) }); err != nil {
			return err
		}
		ids = append(ids, r.ID)
	}
	// The views are read of tasks that ran, as a client reads them.
	if err := runTESTasks(ctx, c, ns, ids); err != nil {
		return err
	}
	for _, id := range ids {
		if err := measure(&getMin, func() error { return call(http.MethodGet, api+"/tasks/"+id, nil, nil) }); err != nil {
			return err
		}
		if err := measure(&getFull, func() error { return call(http.MethodGet, api+"/tasks/"+id+"?view=FULL", nil, nil) }); err != nil {
			return err
		}
	}
	fmt.Printf("  create:        %s  API requests %s\n", pct(create.ds), ipct(create.requests))
	fmt.Printf("  get MINIMAL:   %s  API requests %s\n", pct(getMin.ds), ipct(getMin.requests))
	fmt.Printf("  get FULL:      %s  API requests %s\n", pct(getFull.ds), ipct(getFull.requests))
	var listMin figure
	for i := 0; i < 50; i++ {
		if err := measure(&listMin, func() error { return call(http.MethodGet, api+"/tasks?page_size=256", nil, nil) }); err != nil {
			return err
		}
	}
	fmt.Printf("  list MINIMAL (256 of %d): %s  API requests %s\n", n, pct(listMin.ds), ipct(listMin.requests))
	fig := func(f figure) EventFigure {
		e := figureOf(f.ds)
		e.Requests, e.KiB = medianInt(f.requests), medianInt(f.bytes)
		return e
	}
	sum.TES = &TESSummary{Tasks: n, Create: fig(create), GetMinimal: fig(getMin), GetFull: fig(getFull), ListMinimal: fig(listMin)}

	// A namespace of many tasks: anchors as the TES API writes them, created
	// directly (faster than through the API; the same objects), each beside
	// an executor's Job and Pod (besideAnchor), grown to each count in turn.
	have := n
	for _, total := range tesCounts {
		begin := time.Now()
		if err := createTESAnchors(ctx, c, ns, have, total); err != nil {
			return err
		}
		have = total
		fmt.Printf("\n== TES API: a page of 256 in a namespace of %d tasks, each beside its executor's Job and Pod (created in %.1fs)\n", total, time.Since(begin).Seconds())
		page := TESPageSummary{Tasks: total}
		var allocs []int64
		for _, v := range []string{tesv1.ViewMinimal, tesv1.ViewBasic} {
			var f figure
			for i := 0; i < 7; i++ {
				var r tesv1.ListTasksResponse
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				if err := measure(&f, func() error { return call(http.MethodGet, api+"/tasks?page_size=256&view="+v, nil, &r) }); err != nil {
					return err
				}
				runtime.ReadMemStats(&ms1)
				if v == tesv1.ViewMinimal {
					allocs = append(allocs, int64(ms1.TotalAlloc-ms0.TotalAlloc)>>10)
				}
				if len(r.Tasks) != 256 || r.NextPageToken == "" {
					return fmt.Errorf("list %s: %d tasks, token %q", v, len(r.Tasks), r.NextPageToken)
				}
			}
			fmt.Printf("  list %-7s: %s  API requests %s  KiB read %s\n", v, pct(f.ds), ipct(f.requests), ipct(f.bytes))
			if v == tesv1.ViewMinimal {
				page.Minimal = fig(f)
			} else {
				page.Basic = fig(f)
			}
		}
		page.AllocKiB = medianInt(allocs)
		fmt.Printf("  Go heap allocated by a MINIMAL page (KiB): %s\n", ipct(allocs))
		// The pages after the first, each from the one before's token.
		var later figure
		token := ""
		for i := 0; i < 8; i++ {
			var r tesv1.ListTasksResponse
			q := api + "/tasks?page_size=256"
			if token != "" {
				q += "&page_token=" + url.QueryEscape(token)
			}
			do := func() error { return call(http.MethodGet, q, nil, &r) }
			if i == 0 {
				if err := do(); err != nil {
					return err
				}
			} else if err := measure(&later, do); err != nil {
				return err
			}
			if len(r.Tasks) != 256 || r.NextPageToken == "" {
				return fmt.Errorf("list page %d: %d tasks, token %q", i+1, len(r.Tasks), r.NextPageToken)
			}
			token = r.NextPageToken
		}
		page.Later = fig(later)
		fmt.Printf("  pages 2-8 MINIMAL: %s  API requests %s  KiB read %s\n", pct(later.ds), ipct(later.requests), ipct(later.bytes))
		// A filter the API server cannot apply: tags (every bulk task has
		// k=v; one page of them).
		var filtered figure
		for i := 0; i < 7; i++ {
			var r tesv1.ListTasksResponse
			if err := measure(&filtered, func() error {
				return call(http.MethodGet, api+"/tasks?page_size=256&tag_key=k&tag_value=v", nil, &r)
			}); err != nil {
				return err
			}
			if len(r.Tasks) != 256 {
				return fmt.Errorf("list by tag: %d tasks", len(r.Tasks))
			}
		}
		page.Filtered = fig(filtered)
		fmt.Printf("  list MINIMAL, tag filter: %s  API requests %s  KiB read %s\n", pct(filtered.ds), ipct(filtered.requests), ipct(filtered.bytes))
		// A filter that keeps no task: the scan stops at its bound and
		// answers an empty page with a token.
		var none figure
		for i := 0; i < 3; i++ {
			var r tesv1.ListTasksResponse
			if err := measure(&none, func() error { return call(http.MethodGet, api+"/tasks?page_size=256&name_prefix=none", nil, &r) }); err != nil {
				return err
			}
			if len(r.Tasks) != 0 || r.NextPageToken == "" {
				return fmt.Errorf("list of a prefix no task has: %d tasks, token %q", len(r.Tasks), r.NextPageToken)
			}
		}
		fmt.Printf("  list MINIMAL, a name prefix no task has (the bound of one page): %s  API requests %s  KiB read %s\n", pct(none.ds), ipct(none.requests), ipct(none.bytes))
		sum.TESPages = append(sum.TESPages, page)
	}
	return nil
}

// tesCounts are the namespace sizes of the list benchmark.
var tesCounts []int

func parseTESCounts() error {
	tesCounts = nil
	for _, f := range strings.Split(*flagTESTasks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 300+256*8 || (len(tesCounts) > 0 && n <= tesCounts[len(tesCounts)-1]) {
			return fmt.Errorf("-tes-namespace-tasks: %q is not a rising list of counts of %d or more", *flagTESTasks, 300+256*8)
		}
		tesCounts = append(tesCounts, n)
	}
	return nil
}

func createTESAnchors(ctx context.Context, c *cluster.Cluster, ns string, from, to int) error {
	t := &tesv1.Task{Name: "bulk", Tags: tesv1.TagMap{"k": "v"},
		Executors: []tesv1.Executor{{Image: "alpine", Command: []string{"true"}}}}
	idx := make(chan int)
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range idx {
				id := taskmeta.NewID(time.Now())
				raw, err := tes.Convert(t, id, tes.ConvertOptions{})
				var cm *corev1.ConfigMap
				if err == nil {
					cm, err = tes.BuildAnchor(ns, id, t, raw, tes.Caller{})
				}
				if err == nil {
					cm, err = c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
				}
				if err == nil {
					err = besideAnchor(ctx, c, cm)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		idx <- i
	}
	close(idx)
	wg.Wait()
	return first
}
