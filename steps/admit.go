package steps

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// An executor's job spec comes from the task JSON, which the TES API (or the
// TESK API) writes and which an event may carry. A pod runs with the rights
// its spec asks for, so the handler builds executor pods only from specs
// that hold no more than the conversions of a TES executor produce
// (behaviour §8.8): one container with its image, command, arguments,
// environment values, working directory, resources and pull policy, the
// executor secret, a security context that grants nothing, TESK's labels
// and annotations, and the pod annotations the operator allows. Everything
// else (a privileged container, a host path, the host's namespaces, a
// ServiceAccount, added capabilities, init containers, a second container,
// references to other objects) refuses the task before anything is
// created.

// Labels and annotations that an executor's job spec may carry.
var (
	admittedJobLabels      = []string{taskmeta.LabelTask, taskmeta.LabelJobType, taskmeta.LabelExecutorNo, taskmeta.LabelCreator}
	admittedJobAnnotations = []string{taskmeta.AnnotationTaskName, taskmeta.AnnotationIgnoreError}
	admittedPodLabels      = []string{taskmeta.LabelTask, taskmeta.LabelJobType, taskmeta.LabelExecutorNo, taskmeta.LabelCreator}
)

// RefusedFieldError names the field of an executor's job spec that the
// allow-list refuses.
type RefusedFieldError struct {
	Executor int
	Field    string // a JSON path below the job, e.g. spec.template.spec.hostPID
	Value    string // the refused value, as JSON, shortened
	Why      string // what is allowed instead, if there is more to say
}

func (e *RefusedFieldError) Error() string {
	msg := fmt.Sprintf("executors[%d]: %s is not allowed in an executor (%s)", e.Executor, e.Field, e.Value)
	if e.Why != "" {
		msg += ": " + e.Why
	}
	return msg
}

// Admit checks every executor's job spec against the allow-list for
// namespace ns: the first field it refuses is the error. Then the task's
// backend parameters: each must be enabled, with a value allowed, by the
// operator's configuration as it is now (BACKEND_PARAMETERS), which may have
// changed since the TES API accepted them.
func Admit(t *taskspec.Task, ns string, cfg Config) error {
	for i := range t.Executors {
		orig := &t.Executors[i]
		field, value, ok := firstDifference(orig, admittedJob(orig, ns, cfg))
		if ok {
			continue
		}
		return &RefusedFieldError{Executor: i, Field: field, Value: value, Why: refusalHint(field, cfg, orig)}
	}
	if _, err := cfg.BackendParameters.Resolve(t.Resources.BackendParameters); err != nil {
		return err
	}
	return nil
}

// secretAskedFor is the secret a volume of the job's pod mounts, if one
// does (the TESK API's executor secret).
func secretAskedFor(job *batchv1.Job) string {
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName != "" {
			return v.Secret.SecretName
		}
	}
	return ""
}

// refusalHint says what is allowed where a field is allowed with some values
// only; for a volume, which secret the executor asks for and the setting
// that allows it.
func refusalHint(field string, cfg Config, job *batchv1.Job) string {
	switch last := field[strings.LastIndexAny(field, ".]")+1:]; {
	case strings.HasPrefix(field, "metadata.labels"), strings.HasPrefix(field, "spec.template.metadata.labels"):
		return "allowed labels: " + strings.Join(admittedJobLabels, ", ")
	case strings.HasPrefix(field, "metadata.annotations"):
		return "allowed annotations: " + strings.Join(admittedJobAnnotations, ", ")
	case strings.HasPrefix(field, "spec.template.metadata.annotations"):
		if len(cfg.ExecutorPodAnnotations) == 0 {
			return "the pod's annotations are the operator's to allow (EXECUTOR_POD_ANNOTATIONS is unset)"
		}
		return "allowed pod annotations (EXECUTOR_POD_ANNOTATIONS): " + strings.Join(cfg.ExecutorPodAnnotations, ", ")
	case field == "metadata.namespace":
		return "an executor runs in its task's namespace"
	case strings.Contains(field, ".volumes[") || strings.Contains(field, ".volumeMounts["):
		hint := fmt.Sprintf("the task's volumes are mounted by the service; the only other volume allowed is the executor secret %q, read-only (EXECUTOR_SECRET_NAME)", cfg.ExecutorSecret.Name)
		if cfg.ExecutorSecret.Name == "" {
			hint = "the task's volumes are mounted by the service; no other volume is allowed (EXECUTOR_SECRET_NAME is unset)"
		}
		if name := secretAskedFor(job); name != "" && name != cfg.ExecutorSecret.Name {
			hint += fmt.Sprintf("; the executor asks for secret %q: EXECUTOR_SECRET_NAME=%s allows it", name, name)
		}
		return hint
	case strings.Contains(field, ".containers[") && !strings.Contains(field, "containers[0]"):
		return "an executor has exactly one container"
	case strings.Contains(field, "securityContext"):
		return "a security context may choose the user and group, and take rights away; it may not add any"
	case last == "valueFrom":
		return "environment variables are values; a reference to a secret, ConfigMap or field is not allowed"
	case field == "spec.template.spec.restartPolicy":
		return "Never or OnFailure"
	case field == "spec.completions" || field == "spec.parallelism":
		return "an executor runs one pod at a time"
	}
	return ""
}

