package tes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// DefaultDiskGB is the task volume's size when the task asks for none and the
// operator set no DEFAULT_DISK_GB (ConvertOptions.DiskGB), as the TESK API
// sizes it.
const DefaultDiskGB = 0.1

// MaxRequestBytes bounds a create request: the task's anchor, a ConfigMap,
// holds at most 1 MiB.
const MaxRequestBytes = 1 << 20

// maxTagsBytes bounds the tags, which are kept in an annotation of the anchor
// (Kubernetes allows 256 KiB for all of them).
const maxTagsBytes = 64 << 10

// maxNameBytes bounds the task's name, kept in an annotation.
const maxNameBytes = 4096

// bad is a request that can never succeed: it changed nothing.
func bad(format string, a ...any) error { return invalid.Errorf(format, a...) }

// DecodeTask parses a create request's body: one JSON object that is a
// tesTask, without fields outside the specification (each under its proto
// name or, as protojson reads it, its lowerCamelCase JSON name). The fields the server
// sets (id, state, logs, creation_time) are ignored.
func DecodeTask(body []byte) (*tesv1.Task, error) {
	if len(body) > MaxRequestBytes {
		return nil, bad("the task is %d bytes, more than %d", len(body), MaxRequestBytes)
	}
	body, err := protoNames(body)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var t tesv1.Task
	if err := dec.Decode(&t); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("the body holds more than one JSON value")
	}
	t.ID, t.State, t.Logs, t.CreationTime = "", "", nil, ""
	return &t, nil
}

// jsonError says in the specification's field names what did not parse.
func jsonError(err error) error {
	if invalid.Is(err) {
		return err
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return bad("the body is a JSON %s, not a tesTask object", te.Value)
		}
		return bad("%s: a JSON %s where %s is expected", te.Field, te.Value, jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		return bad("the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return bad("the body is not a complete JSON object")
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if f, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return bad("unknown field %s: not a field of TES 1.1", f)
	}
	return bad("%s", msg)
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int32", "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "a boolean"
	}
	return "a " + k
}

// Validate checks a submitted task; the error names the field.
func Validate(t *tesv1.Task) error {
	if len(t.Executors) == 0 {
		return bad("executors: at least one executor is required")
	}
	if len(t.Name) > maxNameBytes {
		return bad("name: %d bytes, at most %d", len(t.Name), maxNameBytes)
	}
	for i, ex := range t.Executors {
		if err := validateExecutor(fmt.Sprintf("executors[%d]", i), ex); err != nil {
			return err
		}
	}
	for i, in := range t.Inputs {
		if err := validateInput(fmt.Sprintf("inputs[%d]", i), in); err != nil {
			return err
		}
	}
	for i, out := range t.Outputs {
		if err := validateOutput(fmt.Sprintf("outputs[%d]", i), out); err != nil {
			return err
		}
	}
	for i, v := range t.Volumes {
		if err := taskspec.CheckPath(v); err != nil {
			return bad("volumes[%d]: %v", i, err)
		}
	}
	if r := t.Resources; r != nil {
		if err := validateResources(*r); err != nil {
			return err
		}
	}
	if b, _ := json.Marshal(t.Tags); len(b) > maxTagsBytes {
		return bad("tags: %d bytes of JSON, at most %d", len(b), maxTagsBytes)
	}
	return nil
}

// validateExecutor checks the executor f: an image, a command, absolute
// paths and variable names.
func validateExecutor(f string, ex tesv1.Executor) error {
	if strings.TrimSpace(ex.Image) == "" {
		return bad("%s.image: required", f)
	}
	if strings.ContainsAny(ex.Image, " \t\r\n") {
		return bad("%s.image: %q contains white space", f, ex.Image)
	}
	if len(ex.Command) == 0 {
		return bad("%s.command: required (at least the program to run)", f)
	}
	for name, p := range map[string]string{"workdir": ex.Workdir, "stdin": ex.Stdin, "stdout": ex.Stdout, "stderr": ex.Stderr} {
		if p != "" && !path.IsAbs(p) {
			return bad("%s.%s: %q is not an absolute path", f, name, p)
		}
	}
	for k := range ex.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("%s.env: %q is not a variable name", f, k)
		}
	}
	return nil
}

