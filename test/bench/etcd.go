package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/tes"
	"github.com/elixir-cloud-aai/tesk-knative/test/cluster"
	"github.com/elixir-cloud-aai/tesk-knative/test/devstack"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// benchEtcd creates tasks of several shapes through the TES API binary
// (bin/tes, beside bin/handler and the ApiServerSource adapter, as make dev
// runs them), runs each to COMPLETE on kwok's pods, and reads from the
// cluster's etcd what each task keeps there, by kind of object: while it
// runs (the peak of the samples) and once it has ended and settled (what
// stays until TASK_TTL, the Events apart). A task that does not end
// COMPLETE fails the run.
//
// The sizes are etcd's own: its gRPC gateway (the client port's
// /v3/kv/range, JSON over HTTP, no client library) gives each key and the
// value the API server wrote, the object's protobuf encoding with its
// 4-byte "k8s\x00" prefix. That is exact where a GET with Accept:
// application/vnd.kubernetes.protobuf is not quite (the API server's
// answer adds the resourceVersion, which etcd keeps as the key's revision),
// and it also gives each key's revisions, so that the bytes of every
// version written, which etcd holds until the API server compacts its
// history (every 5 minutes), are read too. The protobuf GETs are made once
// each task has settled, as a cross-check.
func benchEtcd(ctx context.Context, c *cluster.Cluster) (*etcdRun, error) {
	etcdURL := c.EtcdURL()
	if etcdURL == "" {
		return nil, fmt.Errorf("the cluster's etcd address is not known")
	}
	g := &etcdGateway{url: etcdURL, hc: &http.Client{Timeout: 30 * time.Second}}
	ns := "bench-etcd"
	if err := c.SetNamespaceLogs(ctx, ns, ranLog); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp("", "bench-etcd-stack-*.log")
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	s, err := devstack.Start(ctx, c, devstack.Options{Root: ".", Namespace: ns, Port: ports[0], Handler: "bin/handler",
		TES: "bin/tes", TESPort: ports[1], Sweep: time.Minute, Stdout: logFile, Stderr: logFile})
	if err != nil {
		return nil, fmt.Errorf("%w (run `make build` first; the stack's log: %s)", err, logFile.Name())
	}
	defer s.Stop()
	api := s.TESURL + tes.BasePath
	fmt.Printf("== etcd: what one task keeps, by kind (bin/tes and bin/handler on namespace %s; the handler's and the TES API's log in %s)\n", ns, logFile.Name())
	fmt.Println("sizes: each key's length plus its value's, as etcd holds them (read through etcd's gRPC gateway: the object's protobuf encoding with its 4-byte prefix, as the API server writes it)")

	specs, maxExecutors, err := etcdTaskSpecs(ns)
	if err != nil {
		return nil, err
	}
	run := &etcdRun{MaxExecutors: maxExecutors}
	for _, spec := range specs {
		fmt.Printf("\n-- %s: %s (request %s bytes)\n", spec.Name, spec.What, num(len(spec.Body)))
		shape, err := runEtcdShape(ctx, c, g, api, ns, spec)
		if err != nil {
			return nil, fmt.Errorf("task %q: %w (the stack's log: %s)", spec.Name, err, logFile.Name())
		}
		run.Shapes = append(run.Shapes, shape)
		fmt.Printf("task %s, %d samples while it ran\n%s%s\n", shape.Task, shape.Samples, etcdTable(shape), etcdArithmetic(shape))
		if spec.Executors > 1 {
			run.PerExecutor = executorBytes(shape.Kept(), shape.Task) / int64(spec.Executors)
			fmt.Printf("each executor keeps %s bytes once the task ended (its Job and Pod); the TES API admits up to %s executors of the shortest form, about %s bytes of them in one task\n",
				num(run.PerExecutor), num(run.MaxExecutors), num(run.PerExecutor*int64(run.MaxExecutors)))
		}
	}
	fmt.Printf("\n%s", etcdOverview(run.Shapes))
	return run, nil
}

