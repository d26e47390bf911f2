// Package taskspec is the task as the TESK API hands it to the taskmaster: the
// executors already converted to Kubernetes Job specs, and the task's inputs,
// outputs, volumes and resources. The handler and the filer both read it.
package taskspec

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	batchv1 "k8s.io/api/batch/v1"
	sigsjson "sigs.k8s.io/json"
)

// File types of inputs and outputs (TES tesFileType).
const (
	TypeFile      = "FILE"
	TypeDirectory = "DIRECTORY"
)

// FilerTaskDir is where the filer mounts the task volume: the executor path
// /data/x is FilerTaskDir+"/data/x" in the filer.
const FilerTaskDir = "/tesk/task"

// ConfigMapKey is the key of the gzipped task JSON in the task's ConfigMap, as
// the TESK API writes it.
const ConfigMapKey = "JSON_INPUT.gz"

// MaxSize bounds the task JSON, compressed or not: a ConfigMap holds at most
// 1 MiB, and nothing larger can be a task.
const MaxSize = 1 << 20

// Task is the taskmaster's input.
type Task struct {
	Executors []batchv1.Job `json:"executors"`
	Inputs    []Input       `json:"inputs,omitempty"`
	Outputs   []Output      `json:"outputs,omitempty"`
	Volumes   []string      `json:"volumes,omitempty"`
	Resources Resources     `json:"resources,omitempty"`

	// Warnings name the fields of the task, its inputs, outputs and
	// resources that nothing reads (e.g. added by a newer TESK API): they
	// are ignored, not refused, and the handler logs them.
	Warnings []string `json:"-"`
}

// Input is a file or directory to put on the task volume before the executors
// run: downloaded from URL, or written from Content.
type Input struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url,omitempty"`
	Path        string `json:"path"`
	Type        string `json:"type,omitempty"`
	Content     string `json:"content,omitempty"`
	Streamable  bool   `json:"streamable,omitempty"`
}

// Output is a file, directory or wildcard pattern to upload after the
// executors ran.
type Output struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	URL         string `json:"url"`
	Path        string `json:"path"`
	PathPrefix  string `json:"path_prefix,omitempty"`
	Type        string `json:"type,omitempty"`
}

// Resources of the task (TES tesResources); DiskGB sizes the task's PVC.
type Resources struct {
	CPUCores                float64           `json:"cpu_cores,omitempty"`
	Preemptible             bool              `json:"preemptible,omitempty"`
	RAMGB                   float64           `json:"ram_gb,omitempty"`
	DiskGB                  float64           `json:"disk_gb,omitempty"`
	Zones                   []string          `json:"zones,omitempty"`
	BackendParameters       map[string]string `json:"backend_parameters,omitempty"`
	BackendParametersStrict bool              `json:"backend_parameters_strict,omitempty"`
}

// schemaErr says why a task JSON can never be run: it does not parse, or it
// does not fit the taskmaster's schema.
func schemaErr(format string, a ...any) error {
	return invalid.Errorf("invalid task: %s", fmt.Sprintf(format, a...))
}

