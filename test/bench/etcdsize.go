package main

import (
	"fmt"
	"sort"
	"strings"
)

// What one task keeps in etcd, by the kind of object (benchEtcd).

// The kinds of a task's objects, as the tables name them, in their order.
const (
	kindAnchor   = "anchor ConfigMap"
	kindConfig   = "other ConfigMaps"
	kindSecret   = "Secrets"
	kindPVC      = "PersistentVolumeClaim"
	kindPV       = "PersistentVolume"
	kindJob      = "Jobs"
	kindPod      = "Pods"
	kindEvent    = "Events"
	registryRoot = "/registry/"
)

var kindOrder = []string{kindAnchor, kindConfig, kindSecret, kindPVC, kindPV, kindJob, kindPod, kindEvent}

// kindOf says which of task's objects in namespace ns an etcd key of the
// API server holds, if any: an object of the namespace whose name is the
// task's (its anchor), or begins with the task's name and "-" (its PVC,
// jobs and their pods, and whatever else it names after itself) or "."
// (the Events about its anchor), or the PersistentVolume pv bound to its
// PVC ("" while there is none) and the Events about that. Core/v1 Events
// and events.k8s.io/v1 Events are one object, kept under
// /registry/events. A kind without a name of its own is named by its key's
// resource (a group's resource as group/resource).
func kindOf(key, ns, task, pv string) (string, bool) {
	rest, ok := strings.CutPrefix(key, registryRoot)
	if !ok || task == "" {
		return "", false
	}
	if pv != "" && rest == "persistentvolumes/"+pv {
		return kindPV, true
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", false
	}
	dir, name := rest[:i], rest[i+1:]
	resource, ok := strings.CutSuffix(dir, "/"+ns)
	if !ok || resource == "" {
		return "", false
	}
	ours := name == task || strings.HasPrefix(name, task+"-") || strings.HasPrefix(name, task+".")
	if resource == "events" && pv != "" && strings.HasPrefix(name, pv+".") {
		ours = true
	}
	if !ours {
		return "", false
	}
	switch resource {
	case "configmaps":
		if name == task {
			return kindAnchor, true
		}
		return kindConfig, true
	case "secrets":
		return kindSecret, true
	case "persistentvolumeclaims":
		return kindPVC, true
	case "jobs":
		return kindJob, true
	case "pods":
		return kindPod, true
	case "events":
		return kindEvent, true
	}
	return resource, true
}

// storedObject is one of a task's keys in etcd: its size is the key's
// length and its value's, the object's protobuf encoding as the API server
// writes it.
type storedObject struct {
	Key  string
	Kind string
	// Bytes is len(key) + len(value).
	Bytes int64
	// Version is how many times the key was written since it was created;
	// CreateRevision and ModRevision are etcd's revisions of its creation
	// and its last write.
	Version, CreateRevision, ModRevision int64
}

// footprint is a task's objects at one moment, by key.
type footprint map[string]storedObject

func (f footprint) total() int64 {
	var n int64
	for _, o := range f {
		n += o.Bytes
	}
	return n
}

