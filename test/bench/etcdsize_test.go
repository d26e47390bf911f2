package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	testNS   = "bench-etcd"
	testTask = "task-00abc12345678"
	testPV   = "pvc-1234"
)

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		key, pv, want string
	}{
		{"/registry/configmaps/bench-etcd/" + testTask, "", kindAnchor},
		{"/registry/configmaps/bench-etcd/" + testTask + "-extra", "", kindConfig},
		{"/registry/secrets/bench-etcd/" + testTask + "-creds", "", kindSecret},
		{"/registry/persistentvolumeclaims/bench-etcd/" + testTask + "-pvc", "", kindPVC},
		{"/registry/persistentvolumes/" + testPV, testPV, kindPV},
		{"/registry/jobs/bench-etcd/" + testTask + "-ex-00", "", kindJob},
		{"/registry/pods/bench-etcd/" + testTask + "-ex-00-x7k2p", "", kindPod},
		{"/registry/events/bench-etcd/" + testTask + ".18a2b3c4d5e6f708", "", kindEvent},
		{"/registry/events/bench-etcd/" + testTask + "-ex-00-x7k2p.18a2b3c4d5e6f708", "", kindEvent},
		{"/registry/events/bench-etcd/" + testPV + ".18a2b3c4d5e6f708", testPV, kindEvent},
		{"/registry/coordination.k8s.io/leases/bench-etcd/" + testTask + "-lock", "", "coordination.k8s.io/leases"},
		// Not the task's.
		{"/registry/events/bench-etcd/" + testPV + ".18a2b3c4d5e6f708", "", ""},
		{"/registry/persistentvolumes/" + testPV, "", ""},
		{"/registry/persistentvolumes/pvc-other", testPV, ""},
		{"/registry/configmaps/bench-etcd/" + testTask + "0", "", ""},
		{"/registry/configmaps/bench-etcd/kube-root-ca.crt", "", ""},
		{"/registry/configmaps/other/" + testTask, "", ""},
		{"/registry/configmaps/bench-etcd-2/" + testTask, "", ""},
		{"/registry/namespaces/bench-etcd", "", ""},
		{"/registry/namespaces/" + testTask, "", ""},
		{"/other/configmaps/bench-etcd/" + testTask, "", ""},
	} {
		got, ok := kindOf(c.key, testNS, testTask, c.pv)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("kindOf(%q, pv %q) = %q, %v; want %q", c.key, c.pv, got, ok, c.want)
		}
	}
}

func TestAPIPathOf(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"/registry/configmaps/ns/a", "/api/v1/namespaces/ns/configmaps/a"},
		{"/registry/events/ns/a.1", "/api/v1/namespaces/ns/events/a.1"},
		{"/registry/jobs/ns/a-ex-00", "/apis/batch/v1/namespaces/ns/jobs/a-ex-00"},
		{"/registry/persistentvolumes/pvc-1", "/api/v1/persistentvolumes/pvc-1"},
		{"/registry/persistentvolumeclaims/ns/a-pvc", "/api/v1/namespaces/ns/persistentvolumeclaims/a-pvc"},
		{"/registry/coordination.k8s.io/leases/ns/a", ""},
		{"/registry/namespaces/ns", ""},
		{"/elsewhere/configmaps/ns/a", ""},
	} {
		got, ok := apiPathOf(c.key)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("apiPathOf(%q) = %q, %v; want %q", c.key, got, ok, c.want)
		}
	}
}

// obj is a stored object of kind and size whose key names it.
func obj(kind, name string, bytes int64) storedObject {
	return storedObject{Key: "/registry/x/" + testNS + "/" + name, Kind: kind, Bytes: bytes}
}

func fp(objs ...storedObject) footprint {
	f := footprint{}
	for _, o := range objs {
		f[o.Key] = o
	}
	return f
}

// The task of the tables' tests: an anchor, a PVC, two executors' Jobs
// and Pods, and Events.
var (
	testPeak = fp(obj(kindAnchor, testTask, 3000), obj(kindPVC, testTask+"-pvc", 900), obj(kindJob, testTask+"-ex-00", 4000),
		obj(kindPod, testTask+"-ex-00-abcde", 6000), obj(kindEvent, testTask+"-ex-00.1", 700), obj(kindEvent, testTask+"-ex-00-abcde.2", 800))
	testFinal = fp(obj(kindAnchor, testTask, 3500), obj(kindJob, testTask+"-ex-00", 4100), obj(kindPod, testTask+"-ex-00-abcde", 6100),
		obj(kindJob, testTask+"-ex-01", 4100), obj(kindPod, testTask+"-ex-01-fghij", 6100),
		obj(kindEvent, testTask+"-ex-00.1", 700), obj(kindEvent, testTask+".3", 600))
)