// Decode parses and validates a task JSON. Fields of the wrong type are
// errors; unknown fields are Warnings, so that a newer TESK API that adds a
// field does not stop every task. The executors' Job specs are checked by
// type only, as the API server validates the rest when the job is created.
func Decode(data []byte) (*Task, error) {
	if len(data) > MaxSize {
		return nil, schemaErr("task JSON is %d bytes, more than %d", len(data), MaxSize)
	}
	var t Task
	strict, err := sigsjson.UnmarshalStrict(data, &t, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, schemaErr("%v", err)
	}
	for _, e := range strict {
		t.Warnings = append(t.Warnings, e.Error())
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// DecodeGzip parses a gzipped task JSON, as stored in the task's ConfigMap.
func DecodeGzip(data []byte) (*Task, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, schemaErr("%s is not gzip: %v", ConfigMapKey, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
	if err != nil {
		return nil, schemaErr("%s: %v", ConfigMapKey, err)
	}
	return Decode(raw)
}

// Gzip compresses a task JSON as the TESK API stores it.
func Gzip(raw []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return b.Bytes()
}

// Validate checks what every step relies on.
func (t *Task) Validate() error {
	if len(t.Executors) == 0 {
		return schemaErr("no executors")
	}
	for i, ex := range t.Executors {
		if len(ex.Spec.Template.Spec.Containers) == 0 {
			return schemaErr("executors[%d]: no containers", i)
		}
		for j, c := range ex.Spec.Template.Spec.Containers {
			if c.Image == "" {
				return schemaErr("executors[%d].containers[%d]: no image", i, j)
			}
		}
	}
	for i, in := range t.Inputs {
		if err := CheckPath(in.Path); err != nil {
			return schemaErr("inputs[%d].path: %v", i, err)
		}
		if err := CheckType(in.Type); err != nil {
			return schemaErr("inputs[%d].type: %v", i, err)
		}
		if in.URL == "" && in.Content == "" && in.Type != TypeDirectory {
			return schemaErr("inputs[%d]: neither url nor content", i)
		}
		if in.Content != "" && in.Type == TypeDirectory {
			return schemaErr("inputs[%d]: content for a DIRECTORY", i)
		}
		if in.Type == TypeDirectory && in.URL == "" {
			return schemaErr("inputs[%d]: a DIRECTORY input needs a url", i)
		}
	}
	for i, out := range t.Outputs {
		if err := CheckPath(out.Path); err != nil {
			return schemaErr("outputs[%d].path: %v", i, err)
		}
		if err := CheckType(out.Type); err != nil {
			return schemaErr("outputs[%d].type: %v", i, err)
		}
		if out.URL == "" {
			return schemaErr("outputs[%d]: no url", i)
		}
		if out.PathPrefix != "" && !path.IsAbs(out.PathPrefix) {
			return schemaErr("outputs[%d].path_prefix: %q is not absolute", i, out.PathPrefix)
		}
	}
	for i, v := range t.Volumes {
		if err := CheckPath(v); err != nil {
			return schemaErr("volumes[%d]: %v", i, err)
		}
	}
	if t.Resources.DiskGB < 0 {
		return schemaErr("resources.disk_gb is negative")
	}
	return nil
}

// CheckType checks an input's or output's type: FILE, DIRECTORY, or none
// (a FILE).
func CheckType(t string) error {
	switch t {
	case "", TypeFile, TypeDirectory:
		return nil
	}
	return fmt.Errorf("%q is neither FILE nor DIRECTORY", t)
}

// CheckPath checks a path in the executors (an input's, an output's, a
// volume's): absolute, not the root, without NUL, and clean ('/' may end it).
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("required")
	case !path.IsAbs(p):
		return fmt.Errorf("%q is not an absolute path", p)
	case path.Clean(p) == "/":
		return fmt.Errorf("%q is the root", p)
	case strings.ContainsRune(p, 0):
		return errors.New("contains NUL")
	}
	if c := path.Clean(p); c != p && c+"/" != p {
		return fmt.Errorf("%q is not a clean path (no '.', '..' or '//')", p)
	}
	return nil
}

// HasWildcard reports whether a path has glob characters (TES 1.1 wildcards).
func HasWildcard(p string) bool { return strings.ContainsAny(p, "*?[") }

// IsPattern reports whether an output's path, with its path_prefix, is a
// pattern that selects files (TES 1.1 wildcards): it has `*` or `?`, or a
// bracket and a path_prefix. Without path_prefix a bracket is part of a
// file's name, as Nextflow's nf-ga4gh sends an output named so (it takes
// only `*` and `?` for a glob, and only then sets path_prefix).
func IsPattern(p, prefix string) bool {
	return strings.ContainsAny(p, "*?") || (strings.Contains(p, "[") && prefix != "")
}

// Pattern reports whether the output's path is a pattern (IsPattern).
func (o Output) Pattern() bool { return IsPattern(o.Path, o.PathPrefix) }

// Refusal says why a task that parses cannot run: the taskmaster stops with
// this error before it creates the PVC or any job.
func (t *Task) Refusal() error {
	for i, in := range t.Inputs {
		if in.MountDir() == "/" {
			return fmt.Errorf("inputs[%d].path %q is a file directly under /: its directory would need a mount at /", i, in.Path)
		}
	}
	for i, out := range t.Outputs {
		if !out.Pattern() && out.MountDir() == "/" {
			return fmt.Errorf("outputs[%d].path %q is a file directly under /: its directory would need a mount at /", i, out.Path)
		}
	}
	for i, out := range t.Outputs {
		if !out.Pattern() {
			continue
		}
		first := strings.SplitN(strings.TrimPrefix(out.Path, "/"), "/", 2)[0]
		if HasWildcard(first) {
			return fmt.Errorf("outputs[%d].path %q has a wildcard in its first component: it would need a mount at /", i, out.Path)
		}
		if out.PathPrefix == "" {
			return fmt.Errorf("outputs[%d].path %q has wildcards but no path_prefix", i, out.Path)
		}
		if !within(out.PathPrefix, out.Path) {
			return fmt.Errorf("outputs[%d].path_prefix %q is not a prefix of its path %q", i, out.PathPrefix, out.Path)
		}
		if _, err := MatchPattern(out.Path, out.Path); err != nil {
			return fmt.Errorf("outputs[%d].path %q is not a valid pattern: %v", i, out.Path, err)
		}
	}
	return nil
}

// NeedsVolume reports whether the task needs a PVC: it has inputs, outputs or
// volumes.
func (t *Task) NeedsVolume() bool {
	return len(t.Inputs) > 0 || len(t.Outputs) > 0 || len(t.Volumes) > 0
}

// MountDirs returns the directories of the task volume that the executors
// mount, each at its own path: every volume, the directory of every input and
// output (a DIRECTORY's own path, a FILE's parent), and for a wildcard output
// the pattern's deepest directory without wildcards. Sorted, without
// duplicates.
func (t *Task) MountDirs() []string {
	seen := map[string]bool{}
	var dirs []string
	add := func(d string) {
		d = path.Clean(d)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, v := range t.Volumes {
		add(v)
	}
	for _, in := range t.Inputs {
		add(in.MountDir())
	}
	for _, out := range t.Outputs {
		add(out.MountDir())
	}
	sort.Strings(dirs)
	return dirs
}

// MountDir is the directory of the input that is mounted in the executors:
// a DIRECTORY's own path, a FILE's directory.
func (in Input) MountDir() string { return mountDir(in.Path, in.Type) }

// MountDir is the directory of the output that is mounted in the executors:
// a DIRECTORY's own path, a FILE's directory, and for a pattern its deepest
// directory without wildcards.
func (o Output) MountDir() string {
	if p := path.Clean(o.Path); o.Pattern() {
		return StaticDir(p)
	}
	return mountDir(o.Path, o.Type)
}

func mountDir(p, typ string) string {
	p = path.Clean(p)
	if typ == TypeDirectory {
		return p
	}
	return path.Dir(p)
}

// StaticDir is the deepest directory of a pattern without wildcards
// (/data for /data/*/out.txt).
func StaticDir(pattern string) string {
	parts := strings.Split(strings.TrimPrefix(path.Clean(pattern), "/"), "/")
	var keep []string
	for _, p := range parts[:len(parts)-1] {
		if HasWildcard(p) {
			break
		}
		keep = append(keep, p)
	}
	return "/" + strings.Join(keep, "/")
}

// FilerPath is where the filer finds an executor path on the task volume.
func FilerPath(execPath string) string {
	return FilerTaskDir + path.Clean("/"+execPath)
}

// URLFor derives the URL a file at execPath (a path in the executors) is
// uploaded to for this output, as the outputs filer does: the output's URL for
// a FILE; the URL plus the path below the directory for a DIRECTORY; the URL
// plus the path pruned of path_prefix for a wildcard pattern (TES 1.1). It
// reports false when the file does not belong to the output.
func (o Output) URLFor(execPath string) (string, bool) {
	p := path.Clean(execPath)
	op := path.Clean(o.Path)
	switch {
	case o.Pattern():
		if ok, _ := MatchPattern(op, p); !ok || !within(o.PathPrefix, p) {
			return "", false
		}
		return joinURL(o.URL, strings.TrimPrefix(p, strings.TrimSuffix(o.PathPrefix, "/"))), true
	case o.Type == TypeDirectory:
		if p == op {
			return o.URL, true
		}
		if !strings.HasPrefix(p, op+"/") {
			return "", false
		}
		return joinURL(o.URL, strings.TrimPrefix(p, op)), true
	default:
		if p != op {
			return "", false
		}
		return o.URL, true
	}
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	dir = path.Clean(dir)
	p = path.Clean(p)
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// joinURL appends a relative file path to an output's URL. For s3:// URLs
// the path is appended as it is: an object key is taken literally. For other
// URLs (http, https, ftp, file) it is percent-escaped where a URL needs it
// (a space, '?', '#', '%', non-ASCII), so that the URL names the file, and
// goes before the URL's query, which stays whole (a token for a container,
// say).
func joinURL(base, rel string) string {
	rel = strings.TrimPrefix(rel, "/")
	if rel == "" {
		return base
	}
	if len(base) >= 5 && strings.EqualFold(base[:5], "s3://") {
		return strings.TrimSuffix(base, "/") + "/" + rel
	}
	rest := ""
	if i := strings.IndexAny(base, "?#"); i >= 0 {
		base, rest = base[:i], base[i:]
	}
	return strings.TrimSuffix(base, "/") + "/" + (&url.URL{Path: rel}).EscapedPath() + rest
}