// admittedJob is the part of an executor's job spec that the allow-list
// admits.
func admittedJob(j *batchv1.Job, ns string, cfg Config) *batchv1.Job {
	a := &batchv1.Job{}
	if j.APIVersion == "" || j.APIVersion == "batch/v1" {
		a.APIVersion = j.APIVersion
	}
	if j.Kind == "" || j.Kind == "Job" {
		a.Kind = j.Kind
	}
	a.Name = j.Name
	if j.Namespace == "" || j.Namespace == ns {
		a.Namespace = j.Namespace
	}
	a.Labels = keep(j.Labels, admittedJobLabels)
	a.Annotations = keep(j.Annotations, admittedJobAnnotations)
	a.Spec.BackoffLimit = j.Spec.BackoffLimit
	if one(j.Spec.Completions) {
		a.Spec.Completions = j.Spec.Completions
	}
	if one(j.Spec.Parallelism) {
		a.Spec.Parallelism = j.Spec.Parallelism
	}
	a.Spec.Template.Name = j.Spec.Template.Name // the TESK API names it; nothing reads it
	a.Spec.Template.Labels = keep(j.Spec.Template.Labels, admittedPodLabels)
	if j.Spec.Template.Annotations != nil {
		a.Spec.Template.Annotations = map[string]string{}
		for k, v := range j.Spec.Template.Annotations {
			if podAnnotationAllowed(k, cfg) {
				a.Spec.Template.Annotations[k] = v
			}
		}
	}
	a.Spec.Template.Spec = admittedPod(&j.Spec.Template.Spec, cfg)
	return a
}

func admittedPod(p *corev1.PodSpec, cfg Config) corev1.PodSpec {
	var a corev1.PodSpec
	switch p.RestartPolicy {
	case "", corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
		a.RestartPolicy = p.RestartPolicy
	}
	a.TerminationGracePeriodSeconds = p.TerminationGracePeriodSeconds
	a.SecurityContext = admittedPodSecurity(p.SecurityContext)
	// A refused volume or mount is left out: the first one is the
	// difference, and the error shows it whole.
	for _, v := range p.Volumes {
		if s := v.Secret; s != nil && isExecutorSecret(v.Name, cfg) && s.SecretName == cfg.ExecutorSecret.Name && len(s.Items) == 0 {
			a.Volumes = append(a.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: s.SecretName, DefaultMode: s.DefaultMode, Optional: s.Optional},
			}})
		}
	}
	if len(p.Containers) > 0 {
		a.Containers = []corev1.Container{admittedContainer(&p.Containers[0], cfg)}
	}
	return a
}