func TestFootprintSums(t *testing.T) {
	if got := testPeak.total(); got != 15400 {
		t.Errorf("total = %d, want 15400", got)
	}
	k := testFinal.byKind()
	if k[kindJob] != (kindFigure{Count: 2, Bytes: 8200}) || k[kindEvent] != (kindFigure{Count: 2, Bytes: 1300}) || k[kindAnchor] != (kindFigure{Count: 1, Bytes: 3500}) {
		t.Errorf("byKind = %+v", k)
	}
	if got := testFinal.total(); got != 25200 {
		t.Errorf("total = %d, want 25200", got)
	}
	if got := testFinal.without(kindEvent).total(); got != 3500+2*4100+2*6100 {
		t.Errorf("without the Events: %d", got)
	}
	if got := executorBytes(testFinal, testTask); got != 2*4100+2*6100+700 {
		t.Errorf("executorBytes = %d, want the executors' Jobs, Pods and the Event about ex-00 (%d)", got, 2*4100+2*6100+700)
	}
}

func TestPeakOf(t *testing.T) {
	small, big, later := fp(obj(kindAnchor, testTask, 10)), fp(obj(kindAnchor, testTask, 30)), fp(obj(kindAnchor, testTask, 30), obj(kindJob, testTask+"-ex-00", 0))
	for _, c := range []struct {
		name    string
		samples []footprint
		want    footprint
	}{
		{"none", nil, nil},
		{"one", []footprint{small}, small},
		{"the largest total", []footprint{small, big, small}, big},
		{"the first of equals", []footprint{small, big, later}, big},
	} {
		got := peakOf(c.samples)
		if (got == nil) != (c.want == nil) || len(got) != len(c.want) || got.total() != c.want.total() {
			t.Errorf("%s: peakOf = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestKindsOf(t *testing.T) {
	got := kindsOf(map[string]kindFigure{kindEvent: {}, "zz/things": {}, kindAnchor: {}}, map[string]kindFigure{kindPod: {}, "aa/things": {}})
	want := []string{kindAnchor, kindPod, kindEvent, "aa/things", "zz/things"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("kindsOf = %v, want %v", got, want)
	}
}

func TestPerGiB(t *testing.T) {
	for _, c := range []struct{ n, want int64 }{{0, 0}, {-1, 0}, {1 << 30, 1}, {1 << 20, 1024}, {20000, 53687}, {3 << 30, 0}} {
		if got := perGiB(c.n); got != c.want {
			t.Errorf("perGiB(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestEtcdTable(t *testing.T) {
	s := etcdShape{Name: "small", Task: testTask, RequestBytes: 300, Estimate: 2900, Peak: testPeak, Final: testFinal,
		Written: map[string]kindFigure{kindAnchor: {Written: 20000, Writes: 6}, kindJob: {Written: 16000, Writes: 4}}}
	table := etcdTable(s)
	for _, want := range []string{
		"| anchor ConfigMap | 1 | 3,000 | 1 | 3,500 | 20,000 (6) |",
		"| PersistentVolumeClaim | 1 | 900 | 0 | 0 | 0 |",
		"| Jobs | 1 | 4,000 | 2 | 8,200 | 16,000 (4) |",
		"| Events | 2 | 1,500 | 2 | 1,300 | 0 |",
		"| **total** | 6 | **15,400** | 7 | **25,200** | 36,000 (10) |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	if i, j := strings.Index(table, "| anchor"), strings.Index(table, "| Events"); i > j {
		t.Errorf("the kinds are out of order:\n%s", table)
	}
	s.Written = nil
	if table := etcdTable(s); !strings.Contains(table, "| Jobs | 1 | 4,000 | 2 | 8,200 | not read |") || !strings.Contains(table, "| 7 | **25,200** | not read |") {
		t.Errorf("a history not read is not said so:\n%s", table)
	}

	// A GiB holds 69,723 tasks of 15,400 bytes (the peak), 42,608 of
	// 25,200 (ended) and 44,926 of 23,900 (ended, without their Events);
	// 2 GiB twice as many.
	s.Written = map[string]kindFigure{kindAnchor: {Written: 20000, Writes: 6}}
	arith := etcdArithmetic(s)
	for _, want := range []string{"139,446 such tasks at their peak (69,723 per GiB)", "85,216 ended (42,608 per GiB)", "89,852 ended once their Events expired (23,900 bytes each, 44,926 per GiB)"} {
		if !strings.Contains(arith, want) {
			t.Errorf("the arithmetic lacks %q: %s", want, arith)
		}
	}
	over := etcdOverview([]etcdShape{s, {Name: "unread", RequestBytes: 10, Peak: testPeak, Final: testPeak}})
	// The bound's column is the estimate the create recorded, not the
	// anchor's size.
	if !strings.Contains(over, "| task | request | estimate at create (tesk.ga4gh.org/size, the bound counts) | peak |") {
		t.Errorf("the overview's header does not name the estimate:\n%s", over)
	}
	for _, want := range []string{
		"| small | 300 | 2,900 | 15,400 | 25,200 | 23,900 | 20,000 | 69,723 / 42,608 / 44,926 |",
		"| unread | 10 | not recorded | 15,400 | 15,400 | 13,900 | not read | 69,723 / 69,723 / 77,247 |",
	} {
		if !strings.Contains(over, want) {
			t.Errorf("the overview lacks %q:\n%s", want, over)
		}
	}
	md := etcdMarkdown("2026-12-07 18:00 UTC at abc1234", &etcdRun{Shapes: []etcdShape{s}, PerExecutor: 11000, MaxExecutors: 2000})
	for _, want := range []string{"Run of 2026-12-07 18:00 UTC at abc1234.", "**small**", testTask, "| **total** |", "| small | 300 |",
		"Each executor keeps 11,000 bytes", "up to 2,000 executors", "about 22,000,000 bytes"} {
		if !strings.Contains(strings.Join(strings.Fields(md), " "), want) { // the paragraphs' wrapping aside
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
}

func TestLargest(t *testing.T) {
	for _, c := range []struct{ lo, hi, limit, want int }{
		{1, 100, 37, 37}, {1, 100, 1, 1}, {1, 100, 0, 1}, {1, 100, 100, 100}, {1, 100, 500, 100}, {1, 1 << 20, 654321, 654321},
	} {
		if got := largest(c.lo, c.hi, func(n int) bool { return n <= c.limit }); got != c.want {
			t.Errorf("largest(%d, %d) up to %d = %d, want %d", c.lo, c.hi, c.limit, got, c.want)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ p, want string }{{"/registry/", "/registry0"}, {"a\xff", "b"}, {"\xff\xff", "\x00"}} {
		if got := string(prefixEnd([]byte(c.p))); got != c.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestEtcdKVDecodes(t *testing.T) {
	var kv etcdKV
	if err := json.Unmarshal([]byte(`{"key":"L3JlZ2lzdHJ5L2E=","value":"azhzAA==","create_revision":"5","mod_revision":12,"version":"3"}`), &kv); err != nil {
		t.Fatal(err)
	}
	if string(kv.Key) != "/registry/a" || string(kv.Value) != "k8s\x00" || kv.CreateRevision != 5 || kv.ModRevision != 12 || kv.Version != 3 {
		t.Errorf("decoded %+v", kv)
	}
	if err := json.Unmarshal([]byte(`{"version":"x"}`), &kv); err == nil {
		t.Error("a version that is not a number decoded")
	}
}

func TestCheckOnly(t *testing.T) {
	for _, c := range []struct {
		only    string
		summary bool
		want    string
	}{
		{"", true, ""}, {"tes", false, ""}, {"shares", true, ""}, {"etcd", false, ""},
		{"etcd", true, "-summary and -readme"},
		{"etc", false, `-only "etc": not a part`},
	} {
		err := checkOnly(c.only, c.summary)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkOnly(%q, %v) = %v, want %q", c.only, c.summary, err, c.want)
		}
	}
}

// A task that ends otherwise than COMPLETE fails the run.
func TestJudgeState(t *testing.T) {
	for _, c := range []struct {
		state string
		ended bool
		fails bool
	}{
		{"", false, false}, {"QUEUED", false, false}, {"INITIALIZING", false, false}, {"RUNNING", false, false},
		{"COMPLETE", true, false},
		{"EXECUTOR_ERROR", true, true}, {"SYSTEM_ERROR", true, true}, {"CANCELED", true, true}, {"PREEMPTED", true, true},
	} {
		ended, err := judgeState("task-1", c.state)
		if ended != c.ended || (err != nil) != c.fails {
			t.Errorf("judgeState(%q) = %v, %v; want ended %v, failing %v", c.state, ended, err, c.ended, c.fails)
		}
		if err != nil && !strings.Contains(err.Error(), "task-1 ended "+c.state+", not COMPLETE") {
			t.Errorf("judgeState(%q): %v does not name the task and its state", c.state, err)
		}
	}
}
