package tes

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// BuildAnchor is the ConfigMap that anchors a task created through the TES
// API (taskmeta.NewAnchor): labelled as the steps and TESK's tooling know
// it, holding the taskmaster's JSON and the submitted task; an error if the
// two are too large for a ConfigMap.
func BuildAnchor(ns, id string, t *tesv1.Task, taskJSON []byte, c Caller) (*corev1.ConfigMap, error) {
	stored := *t
	stored.ID, stored.State, stored.Logs, stored.CreationTime = "", "", nil, ""
	raw, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	_, ordered := taskmeta.IDTime(id)
	cm := taskmeta.NewAnchor(ns, id, taskspec.Gzip(taskJSON), taskmeta.AnchorInfo{
		SubmittedBy: taskmeta.SubmittedByTESAPI, TESTask: taskspec.Gzip(raw), OrderedID: ordered,
		CreatorLabel: c.Label, Creator: c.Subject, Name: t.Name, Tags: t.Tags,
	})
	if n := len(cm.BinaryData[taskspec.ConfigMapKey]) + len(cm.BinaryData[taskmeta.TESTaskKey]); n > taskspec.MaxSize-64<<10 {
		return nil, bad("the task is too large: %d bytes compressed, a task's ConfigMap holds at most about %d", n, taskspec.MaxSize-64<<10)
	}
	return cm, nil
}

// StoredTask reads the submitted task from its anchor; false if the anchor
// was not written by the TES API (or its copy is unreadable).
func StoredTask(cm *corev1.ConfigMap) (*tesv1.Task, bool) {
	data, ok := cm.BinaryData[taskmeta.TESTaskKey]
	if !ok {
		return nil, false
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, false
	}
	raw, err := io.ReadAll(io.LimitReader(zr, taskspec.MaxSize*4))
	if err != nil {
		return nil, false
	}
	var t tesv1.Task
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, false
	}
	return &t, true
}

// taskFromSpec rebuilds what it can of a task that was not created through
// the TES API (by the TESK API or an event with its JSON): the executors'
// images and commands, the inputs, outputs and volumes.
func taskFromSpec(cm *corev1.ConfigMap) *tesv1.Task {
	t := &tesv1.Task{Name: cm.Annotations[taskmeta.AnnotationTaskName]}
	data := cm.BinaryData[taskspec.ConfigMapKey]
	if data == nil {
		data = []byte(cm.Data[taskspec.ConfigMapKey])
	}
	spec, err := taskspec.DecodeGzip(data)
	if err != nil {
		return t
	}
	for _, j := range spec.Executors {
		c := j.Spec.Template.Spec.Containers[0]
		ex := tesv1.Executor{Image: c.Image, Command: append(append([]string{}, c.Command...), c.Args...), Workdir: c.WorkingDir}
		for _, e := range c.Env {
			if ex.Env == nil {
				ex.Env = map[string]string{}
			}
			ex.Env[e.Name] = e.Value
		}
		ex.IgnoreError = j.Annotations[taskmeta.AnnotationIgnoreError] == "true"
		t.Executors = append(t.Executors, ex)
	}
	for _, in := range spec.Inputs {
		t.Inputs = append(t.Inputs, tesv1.Input{Name: in.Name, Description: in.Description, URL: in.URL, Path: in.Path, Type: in.Type, Content: in.Content, Streamable: in.Streamable})
	}
	for _, out := range spec.Outputs {
		t.Outputs = append(t.Outputs, tesv1.Output{Name: out.Name, Description: out.Description, URL: out.URL, Path: out.Path, PathPrefix: out.PathPrefix, Type: out.Type})
	}
	t.Volumes = spec.Volumes
	if spec.Resources.DiskGB > 0 {
		t.Resources = &tesv1.Resources{DiskGB: spec.Resources.DiskGB}
	}
	return t
}

// Tags reads the tags of an anchor.
func Tags(meta metav1.ObjectMeta) map[string]string { return taskmeta.TagsOf(meta) }

var labelValueRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`)

// LabelSafe is the label-safe form of a subject: the subject itself when it is
// a valid label value, else its characters that are, shortened, and a hash
// of the whole, so that two subjects never share a form.
func LabelSafe(subject string) string {
	if subject == "" {
		return ""
	}
	if labelValueRE.MatchString(subject) {
		return subject
	}
	sum := sha256.Sum256([]byte(subject))
	var b strings.Builder
	for _, r := range subject {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		}
		if b.Len() == 30 {
			break
		}
	}
	prefix := strings.Trim(b.String(), "-_.")
	if prefix == "" {
		return "h" + hex.EncodeToString(sum[:16])
	}
	return fmt.Sprintf("%s.%s", prefix, hex.EncodeToString(sum[:12]))
}