func admittedContainer(c *corev1.Container, cfg Config) corev1.Container {
	a := corev1.Container{
		Name:                     c.Name,
		Image:                    c.Image,
		Command:                  c.Command,
		Args:                     c.Args,
		WorkingDir:               c.WorkingDir,
		ImagePullPolicy:          c.ImagePullPolicy,
		TerminationMessagePath:   c.TerminationMessagePath,
		TerminationMessagePolicy: c.TerminationMessagePolicy,
		SecurityContext:          admittedSecurity(c.SecurityContext),
	}
	for _, e := range c.Env {
		a.Env = append(a.Env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	a.Resources.Requests = c.Resources.Requests
	a.Resources.Limits = c.Resources.Limits
	for _, m := range c.VolumeMounts {
		if isExecutorSecret(m.Name, cfg) && m.ReadOnly {
			a.VolumeMounts = append(a.VolumeMounts, corev1.VolumeMount{Name: m.Name, MountPath: m.MountPath, ReadOnly: true, SubPath: m.SubPath})
		}
	}
	return a
}

// podAnnotationAllowed reports whether EXECUTOR_POD_ANNOTATIONS names an
// annotation key, or a prefix of it that ends in "/".
func podAnnotationAllowed(key string, cfg Config) bool {
	for _, a := range cfg.ExecutorPodAnnotations {
		if key == a || strings.HasSuffix(a, "/") && strings.HasPrefix(key, a) {
			return true
		}
	}
	return false
}

func isExecutorSecret(volume string, cfg Config) bool {
	return cfg.ExecutorSecret.Name != "" && volume == cfg.ExecutorSecret.Name
}

// admittedSecurity keeps what chooses an identity or takes rights away.
func admittedSecurity(s *corev1.SecurityContext) *corev1.SecurityContext {
	if s == nil {
		return nil
	}
	a := &corev1.SecurityContext{
		RunAsUser:              s.RunAsUser,
		RunAsGroup:             s.RunAsGroup,
		RunAsNonRoot:           s.RunAsNonRoot,
		ReadOnlyRootFilesystem: s.ReadOnlyRootFilesystem,
		SeccompProfile:         admittedSeccomp(s.SeccompProfile),
	}
	if isFalse(s.Privileged) {
		a.Privileged = s.Privileged
	}
	if isFalse(s.AllowPrivilegeEscalation) {
		a.AllowPrivilegeEscalation = s.AllowPrivilegeEscalation
	}
	if c := s.Capabilities; c != nil {
		a.Capabilities = &corev1.Capabilities{Drop: c.Drop}
	}
	if s.ProcMount != nil && *s.ProcMount == corev1.DefaultProcMount {
		a.ProcMount = s.ProcMount
	}
	if p := s.AppArmorProfile; p != nil && p.Type == corev1.AppArmorProfileTypeRuntimeDefault {
		a.AppArmorProfile = &corev1.AppArmorProfile{Type: p.Type}
	}
	return a
}

// admittedPodSecurity keeps the pod's user, groups and seccomp default (as
// the TESK API sets them from its configuration).
func admittedPodSecurity(s *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if s == nil {
		return nil
	}
	return &corev1.PodSecurityContext{
		RunAsUser:           s.RunAsUser,
		RunAsGroup:          s.RunAsGroup,
		RunAsNonRoot:        s.RunAsNonRoot,
		FSGroup:             s.FSGroup,
		FSGroupChangePolicy: s.FSGroupChangePolicy,
		SupplementalGroups:  s.SupplementalGroups,
		SeccompProfile:      admittedSeccomp(s.SeccompProfile),
	}
}

func admittedSeccomp(p *corev1.SeccompProfile) *corev1.SeccompProfile {
	if p == nil || p.Type != corev1.SeccompProfileTypeRuntimeDefault {
		return nil
	}
	return &corev1.SeccompProfile{Type: p.Type}
}

func isFalse(b *bool) bool { return b != nil && !*b }

func one(n *int32) bool { return n == nil || *n == 1 }

// keep is m with only the given keys (nil if m is nil).
func keep(m map[string]string, keys []string) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// maxShownValue bounds a refused value in the error.
const maxShownValue = 80

// firstDifference compares a job spec with what the allow-list admits of it,
// as JSON: ok if they are the same, else the path of the first field (in
// key order) that the admitted copy lacks or holds otherwise, and the
// original's value there.
func firstDifference(orig, admitted *batchv1.Job) (field, value string, ok bool) {
	var a, b any
	ra, _ := json.Marshal(orig)
	rb, _ := json.Marshal(admitted)
	_ = json.Unmarshal(ra, &a)
	_ = json.Unmarshal(rb, &b)
	path, v, same := diff("", a, b)
	if same {
		return "", "", true
	}
	shown, _ := json.Marshal(v)
	s := string(shown)
	if len(s) > maxShownValue {
		s = s[:maxShownValue-3] + "..."
	}
	return path, s, false
}

// diff returns the first path at which a differs from b, with a's value.
func diff(path string, a, b any) (string, any, bool) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok && b != nil {
			return path, a, false
		}
		keys := make([]string, 0, len(av))
		for k := range av {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if p, v, same := diff(p, av[k], bv[k]); !same {
				return p, v, false
			}
		}
		return "", nil, true
	case []any:
		bv, _ := b.([]any)
		for i := range av {
			var bi any
			if i < len(bv) {
				bi = bv[i]
			}
			if p, v, same := diff(path+"["+strconv.Itoa(i)+"]", av[i], bi); !same {
				return p, v, false
			}
		}
		return "", nil, true
	default:
		if a == b {
			return "", nil, true
		}
		return path, a, false
	}
}