// without is f less its objects of the kinds named.
func (f footprint) without(kinds ...string) footprint {
	out := footprint{}
	for k, o := range f {
		if !containsString(kinds, o.Kind) {
			out[k] = o
		}
	}
	return out
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// kindFigure is what a task holds of one kind: how many objects, their
// bytes, and, where counted, the bytes of every revision written (Written)
// in Writes writes.
type kindFigure struct {
	Count           int
	Bytes           int64
	Written, Writes int64
}

// byKind sums f by kind.
func (f footprint) byKind() map[string]kindFigure {
	out := map[string]kindFigure{}
	for _, o := range f {
		k := out[o.Kind]
		k.Count++
		k.Bytes += o.Bytes
		out[o.Kind] = k
	}
	return out
}

// kindsOf orders the kinds of several sums: the named kinds in kindOrder,
// then the others alphabetically.
func kindsOf(sums ...map[string]kindFigure) []string {
	seen := map[string]bool{}
	for _, s := range sums {
		for k := range s {
			seen[k] = true
		}
	}
	var out, rest []string
	for _, k := range kindOrder {
		if seen[k] {
			out = append(out, k)
			delete(seen, k)
		}
	}
	for k := range seen {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// peakOf is the sample of the largest total (the first of equals); nil
// for no samples.
func peakOf(samples []footprint) footprint {
	var peak footprint
	for _, s := range samples {
		if peak == nil || s.total() > peak.total() {
			peak = s
		}
	}
	return peak
}

// etcdShape is one measured task: what it is, what its create sent, and
// its objects at its peak and once it ended and settled.
type etcdShape struct {
	Name, What string
	// Task is the task's id.
	Task string
	// RequestBytes is the create request's JSON.
	RequestBytes int
	// Estimate is what the TES API recorded on the anchor at the task's
	// create (taskmeta.AnnotationSize): its estimate of the task's peak in
	// etcd (tes.Footprint), what TES_MAX_UNFINISHED_BYTES_PER_USER counts,
	// to compare with the peak measured (0: not recorded). A TES API of
	// before the estimate recorded the anchor's own size there.
	Estimate int64
	// Executors is the task's executors.
	Executors int
	// Samples is how many times the task's keys were read while it ran.
	Samples     int
	Peak, Final footprint
	// Written holds, per kind, the bytes of every revision of the task's
	// keys (those deleted before it settled among them) as etcd keeps
	// them until the API server compacts its history; nil if the history
	// could not be read (compacted first).
	Written map[string]kindFigure
}

// Kept is what stays until the task's TTL: its objects once it ended,
// but its Events, which the API server lets expire after its --event-ttl.
func (s etcdShape) Kept() footprint { return s.Final.without(kindEvent) }

// gib is etcd's default quota, 2 GiB, per GiB.
const gib = 1 << 30

// perGiB is how many objects of n bytes fit in a GiB.
func perGiB(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return gib / n
}

// etcdTable renders one shape's table: per kind its count and bytes at the
// peak, once ended, and the bytes written, with the totals.
func etcdTable(s etcdShape) string {
	var b strings.Builder
	peak, final := s.Peak.byKind(), s.Final.byKind()
	b.WriteString("| kind | while it runs (peak): count | bytes | ended: count | bytes | written, all revisions: bytes (writes) |\n|---|---:|---:|---:|---:|---:|\n")
	var tw, tn int64
	for _, k := range kindsOf(peak, final, s.Written) {
		p, f := peak[k], final[k]
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | %s |\n", k, p.Count, num(p.Bytes), f.Count, num(f.Bytes), writtenText(s.Written, k))
		tw += s.Written[k].Written
		tn += s.Written[k].Writes
	}
	written := "not read"
	if s.Written != nil {
		written = fmt.Sprintf("%s (%s)", num(tw), num(tn))
	}
	fmt.Fprintf(&b, "| **total** | %d | **%s** | %d | **%s** | %s |\n", len(s.Peak), num(s.Peak.total()), len(s.Final), num(s.Final.total()), written)
	return b.String()
}

func writtenText(w map[string]kindFigure, kind string) string {
	if w == nil {
		return "not read"
	}
	k, ok := w[kind]
	if !ok {
		return "0"
	}
	return fmt.Sprintf("%s (%s)", num(k.Written), num(k.Writes))
}

// writtenTotal is the bytes of every revision of the shape's keys; -1 if
// not read.
func (s etcdShape) writtenTotal() int64 {
	if s.Written == nil {
		return -1
	}
	var n int64
	for _, k := range s.Written {
		n += k.Written
	}
	return n
}

// etcdArithmetic says how many tasks of the shape fit in etcd's default
// quota of 2 GiB: at their peak, ended, and ended past the Events' TTL.
func etcdArithmetic(s etcdShape) string {
	peak, final, kept := s.Peak.total(), s.Final.total(), s.Kept().total()
	return fmt.Sprintf("2 GiB of etcd quota holds %s such tasks at their peak (%s per GiB), %s ended (%s per GiB), %s ended once their Events expired (%s bytes each, %s per GiB).",
		num(2*perGiB(peak)), num(perGiB(peak)), num(2*perGiB(final)), num(perGiB(final)), num(2*perGiB(kept)), num(kept), num(perGiB(kept)))
}

// etcdOverview is one row per shape: the request, the estimate the bound
// counts, and the task's bytes in etcd at each moment.
func etcdOverview(shapes []etcdShape) string {
	var b strings.Builder
	b.WriteString("| task | request | estimate at create (tesk.ga4gh.org/size, the bound counts) | peak | ended | kept until TASK_TTL (no Events) | written, all revisions | tasks per GiB: peak / ended / kept |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range shapes {
		estimate := "not recorded"
		if s.Estimate > 0 {
			estimate = num(s.Estimate)
		}
		written := "not read"
		if w := s.writtenTotal(); w >= 0 {
			written = num(w)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s |\n", s.Name, num(s.RequestBytes), estimate,
			num(s.Peak.total()), num(s.Final.total()), num(s.Kept().total()), written,
			num(perGiB(s.Peak.total())), num(perGiB(s.Final.total())), num(perGiB(s.Kept().total())))
	}
	return b.String()
}

// nameOf is the last segment of a key, the object's name.
func nameOf(key string) string { return key[strings.LastIndexByte(key, '/')+1:] }

// executorBytes is what f holds of task's executors: their Jobs, their
// Pods and the Events about them, each named after its executor's Job
// (<task>-ex-NN).
func executorBytes(f footprint, task string) int64 {
	var n int64
	for key, o := range f {
		if strings.HasPrefix(nameOf(key), task+"-ex-") {
			n += o.Bytes
		}
	}
	return n
}

// apiPathOf is the API server's path of the object an etcd key holds, for
// the kinds a task has; false for the others.
func apiPathOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, registryRoot)
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 2 && parts[0] == "persistentvolumes":
		return "/api/v1/persistentvolumes/" + parts[1], true
	case len(parts) != 3:
		return "", false
	}
	res, ns, name := parts[0], parts[1], parts[2]
	switch res {
	case "configmaps", "secrets", "persistentvolumeclaims", "pods", "events":
		return "/api/v1/namespaces/" + ns + "/" + res + "/" + name, true
	case "jobs":
		return "/apis/batch/v1/namespaces/" + ns + "/jobs/" + name, true
	}
	return "", false
}

// etcdMarkdown is the run as BENCHMARKS.md records it: the run's line,
// each task's table and arithmetic, the overview, and what several
// executors cost.
func etcdMarkdown(runLine string, r *etcdRun) string {
	var b strings.Builder
	para(&b, "Run of "+runLine+".")
	for _, s := range r.Shapes {
		b.WriteString("\n")
		para(&b, fmt.Sprintf("**%s**: %s; the create's JSON %s bytes, its task %s.", s.Name, s.What, num(s.RequestBytes), s.Task))
		b.WriteString("\n")
		b.WriteString(etcdTable(s))
		b.WriteString("\n")
		para(&b, etcdArithmetic(s))
	}
	b.WriteString("\n")
	b.WriteString(etcdOverview(r.Shapes))
	if r.PerExecutor > 0 {
		b.WriteString("\n")
		para(&b, fmt.Sprintf("Each executor keeps %s bytes once its task ended (its Job, its Pod); the TES API admits up to %s executors of the shortest form in one task, about %s bytes of them.",
			num(r.PerExecutor), num(r.MaxExecutors), num(r.PerExecutor*int64(r.MaxExecutors))))
	}
	return b.String()
}