// etcdRun is what benchEtcd measured.
type etcdRun struct {
	Shapes []etcdShape
	// PerExecutor is the bytes one executor of the shape with several
	// keeps once its task ended; MaxExecutors the most executors of the
	// shortest form the TES API admits in one task.
	PerExecutor  int64
	MaxExecutors int
}

// etcdTaskSpec is a task to create and measure.
type etcdTaskSpec struct {
	Name, What string
	Body       []byte
	Executors  int
}

// etcdTaskSpecs are the tasks benchEtcd measures: a small one; the largest
// inline content the TES API admits (random, so that it does not
// compress: the anchor holds it gzipped twice, as the handler's task and
// as the TES task); the longest command line (text, which compresses:
// the anchor stays small, the Job and the Pod hold it whole); several
// executors. It also returns the most executors of the shortest form one
// task may have.
func etcdTaskSpecs(ns string) ([]etcdTaskSpec, int, error) {
	small := etcdTaskJSON([]any{map[string]any{"path": "/data/in.txt", "content": "hello"}},
		[]any{map[string]any{"image": "alpine", "command": []string{"cat", "/data/in.txt"}, "stdout": "/data/out.txt"}})
	rnd := rand.New(rand.NewChaCha8([32]byte{'e', 't', 'c', 'd'}))
	noise := make([]byte, tes.MaxRequestBytes)
	for i := range noise {
		noise[i] = byte(rnd.Uint32())
	}
	random := base64.StdEncoding.EncodeToString(noise)
	contentTask := func(n int) []byte {
		return etcdTaskJSON([]any{map[string]any{"path": "/data/in.txt", "content": random[:n]}},
			[]any{map[string]any{"image": "alpine", "command": []string{"wc", "-c", "/data/in.txt"}, "stdout": "/data/out.txt"}})
	}
	var script strings.Builder
	for i := 0; script.Len() < tes.MaxRequestBytes; i++ {
		fmt.Fprintf(&script, "echo step %06d of the script >> /data/out.txt\n", i)
	}
	text := script.String()
	argsTask := func(n int) []byte {
		return etcdTaskJSON([]any{map[string]any{"path": "/data/in.txt", "content": "hello"}},
			[]any{map[string]any{"image": "alpine", "command": []string{"sh", "-c", text[:n]}}})
	}
	minimal := func(n int) []byte {
		ex := make([]any, n)
		for i := range ex {
			ex[i] = map[string]any{"image": "alpine", "command": []string{"true"}}
		}
		return etcdTaskJSON(nil, ex)
	}
	several := make([]any, 8)
	for i := range several {
		several[i] = map[string]any{"image": "alpine", "command": []string{"echo", fmt.Sprintf("executor %d", i)}}
	}
	fits := func(body []byte) bool { return admitted(ns, body) == nil }
	nContent := largest(1, len(random), func(n int) bool { return fits(contentTask(n)) })
	nArgs := largest(1, len(text), func(n int) bool { return fits(argsTask(n)) })
	nMax := largest(1, tes.MaxRequestBytes/8, func(n int) bool { return fits(minimal(n)) })
	if nContent <= 1 || nArgs <= 1 || nMax <= 1 {
		return nil, 0, fmt.Errorf("the TES API's checks admit no large task (content %d, command %d, executors %d)", nContent, nArgs, nMax)
	}
	specs := []etcdTaskSpec{
		{Name: "small", What: "one executor, one input (5 bytes of content), one output", Body: small, Executors: 1},
		{Name: "content", What: fmt.Sprintf("one executor, one input of %s bytes of random base64 content (the largest the TES API admits: the anchor holds it gzipped twice), one output", num(nContent)), Body: contentTask(nContent), Executors: 1},
		{Name: "command", What: fmt.Sprintf("one executor whose command is a script of %s bytes of text (the longest the TES API admits), one input, one output", num(nArgs)), Body: argsTask(nArgs), Executors: 1},
		{Name: "executors", What: "8 executors (echo), one output", Body: etcdTaskJSON(nil, several), Executors: 8},
	}
	for _, s := range specs {
		if err := admitted(ns, s.Body); err != nil {
			return nil, 0, fmt.Errorf("task %q: %w", s.Name, err)
		}
	}
	return specs, nMax, nil
}