// validateInput checks the input f: its path and type, and a URL or content
// (not for a directory).
func validateInput(f string, in tesv1.Input) error {
	if err := taskspec.CheckPath(in.Path); err != nil {
		return bad("%s.path: %v", f, err)
	}
	if err := taskspec.CheckType(in.Type); err != nil {
		return bad("%s.type: %v", f, err)
	}
	if in.URL == "" && in.Content == "" {
		return bad("%s: url or content is required", f)
	}
	if in.URL != "" {
		if err := checkURL(in.URL); err != nil {
			return bad("%s.url: %v", f, err)
		}
	}
	if in.Content != "" && in.Type == taskspec.TypeDirectory {
		return bad("%s.content: a DIRECTORY input takes a url, not content", f)
	}
	return nil
}

// validateOutput checks the output f: its path and type, its URL, and the
// prefix a path with wildcards needs.
func validateOutput(f string, out tesv1.Output) error {
	if err := taskspec.CheckPath(out.Path); err != nil {
		return bad("%s.path: %v", f, err)
	}
	if err := taskspec.CheckType(out.Type); err != nil {
		return bad("%s.type: %v", f, err)
	}
	if out.URL == "" {
		return bad("%s.url: required", f)
	}
	if err := checkURL(out.URL); err != nil {
		return bad("%s.url: %v", f, err)
	}
	if taskspec.IsPattern(out.Path, out.PathPrefix) && out.PathPrefix == "" {
		return bad("%s.path_prefix: required, as the path %q has wildcards", f, out.Path)
	}
	if out.PathPrefix != "" && !path.IsAbs(out.PathPrefix) {
		return bad("%s.path_prefix: %q is not an absolute path", f, out.PathPrefix)
	}
	return nil
}

// validateResources checks the sizes a task asks for.
func validateResources(r tesv1.Resources) error {
	switch {
	case r.CPUCores < 0:
		return bad("resources.cpu_cores: %d is negative", r.CPUCores)
	case r.RAMGB < 0 || math.IsNaN(r.RAMGB) || math.IsInf(r.RAMGB, 0):
		return bad("resources.ram_gb: %v is not a size", r.RAMGB)
	case r.DiskGB < 0 || math.IsNaN(r.DiskGB) || math.IsInf(r.DiskGB, 0):
		return bad("resources.disk_gb: %v is not a size", r.DiskGB)
	case r.RAMGB > 1<<20 || r.DiskGB > 1<<20:
		return bad("resources: more than 1 PiB asked for")
	}
	return nil
}

// StorageSchemes are the URL schemes of inputs and outputs the filer moves
// data with (service-info's storage lists them). file:// URLs work where
// the operator mounted a transfer volume (behaviour §3.9).
var StorageSchemes = []string{"http", "https", "ftp", "s3", "file"}

