package tes

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// TestLimits: a task at a limit passes, one over it is refused naming the
// field, its size and the limit; 0 is no limit.
func TestLimits(t *testing.T) {
	l := Limits{Executors: 2, Inputs: 1, Outputs: 1, CPUCores: 4, RAMGB: 8, DiskGB: 10.5}
	exec := tesv1.Executor{Image: "alpine", Command: []string{"true"}}
	in, out := tesv1.Input{Path: "/in", Content: "x"}, tesv1.Output{Path: "/out", URL: "s3://b/o"}
	at := func() *tesv1.Task {
		return &tesv1.Task{
			Executors: []tesv1.Executor{exec, exec}, Inputs: []tesv1.Input{in}, Outputs: []tesv1.Output{out},
			Resources: &tesv1.Resources{CPUCores: 4, RAMGB: 8, DiskGB: 10.5},
		}
	}
	if err := l.Check(at()); err != nil {
		t.Fatalf("a task at every limit: %v", err)
	}
	if err := l.Check(&tesv1.Task{Executors: []tesv1.Executor{exec}}); err != nil {
		t.Fatalf("a task without resources: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*tesv1.Task)
		want   string
	}{
		{"executors", func(t *tesv1.Task) { t.Executors = append(t.Executors, exec) }, "executors: 3 of them, more than the 2"},
		{"inputs", func(t *tesv1.Task) { t.Inputs = append(t.Inputs, in) }, "inputs: 2 of them, more than the 1"},
		{"outputs", func(t *tesv1.Task) { t.Outputs = append(t.Outputs, out) }, "outputs: 2 of them, more than the 1"},
		{"cpu", func(t *tesv1.Task) { t.Resources.CPUCores = 5 }, "resources.cpu_cores: 5, more than the 4"},
		{"ram", func(t *tesv1.Task) { t.Resources.RAMGB = 1 << 20 }, "resources.ram_gb: 1048576 GB, more than the 8 GB"},
		{"disk", func(t *tesv1.Task) { t.Resources.DiskGB = 10.75 }, "resources.disk_gb: 10.75 GB, more than the 10.5 GB"},
	} {
		task := at()
		c.change(task)
		err := l.Check(task)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err := (Limits{}).Check(task); err != nil {
			t.Errorf("%s without limits: %v", c.name, err)
		}
	}
}

// TestCreateOverALimit: a create over a limit is a 400 naming it, and
// writes nothing.
func TestCreateOverALimit(t *testing.T) {
	a := newAPITest(t)
	a.srv.Config.Limits = DefaultLimits()
	over := strings.Replace(helloTask, `"resources":{"cpu_cores":1,`, `"resources":{"cpu_cores":1,"ram_gb":1048576,`, 1)
	code, body := a.do(http.MethodPost, "/tasks", over)
	if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "resources.ram_gb: 1048576 GB, more than the 1024 GB this service allows a task") {
		t.Errorf("a task asking 1 PiB of RAM: %d %v, want 400 naming the limit", code, body)
	}
	if n := len(a.anchors(t)); n != 0 {
		t.Errorf("a refused create wrote %d anchors", n)
	}
	if code, body := a.do(http.MethodPost, "/tasks", helloTask); code != http.StatusOK {
		t.Errorf("a task within the limits: %d %v", code, body)
	}
}

// TestCreateOverTheShare: with a share of cores per user, a task asking
// for more than a whole share is refused, naming it; without an owner (no
// access control) there is no share.
func TestCreateOverTheShare(t *testing.T) {
	a := newAPITest(t)
	a.srv.Config.Steps.Quota.CPU = 2
	big := strings.Replace(helloTask, `"cpu_cores":1`, `"cpu_cores":4`, 1)
	if code, body := a.do(http.MethodPost, "/tasks", big); code != http.StatusOK {
		t.Errorf("without an owner: %d %v", code, body)
	}
	err := a.srv.checkShare(&tesv1.Task{Resources: &tesv1.Resources{CPUCores: 4}}, Caller{Subject: "alice", Label: "alice"})
	if err == nil || !strings.Contains(err.Error(), "resources.cpu_cores: 4, more than each user's share of the cluster, 2 CPU cores at once") {
		t.Errorf("alice's task of 4 cores: %v", err)
	}
	if err := a.srv.checkShare(&tesv1.Task{Resources: &tesv1.Resources{CPUCores: 2}}, Caller{Subject: "alice", Label: "alice"}); err != nil {
		t.Errorf("alice's task of a whole share: %v", err)
	}
}

