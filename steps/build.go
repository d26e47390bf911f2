package steps

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

const (
	taskVolumeName  = "task-volume"
	jsonVolumeName  = "jsoninput"
	jsonMountPath   = "/jsoninput"
	awsVolumeName   = "aws-secret"
	awsMountPath    = "/aws"
	netrcVolumeName = "netrc"
	netrcMountPath  = "/netrc"
	transferVolume  = "transfer"
	filerContainer  = "filer"
	userVolumeName  = "user-credentials"
	userMountPath   = "/tesk/user"
)

// Anchor identifies the object that owns a task's PVC and jobs.
type Anchor struct {
	Name, Namespace string
	UID             types.UID
	// Creator is the subject that created the task through the TES API
	// (taskmeta.AnnotationCreator), if known.
	Creator string
}

// AnchorOf identifies a task's anchor.
func AnchorOf(m metav1.ObjectMeta) Anchor {
	return Anchor{Name: m.Name, Namespace: m.Namespace, UID: m.UID, Creator: m.Annotations[taskmeta.AnnotationCreator]}
}

func (a Anchor) ownerRefs() []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: a.Name, UID: a.UID}}
}

// diskSize is gb GiB as a whole number of bytes, rounded up: the API server
// warns that a fractional byte count (0.1 GiB is 107374182.4 bytes) is
// invalid. A whole number of GiB keeps its Gi form.
func diskSize(gb float64) resource.Quantity {
	if gb == math.Trunc(gb) {
		return resource.MustParse(strconv.FormatFloat(gb, 'f', -1, 64) + "Gi")
	}
	return *resource.NewQuantity(int64(math.Ceil(gb*(1<<30))), resource.BinarySI)
}

// BuildPVC is the task's volume claim: disk_gb gigabytes (DEFAULT_DISK_GB,
// else 1, if unset), the storage class STORAGE_CLASS_NAME or the cluster's
// default.
func BuildPVC(a Anchor, t *taskspec.Task, cfg Config) *corev1.PersistentVolumeClaim {
	gb := t.Resources.DiskGB
	if gb <= 0 {
		gb = cfg.diskGB()
	}
	size := diskSize(gb)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.PVCName(a.Name),
			Namespace:       a.Namespace,
			Labels:          map[string]string{taskmeta.LabelTask: a.Name},
			OwnerReferences: a.ownerRefs(),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
	if cfg.StorageClassName != "" {
		sc := cfg.StorageClassName
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

// BuildExecutorJob is the i-th executor's job: the TESK API's job spec
// (admitted by Admit), named and labelled as TESK's, owned by the anchor,
// with the task volume and the executor secret mounted, requests as limits
// where limits are missing, the executor backoff limit, the executors'
// ServiceAccount without its token, the executors' security context, and
// the placement, GPUs and identity its backend parameters ask for, and a
// pod failure policy that runs a pod the cluster took away again.
func BuildExecutorJob(a Anchor, t *taskspec.Task, i int, cfg Config) *batchv1.Job {
	j := t.Executors[i].DeepCopy()
	j.TypeMeta = metav1.TypeMeta{}
	j.Name = taskmeta.ObjectName(a.Name, taskmeta.ExecutorPart(i))
	j.Namespace = a.Namespace
	j.ResourceVersion, j.UID, j.GenerateName = "", "", ""
	j.OwnerReferences = a.ownerRefs()
	j.Labels = withLabels(j.Labels, map[string]string{
		taskmeta.LabelTask: a.Name, taskmeta.LabelJobType: taskmeta.JobTypeExecutor, taskmeta.LabelExecutorNo: strconv.Itoa(i),
	})
	j.Spec.Template.Labels = withLabels(j.Spec.Template.Labels, map[string]string{taskmeta.LabelTask: a.Name})
	if cfg.ExecutorBackoffLimit != nil {
		v := *cfg.ExecutorBackoffLimit
		j.Spec.BackoffLimit = &v
	} else if j.Spec.BackoffLimit == nil {
		zero := int32(0)
		j.Spec.BackoffLimit = &zero
	}
	ps := &j.Spec.Template.Spec
	if ps.RestartPolicy == "" {
		ps.RestartPolicy = corev1.RestartPolicyNever
	}
	if ps.RestartPolicy == corev1.RestartPolicyNever && j.Spec.PodFailurePolicy == nil {
		// A pod the cluster takes away is run again without spending the
		// executor's retries; the service counts them (MaxPreemptions).
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
	}
	taskPodIdentity(ps, cfg)
	for k := range ps.Containers {
		c := &ps.Containers[k]
		if len(c.Resources.Limits) == 0 && len(c.Resources.Requests) > 0 {
			c.Resources.Limits = c.Resources.Requests.DeepCopy()
		}
		c.SecurityContext = ExecutorSecurity(cfg.ExecutorSecurityContext, c.SecurityContext)
	}
	if s := cfg.ExecutorSecret; s.Name != "" && !slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == s.Name }) {
		// The TESK API mounts it itself; the TES API leaves it to here.
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: s.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Name}}})
		for k := range ps.Containers {
			ps.Containers[k].VolumeMounts = append(ps.Containers[k].VolumeMounts, corev1.VolumeMount{Name: s.Name, MountPath: s.MountPath, ReadOnly: true})
		}
	}
	if t.NeedsVolume() {
		ps.Volumes = append(ps.Volumes, pvcVolume(a.Name))
		var mounts []corev1.VolumeMount
		for _, d := range t.MountDirs() {
			mounts = append(mounts, corev1.VolumeMount{
				Name: taskVolumeName, MountPath: d, SubPath: strings.TrimPrefix(d, "/"),
			})
		}
		for k := range ps.Containers {
			ps.Containers[k].VolumeMounts = append(ps.Containers[k].VolumeMounts, mounts...)
		}
	}
	if t.NeedsVolume() {
		shareTaskVolume(ps, cfg)
	}
	taskPods(t, cfg).ApplyExecutor(ps)
	return j
}