// checkURL refuses an input's or output's URL that the filer could never
// fetch: no scheme, one it does not speak, or a form it cannot read.
func checkURL(raw string) error {
	if strings.HasPrefix(raw, "_:") {
		// cwl-tes sends a CWL Directory literal so: a blank node's
		// identifier, without its listing.
		return fmt.Errorf("%q is the identifier of a CWL literal, which names no data: send its files as inputs of their own (content or URLs)", taskspec.Redact(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", taskspec.Redact(raw), strings.TrimPrefix(err.Error(), "parse "))
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "":
		return fmt.Errorf("%q has no scheme (one of %s)", taskspec.Redact(raw), strings.Join(StorageSchemes, ", "))
	case !slices.Contains(StorageSchemes, scheme):
		return fmt.Errorf("the scheme %q is not supported (one of %s)", u.Scheme, strings.Join(StorageSchemes, ", "))
	case u.Opaque != "":
		return fmt.Errorf("%q is not of the form %s://...", taskspec.Redact(raw), scheme)
	case scheme == "file":
		if u.Host != "" && u.Host != "localhost" {
			return fmt.Errorf("%q names the host %q: a file URL names a path on the transfer volume (file:///...)", taskspec.Redact(raw), u.Host)
		}
		if u.Path == "" || u.Path == "/" {
			return fmt.Errorf("%q names no file", taskspec.Redact(raw))
		}
	case u.Host == "":
		what := "host"
		if scheme == "s3" {
			what = "bucket"
		}
		return fmt.Errorf("%q names no %s", taskspec.Redact(raw), what)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ConvertOptions are what the conversion takes from the caller. What the
// operator configures for every executor (the executor secret, the security
// context, the ServiceAccount) the handler adds when it builds the job.
type ConvertOptions struct {
	// User is the label-safe form of the caller (creator-user-id).
	User string
	// DiskGB is the disk size of a task that asks for none (the handler's
	// DEFAULT_DISK_GB); 0: DefaultDiskGB.
	DiskGB float64
}

// Convert turns a validated task into the taskmaster's task JSON, as the
// TESK API converts it: each executor a Job spec <id>-ex-NN, the inputs,
// outputs and volumes as they are, and the disk size.
func Convert(t *tesv1.Task, id string, o ConvertOptions) ([]byte, error) {
	_, raw, err := convert(t, id, o)
	return raw, err
}

// convert is Convert, with the task JSON also as the steps read it back.
func convert(t *tesv1.Task, id string, o ConvertOptions) (*taskspec.Task, []byte, error) {
	spec := taskspec.Task{Volumes: t.Volumes}
	for _, in := range t.Inputs {
		spec.Inputs = append(spec.Inputs, taskspec.Input{
			Name: in.Name, Description: in.Description, URL: in.URL, Path: in.Path,
			Type: in.Type, Content: in.Content, Streamable: in.Streamable,
		})
	}
	for _, out := range t.Outputs {
		spec.Outputs = append(spec.Outputs, taskspec.Output{
			Name: out.Name, Description: out.Description, URL: out.URL, Path: out.Path,
			PathPrefix: out.PathPrefix, Type: out.Type,
		})
	}
	res := tesv1.Resources{}
	if t.Resources != nil {
		res = *t.Resources
	}
	spec.Resources.DiskGB = res.DiskGB
	// Those CheckBackendParameters kept: the handler places the pods by them.
	spec.Resources.BackendParameters = res.BackendParameters
	if spec.Resources.DiskGB == 0 {
		spec.Resources.DiskGB = DefaultDiskGB
		if o.DiskGB > 0 {
			spec.Resources.DiskGB = o.DiskGB
		}
	}
	for i, ex := range t.Executors {
		spec.Executors = append(spec.Executors, executorJob(t, id, i, ex, res, o))
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	// The steps read it back with the same rules.
	decoded, err := taskspec.Decode(raw)
	if err != nil {
		return nil, nil, bad("%v", strings.TrimPrefix(err.Error(), "invalid task: "))
	}
	if err := decoded.Refusal(); err != nil {
		return nil, nil, bad("%v", err)
	}
	return decoded, raw, nil
}

func executorJob(t *tesv1.Task, id string, i int, ex tesv1.Executor, res tesv1.Resources, o ConvertOptions) batchv1.Job {
	name := taskmeta.ObjectName(id, taskmeta.ExecutorPart(i))
	labels := map[string]string{
		taskmeta.LabelJobType:    taskmeta.JobTypeExecutor,
		taskmeta.LabelTask:       id,
		taskmeta.LabelExecutorNo: strconv.Itoa(i),
	}
	if o.User != "" {
		labels[taskmeta.LabelCreator] = o.User
	}
	annotations := map[string]string{}
	if t.Name != "" {
		annotations[taskmeta.AnnotationTaskName] = t.Name
	}
	if ex.IgnoreError {
		annotations[taskmeta.AnnotationIgnoreError] = "true"
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	c := corev1.Container{
		Name:       name,
		Image:      ex.Image,
		Command:    Command(ex),
		WorkingDir: ex.Workdir,
	}
	for _, k := range sortedKeys(ex.Env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: ex.Env[k]})
	}
	req := corev1.ResourceList{}
	if res.CPUCores > 0 {
		req[corev1.ResourceCPU] = *resource.NewQuantity(int64(res.CPUCores), resource.DecimalSI)
	}
	if res.RAMGB > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(int64(math.Round(res.RAMGB*(1<<30))), resource.BinarySI)
	}
	if len(req) > 0 {
		c.Resources.Requests = req
	}
	pod := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{c}}
	return batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: pod},
		},
	}
}

// Command is the executor's container command: its command as it is, or,
// when stdin, stdout or stderr is set, run by /bin/sh -c with each part
// quoted for the shell and the redirections appended.
func Command(ex tesv1.Executor) []string {
	if ex.Stdin == "" && ex.Stdout == "" && ex.Stderr == "" {
		return append([]string(nil), ex.Command...)
	}
	parts := make([]string, 0, len(ex.Command)+6)
	for _, a := range ex.Command {
		parts = append(parts, ShellQuote(a))
	}
	if ex.Stdin != "" {
		parts = append(parts, "<", ShellQuote(ex.Stdin))
	}
	if ex.Stdout != "" {
		parts = append(parts, ">", ShellQuote(ex.Stdout))
	}
	if ex.Stderr != "" {
		parts = append(parts, "2>", ShellQuote(ex.Stderr))
	}
	return []string{"/bin/sh", "-c", strings.Join(parts, " ")}
}

// ShellQuote quotes a word for a POSIX shell: as it is when it holds only
// characters the shell takes literally, else in single quotes, each single
// quote written as '"'"'.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