// TestFullPageWithinItsBytes: a FULL page ends before the task that would
// take it past the byte budget, with a token that resumes there: the pages
// hold every task once, in the list's order; BASIC pages are not cut. So
// does a FULL page of a state a task passes through (QUEUED, derived from
// each task's jobs and pods).
func TestFullPageWithinItsBytes(t *testing.T) {
	a := newAPITest(t)
	a.srv.Config.ListBytes = 500_000
	content := strings.Repeat("x", 200_000)
	var ids []string
	for i := 0; i < 5; i++ {
		task := fmt.Sprintf(`{"name":"big-%d","inputs":[{"path":"/data/in","content":%q}],"executors":[{"image":"alpine","command":["true"]}]}`, i, content)
		code, body := a.do(http.MethodPost, "/tasks", task)
		if code != http.StatusOK {
			t.Fatalf("create: %d %v", code, body)
		}
		ids = append(ids, body["id"].(string))
	}
	a.withMetadata()
	order := func(view string) (pages [][]string) {
		token := ""
		for n := 0; n < 10; n++ {
			code, body := a.do(http.MethodGet, "/tasks?view="+view+"&page_token="+token, "")
			if code != http.StatusOK {
				t.Fatalf("list %s: %d %v", view, code, body)
			}
			var page []string
			for _, task := range body["tasks"].([]any) {
				page = append(page, task.(map[string]any)["id"].(string))
			}
			pages = append(pages, page)
			token, _ = body["next_page_token"].(string)
			if token == "" {
				return pages
			}
		}
		t.Fatalf("%s: no end after 10 pages", view)
		return nil
	}
	basic := order(tesv1.ViewBasic)
	if len(basic) != 1 || len(basic[0]) != 5 {
		t.Fatalf("BASIC pages %v, want one of 5", basic)
	}
	for _, view := range []string{tesv1.ViewFull, tesv1.ViewFull + "&state=QUEUED"} {
		full := order(view)
		var all []string
		for _, p := range full {
			if len(p) > 2 {
				t.Errorf("%s: a page of %d tasks of 200 kB each, past 500 kB", view, len(p))
			}
			all = append(all, p...)
		}
		if fmt.Sprint(all) != fmt.Sprint(basic[0]) {
			t.Errorf("%s pages %v, want the list's order %v once", view, full, basic[0])
		}
	}
}

// A FULL list over 300 tasks of 1 MiB of (compressible) inline content
// each: every page keeps to the 16 MiB budget, the pages hold every task
// once, and the heap the list holds at its peak is reported (it reads and
// encodes a chunk of a page at a time, not the 300 MiB the tasks inflate
// to).
func TestFullListOfLargeTasksKeepsItsBudget(t *testing.T) {
	a := newAPITest(t)
	content := strings.Repeat("ACGT", 1<<18-256) // about 1 MiB, as much as a task may hold
	for i := 0; i < 300; i++ {
		task := fmt.Sprintf(`{"name":"big-%d","inputs":[{"path":"/data/in","content":%q}],"executors":[{"image":"alpine","command":["true"]}]}`, i, content)
		if code, body := a.do(http.MethodPost, "/tasks", task); code != http.StatusOK {
			t.Fatalf("create %d: %d %v", i, code, body)
		}
	}
	a.withMetadata()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := uint64(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	seen, pages, largest := map[string]bool{}, 0, 0
	token := ""
	for ; pages < 100; pages++ {
		req, err := http.NewRequest(http.MethodGet, a.url+"/tasks?view=FULL&page_size=300&page_token="+token, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d %v", pages, resp.StatusCode, err)
		}
		largest = max(largest, len(raw))
		var body struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
			Next string `json:"next_page_token"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		for _, tk := range body.Tasks {
			if seen[tk.ID] {
				t.Errorf("%s on two pages", tk.ID)
			}
			seen[tk.ID] = true
		}
		if token = body.Next; token == "" {
			pages++
			break
		}
	}
	close(stop)
	<-done
	if len(seen) != 300 {
		t.Errorf("%d tasks over the pages, want 300", len(seen))
	}
	if largest > DefaultListBytes+1<<20 {
		t.Errorf("a page of %d bytes, past the budget of %d (and one task)", largest, DefaultListBytes)
	}
	t.Logf("300 tasks of 1 MiB in %d FULL pages, the largest %.1f MiB; the heap at its peak %.1f MiB above the %.1f MiB before the list",
		pages, float64(largest)/(1<<20), float64(peak-min(peak, before.HeapAlloc))/(1<<20), float64(before.HeapAlloc)/(1<<20))
}

// TestCreateWithANotifyURL: a task's tag tesk.notify_url must name an
// address the operator allows (NOTIFY_URL_PREFIXES); any other is refused,
// naming the tag, and nothing is written.
func TestCreateWithANotifyURL(t *testing.T) {
	a := newAPITest(t)
	tagged := func(addr string) string {
		return strings.Replace(helloTask, `"tags":{"project":"p1"}`, `"tags":{"project":"p1","tesk.notify_url":"`+addr+`"}`, 1)
	}
	if code, body := a.do(http.MethodPost, "/tasks", tagged("https://hooks.example.org/tes/1")); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), "tags.tesk.notify_url: this service posts no state changes to a task's own address") {
		t.Errorf("no prefixes allowed: %d %v, want 400 naming the tag", code, body)
	}
	a.srv.Config.Steps.NotifyURLPrefixes = []string{"https://hooks.example.org/tes"}
	if code, body := a.do(http.MethodPost, "/tasks", tagged("https://hooks.example.org/admin")); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["error"]), `tags.tesk.notify_url: "https://hooks.example.org/admin" is not among the addresses`) {
		t.Errorf("an address not allowed: %d %v, want 400 naming it", code, body)
	}
	if n := len(a.anchors(t)); n != 0 {
		t.Errorf("refused creates wrote %d anchors", n)
	}
	if code, body := a.do(http.MethodPost, "/tasks", tagged("https://hooks.example.org/tes/1")); code != http.StatusOK {
		t.Errorf("an allowed address: %d %v", code, body)
	}
}