// taskPods is what a task's backend parameters make of its pods. The task
// was admitted (Admit) with the same configuration, so its parameters
// resolve; nothing is placed for a task that was not.
func taskPods(t *taskspec.Task, cfg Config) backendparams.Pods {
	if t == nil {
		return backendparams.Pods{}
	}
	p, err := cfg.BackendParameters.Resolve(t.Resources.BackendParameters)
	if err != nil {
		return backendparams.Pods{}
	}
	return p
}

// userHashLen is the length of the hash that names a user's secret.
const userHashLen = 20

// UserSecretName is the secret that holds a user's credentials for the
// filer: the prefix and the first 20 hex digits of the SHA-256 of the
// user's subject (as the TES API's tokens name it), so that
// `printf %s "$SUBJECT" | sha256sum | cut -c1-20` names it too.
func UserSecretName(prefix, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return prefix + hex.EncodeToString(sum[:])[:userHashLen]
}

// BuildFilerJob is the inputs or outputs filer's job (part taskmeta.PartInputsFiler or
// taskmeta.PartOutputsFiler). It mounts the whole task volume below
// taskspec.FilerTaskDir, reads the task from the anchor ConfigMap, gets
// the filer's environment and secrets (behaviour §3), and runs in the
// zones the task's backend parameters name (t, admitted by Admit; nil:
// anywhere).
func BuildFilerJob(a Anchor, part string, t *taskspec.Task, cfg Config) *batchv1.Job {
	mode := strings.TrimSuffix(part, "-filer")
	podSecurity, security := cfg.FilerPodSecurityContext.DeepCopy(), cfg.FilerSecurityContext.DeepCopy()
	if part == taskmeta.PartOutputsFiler {
		podSecurity, security = OutputsFilerSecurity(cfg)
	}
	args := []string{mode, "--file", path.Join(jsonMountPath, taskspec.ConfigMapKey)}
	if cfg.Debug {
		args = append([]string{"--debug"}, args...)
	}
	pull := corev1.PullIfNotPresent
	if cfg.PullPolicyAlways {
		pull = corev1.PullAlways
	}
	optional := true
	env := []corev1.EnvVar{
		{Name: "FILER_HTTP_TIMEOUT", Value: cfg.FilerHTTPTimeout},
		{Name: "AWS_CONFIG_FILE", Value: path.Join(awsMountPath, "config")},
		{Name: "AWS_SHARED_CREDENTIALS_FILE", Value: path.Join(awsMountPath, "credentials")},
	}
	if cfg.FilerParallelism > 0 {
		env = append(env, corev1.EnvVar{Name: "FILER_PARALLELISM", Value: strconv.Itoa(cfg.FilerParallelism)})
	}
	if cfg.FilerAllowedCIDRs != "" {
		env = append(env, corev1.EnvVar{Name: "FILER_ALLOWED_CIDRS", Value: cfg.FilerAllowedCIDRs})
	}
	if part == taskmeta.PartOutputsFiler {
		env = append(env, fileWriterEnv(cfg)...)
	}
	user := ""
	if cfg.UserSecretPrefix != "" && a.Creator != "" {
		user = UserSecretName(cfg.UserSecretPrefix, a.Creator)
		env = append(env, corev1.EnvVar{Name: "TESK_USER_CREDENTIALS", Value: userMountPath})
	} else {
		env = append(env, ftpEnv(cfg)...)
	}
	for _, kv := range [][2]string{{"TESK_FTP_HOSTS", cfg.FTPHosts}, {"HOST_BASE_PATH", cfg.HostBasePath}, {"CONTAINER_BASE_PATH", cfg.ContainerBasePath}} {
		if kv[1] != "" {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	mounts := []corev1.VolumeMount{
		{Name: taskVolumeName, MountPath: taskspec.FilerTaskDir},
		{Name: jsonVolumeName, MountPath: jsonMountPath, ReadOnly: true},
	}
	volumes := []corev1.Volume{
		pvcVolume(a.Name),
		{Name: jsonVolumeName, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: a.Name},
		}}},
	}
	// The task's user's own credentials, if the operator keeps them per
	// user (behaviour §3.14): then none of the shared ones.
	credentials, credentialsPath := cfg.AWSSecretName, awsMountPath
	if credentials == "" {
		credentials = AWSSecretName
	}
	if user != "" {
		credentials, credentialsPath = user, userMountPath
		for i := range env {
			switch env[i].Name {
			case "AWS_CONFIG_FILE":
				env[i].Value = path.Join(userMountPath, "config")
			case "AWS_SHARED_CREDENTIALS_FILE":
				env[i].Value = path.Join(userMountPath, "credentials")
			}
		}
	}
	mounts = append(mounts, corev1.VolumeMount{Name: awsVolumeName, MountPath: credentialsPath, ReadOnly: true})
	volumes = append(volumes, corev1.Volume{Name: awsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: credentials, Optional: &optional,
	}}})
	if cfg.NetrcSecretName != "" && user == "" {
		env = append(env, corev1.EnvVar{Name: "NETRC", Value: path.Join(netrcMountPath, ".netrc")})
		mounts = append(mounts, corev1.VolumeMount{Name: netrcVolumeName, MountPath: netrcMountPath, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: netrcVolumeName, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: cfg.NetrcSecretName},
		}})
	}
	if cfg.TransferPVCName != "" && user == "" {
		// The transfer volume is one for all users: a task with its
		// user's own credentials does not get it (the TES API refuses its
		// file:// URLs).
		mounts = append(mounts, corev1.VolumeMount{Name: transferVolume, MountPath: cfg.ContainerBasePath})
		volumes = append(volumes, corev1.Volume{Name: transferVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cfg.TransferPVCName},
		}})
	}
	if cfg.Debug {
		env = append(env, corev1.EnvVar{Name: "DEBUG", Value: "true"})
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.ObjectName(a.Name, part),
			Namespace:       a.Namespace,
			Labels:          map[string]string{taskmeta.LabelTask: a.Name},
			OwnerReferences: a.ownerRefs(),
		},
		Spec: batchv1.JobSpec{
			BackoffLimit: copyInt32(cfg.FilerBackoffLimit),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{taskmeta.LabelTask: a.Name}},
				Spec: corev1.PodSpec{
					RestartPolicy:   corev1.RestartPolicyNever,
					SecurityContext: podSecurity,
					Containers: []corev1.Container{{
						Name:            filerContainer,
						Image:           cfg.FilerImage(),
						ImagePullPolicy: pull,
						Args:            args,
						Env:             env,
						VolumeMounts:    mounts,
						Resources:       *cfg.FilerResources.DeepCopy(),
						SecurityContext: security,
					}},
					Volumes: volumes,
				},
			},
		},
	}
	// The filer reads the task from its mounted anchor: it needs no token.
	taskPodIdentity(&j.Spec.Template.Spec, cfg)
	taskPods(t, cfg).ApplyTask(&j.Spec.Template.Spec)
	return j
}