// etcdTaskJSON is a task of the inputs and executors given and one output.
func etcdTaskJSON(inputs, executors []any) []byte {
	t := map[string]any{"name": "etcd", "executors": executors,
		"outputs": []any{map[string]any{"path": "/data/out.txt", "url": "s3://b/out.txt"}}}
	if inputs != nil {
		t["inputs"] = inputs
	}
	b, _ := json.Marshal(t)
	return b
}

// admitted checks a create's body as the TES API does before it writes,
// with the default settings: the request's size, the task, and its anchor.
func admitted(ns string, body []byte) error {
	t, err := tes.DecodeTask(body)
	if err == nil {
		err = tes.Validate(t)
	}
	if err != nil {
		return err
	}
	id := taskmeta.NewID(time.Now())
	raw, err := tes.Convert(t, id, tes.ConvertOptions{})
	if err != nil {
		return err
	}
	_, err = tes.BuildAnchor(ns, id, t, raw, tes.Caller{})
	return err
}

// largest is the largest n in [lo, hi] for which ok holds, ok holding from
// lo up to some n and not above it; lo if ok(lo) does not hold.
func largest(lo, hi int, ok func(int) bool) int {
	if !ok(lo) {
		return lo
	}
	if ok(hi) {
		return hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// runEtcdShape creates the task, samples its keys every 250 ms until it
// has ended and nothing of it changed for 5 s, and reads the history of
// its keys.
func runEtcdShape(ctx context.Context, c *cluster.Cluster, g *etcdGateway, api, ns string, spec etcdTaskSpec) (etcdShape, error) {
	shape := etcdShape{Name: spec.Name, What: spec.What, RequestBytes: len(spec.Body), Executors: spec.Executors}
	var created tesv1.CreateTaskResponse
	if err := tesCall(http.MethodPost, api+"/tasks", spec.Body, &created); err != nil {
		return shape, err
	}
	id := created.ID
	shape.Task = id
	if cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, id, metav1.GetOptions{}); err == nil {
		// The estimate the bound counts, to set beside the peak measured.
		shape.Estimate, _ = strconv.ParseInt(cm.Annotations[taskmeta.AnnotationSize], 10, 64)
	}
	w := &etcdSampler{g: g, ns: ns, task: id, seen: map[string]storedObject{}, sizes: map[string]storedObject{}}
	var samples []footprint
	var ended time.Time
	var last footprint
	changed := time.Now()
	deadline := time.Now().Add(10 * time.Minute)
	state := ""
	for i := 0; ; i++ {
		if w.pv == "" {
			if pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, taskmeta.PVCName(id), metav1.GetOptions{}); err == nil {
				w.pv = pvc.Spec.VolumeName
			}
		}
		f, err := w.sample(ctx)
		if err != nil {
			return shape, err
		}
		samples = append(samples, f)
		if !sameFootprint(f, last) {
			changed = time.Now()
		}
		last = f
		if ended.IsZero() && i%2 == 0 {
			var v tesv1.Task
			if err := tesCall(http.MethodGet, api+"/tasks/"+id, nil, &v); err != nil {
				return shape, err
			}
			state = v.State
			done, err := judgeState(id, state)
			if err != nil {
				var full tesv1.Task
				_ = tesCall(http.MethodGet, api+"/tasks/"+id+"?view=FULL", nil, &full)
				b, _ := json.Marshal(full.Logs)
				return shape, fmt.Errorf("%w: %s", err, b)
			}
			if done {
				ended = time.Now()
				shape.Samples = len(samples)
			}
		}
		now := time.Now()
		if !ended.IsZero() && now.Sub(ended) >= 5*time.Second && now.Sub(changed) >= 5*time.Second {
			break
		}
		if !ended.IsZero() && now.Sub(ended) > 2*time.Minute {
			return shape, fmt.Errorf("task %s: its objects still changed 2 minutes after it ended", id)
		}
		if ended.IsZero() && now.After(deadline) {
			return shape, fmt.Errorf("task %s did not end within 10 minutes (still %s)", id, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The peak while it ran: of the samples taken before the TES API
	// answered a final state.
	shape.Peak, shape.Final = peakOf(samples[:shape.Samples]), last
	written, err := w.history(ctx)
	if err != nil {
		fmt.Printf("  (the history of task %s's keys was not read: %v)\n", id, err)
	} else {
		shape.Written = written
	}
	crossCheck(ctx, c, ns, id, shape.Final)
	return shape, nil
}

// judgeState says whether a task in state has ended; an error if it ended
// otherwise than COMPLETE, which fails the run.
func judgeState(id, state string) (ended bool, err error) {
	switch {
	case !tesv1.IsFinal(state):
		return false, nil
	case state != tesv1.StateComplete:
		return true, fmt.Errorf("task %s ended %s, not COMPLETE", id, state)
	}
	return true, nil
}

// sameFootprint says whether two samples hold the same keys at the same
// revisions.
func sameFootprint(a, b footprint) bool {
	if len(a) != len(b) {
		return false
	}
	for k, o := range a {
		if p, ok := b[k]; !ok || p.ModRevision != o.ModRevision {
			return false
		}
	}
	return true
}

// crossCheck prints the task's objects as the API server returns them in
// protobuf, beside etcd's values, and its Events as core/v1 and
// events.k8s.io/v1 list them, beside the keys under /registry/events.
func crossCheck(ctx context.Context, c *cluster.Cluster, ns, task string, f footprint) {
	var etcdBytes, apiBytes int64
	n, skipped := 0, 0
	rc := c.Client.CoreV1().RESTClient()
	for key, o := range f {
		path, ok := apiPathOf(key)
		if !ok {
			skipped++
			continue
		}
		body, err := rc.Get().AbsPath(path).SetHeader("Accept", "application/vnd.kubernetes.protobuf").DoRaw(ctx)
		if err != nil {
			if apierrors.IsNotFound(err) {
				skipped++
				continue
			}
			fmt.Printf("  cross-check: GET %s: %v\n", path, err)
			return
		}
		n++
		etcdBytes += o.Bytes
		apiBytes += int64(len(key) + len(body))
	}
	fmt.Printf("  cross-check: %d of the %d objects as the API server returns them (GET, Accept: application/vnd.kubernetes.protobuf) with their keys: %s bytes; etcd holds %s of them (%d not read)\n",
		n, len(f), num(apiBytes), num(etcdBytes), skipped)
	core, err1 := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	modern, err2 := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err1 != nil || err2 != nil {
		fmt.Printf("  cross-check of the Events: %v %v\n", err1, err2)
		return
	}
	ours := func(name string) bool { return name == task || strings.HasPrefix(name, task+"-") }
	nc, nm := 0, 0
	for _, e := range core.Items {
		if ours(e.InvolvedObject.Name) {
			nc++
		}
	}
	for _, e := range modern.Items {
		if ours(e.Regarding.Name) {
			nm++
		}
	}
	fmt.Printf("  cross-check: core/v1 lists %d Events about the task's objects, events.k8s.io/v1 %d, etcd holds %d under /registry/events (one stored object each)\n",
		nc, nm, f.byKind()[kindEvent].Count)
}

// tesCall makes a request of the TES API and decodes its answer into out;
// an answer other than 200 is an error.
func tesCall(method, url string, body []byte, out any) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		if len(b) > 500 {
			b = b[:500]
		}
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// freePorts picks n ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// etcdSampler reads a task's keys from etcd.
type etcdSampler struct {
	g            *etcdGateway
	ns, task, pv string
	seen         map[string]storedObject // each key's latest sample, deleted ones too
	sizes        map[string]storedObject // values read, by key, at their revision
}

// sample lists every key of the API server's (keys only) and reads the
// values of the task's, those changed since they were last read.
func (w *etcdSampler) sample(ctx context.Context) (footprint, error) {
	kvs, err := w.g.rangeOf(ctx, []byte(registryRoot), prefixEnd([]byte(registryRoot)), true, 0)
	if err != nil {
		return nil, err
	}
	f := footprint{}
	for _, kv := range kvs {
		key := string(kv.Key)
		kind, ok := kindOf(key, w.ns, w.task, w.pv)
		if !ok {
			continue
		}
		o, ok := w.sizes[key]
		if !ok || o.ModRevision != int64(kv.ModRevision) {
			vs, err := w.g.rangeOf(ctx, kv.Key, nil, false, int64(kv.ModRevision))
			if err != nil {
				return nil, err
			}
			if len(vs) != 1 {
				continue // deleted since the list
			}
			o = storedObject{Key: key, Kind: kind, Bytes: int64(len(vs[0].Key) + len(vs[0].Value)),
				Version: int64(vs[0].Version), CreateRevision: int64(vs[0].CreateRevision), ModRevision: int64(vs[0].ModRevision)}
			w.sizes[key] = o
		}
		o.Kind = kind // the PV's Events are known as the task's once its PV is
		f[key] = o
		w.seen[key] = o
	}
	return f, nil
}

// history sums, per kind, every revision of every key the task had (each
// value as etcd keeps it until the API server compacts the history),
// walking each key back from its last revision seen.
func (w *etcdSampler) history(ctx context.Context) (map[string]kindFigure, error) {
	out := map[string]kindFigure{}
	keys := make([]string, 0, len(w.seen))
	for k := range w.seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		o := w.seen[key]
		k := out[o.Kind]
		rev := o.ModRevision
		for rev >= o.CreateRevision && rev > 0 {
			vs, err := w.g.rangeOf(ctx, []byte(key), nil, false, rev)
			if err != nil {
				return nil, err
			}
			if len(vs) != 1 {
				break
			}
			k.Written += int64(len(vs[0].Key) + len(vs[0].Value))
			k.Writes++
			rev = int64(vs[0].ModRevision) - 1
		}
		out[o.Kind] = k
	}
	return out, nil
}

// etcdGateway reads etcd through its gRPC gateway: JSON over HTTP on the
// client port.
type etcdGateway struct {
	url string
	hc  *http.Client
}

// etcdKV is a key of a range's answer (the gateway writes keys and values
// in base64, which []byte decodes, and 64-bit numbers as strings).
type etcdKV struct {
	Key            []byte  `json:"key"`
	Value          []byte  `json:"value"`
	CreateRevision etcdInt `json:"create_revision"`
	ModRevision    etcdInt `json:"mod_revision"`
	Version        etcdInt `json:"version"`
}

// etcdInt is a 64-bit number the gateway writes as a string (or a number).
type etcdInt int64

func (n *etcdInt) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*n = etcdInt(v)
	return err
}

// rangeOf reads the keys from key to end (end nil: key alone) at revision
// rev (0: the latest), with their values unless keysOnly.
func (g *etcdGateway) rangeOf(ctx context.Context, key, end []byte, keysOnly bool, rev int64) ([]etcdKV, error) {
	body, _ := json.Marshal(struct {
		Key      []byte `json:"key"`
		RangeEnd []byte `json:"range_end,omitempty"`
		KeysOnly bool   `json:"keys_only,omitempty"`
		Revision int64  `json:"revision,omitempty"`
	}{key, end, keysOnly, rev})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.url+"/v3/kv/range", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd: range %q at revision %d: %s: %s", key, rev, resp.Status, bytes.TrimSpace(b))
	}
	var out struct {
		Kvs []etcdKV `json:"kvs"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("etcd: range %q: %w", key, err)
	}
	return out.Kvs, nil
}

// prefixEnd is the end of the range of the keys that begin with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}