// SkipMissingOutputs makes an outputs filer job upload the outputs that
// exist and leave out the others (after an executor failed).
func SkipMissingOutputs(j *batchv1.Job) {
	for i := range j.Spec.Template.Spec.Containers {
		c := &j.Spec.Template.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: "TESK_OUTPUTS_SKIP_MISSING", Value: "true"})
	}
}

// ftpEnv passes the FTP credentials: as references to TESK_FTP_SECRET_NAME if
// it is set, otherwise as values.
func ftpEnv(cfg Config) []corev1.EnvVar {
	if cfg.FTPSecretName != "" {
		optional := true
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cfg.FTPSecretName}, Key: key, Optional: &optional,
			}}
		}
		return []corev1.EnvVar{
			{Name: "TESK_FTP_USERNAME", ValueFrom: ref("username")},
			{Name: "TESK_FTP_PASSWORD", ValueFrom: ref("password")},
		}
	}
	var env []corev1.EnvVar
	if cfg.FTPUsername != "" {
		env = append(env, corev1.EnvVar{Name: "TESK_FTP_USERNAME", Value: cfg.FTPUsername})
	}
	if cfg.FTPPassword != "" {
		env = append(env, corev1.EnvVar{Name: "TESK_FTP_PASSWORD", Value: cfg.FTPPassword})
	}
	return env
}

func pvcVolume(task string) corev1.Volume {
	return corev1.Volume{Name: taskVolumeName, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: taskmeta.PVCName(task)},
	}}
}

func withLabels(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Parts is a task's sequence: the PVC if it needs one, the inputs filer if it
// has inputs, the executors, the outputs filer if it has outputs.
func Parts(t *taskspec.Task) []string {
	var parts []string
	if t.NeedsVolume() {
		parts = append(parts, taskmeta.PartPVC)
	}
	if len(t.Inputs) > 0 {
		parts = append(parts, taskmeta.PartInputsFiler)
	}
	for i := range t.Executors {
		parts = append(parts, taskmeta.ExecutorPart(i))
	}
	if len(t.Outputs) > 0 {
		parts = append(parts, taskmeta.PartOutputsFiler)
	}
	return parts
}
