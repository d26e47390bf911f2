package steps

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// the placement, GPUs and identity its backend parameters ask for.
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

// shareTaskVolume puts an executor's pod in the filer pods' fsGroup
// (FILER_POD_SECURITY_CONTEXT's, 65532 by default), so that on storage
// that applies a pod's fsGroup, where the task volume's root and the
// directories the kubelet creates for the executors' mounts are
// group-writable for it, the executors can write whatever user their
// image runs as. The inputs filer makes what it creates writable by all
// (filer.SharedDirMode); on storage that ignores fsGroup (hostPath, a
// local-path provisioner) the kubelet creates the mounts' directories with
// the mode of the volume's root. A task whose pod chose its own fsGroup
// keeps it (behaviour §3.13).
func shareTaskVolume(ps *corev1.PodSpec, cfg Config) {
	f := cfg.FilerPodSecurityContext
	if f == nil || f.FSGroup == nil {
		return
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	if ps.SecurityContext.FSGroup != nil {
		return
	}
	g := *f.FSGroup
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	ps.SecurityContext.FSGroup = &g
	ps.SecurityContext.FSGroupChangePolicy = &onRootMismatch
}

// OutputsFilerSecurity is the outputs filer's pod and container security
// context. It must read whatever the executors wrote, as whatever user
// and with whatever mode (a file of mode 0600, a directory of 0700):
//   - Executors may run as root (the operator's executor context does not
//     set runAsNonRoot): the outputs filer runs as user 0, its group and
//     fsGroup the filer's, with the filer's container context and the one
//     capability DAC_OVERRIDE (every other stays dropped; Pod Security
//     baseline admits it), so it reads files of any owner and mode.
//   - Executors are confined to a non-root user (runAsNonRoot and
//     runAsUser in the operator's executor context): the outputs filer
//     runs as that user (and group), without capabilities, which Pod
//     Security restricted admits; it reads what that user wrote.
//   - Otherwise (non-root images choose their user): the filer's contexts
//     as configured; it reads what the fsGroup or every user may read.
//
// The inputs filer keeps the filer's contexts (behaviour §3.13).
func OutputsFilerSecurity(cfg Config) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	pod, ctr := cfg.FilerPodSecurityContext.DeepCopy(), cfg.FilerSecurityContext.DeepCopy()
	ex := cfg.ExecutorSecurityContext
	nonRoot := ex != nil && ex.RunAsNonRoot != nil && *ex.RunAsNonRoot
	switch {
	case !nonRoot:
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		root := int64(0)
		pod.RunAsUser, pod.RunAsNonRoot = &root, nil
		if ctr == nil {
			ctr = &corev1.SecurityContext{}
		}
		ctr.RunAsUser, ctr.RunAsNonRoot = nil, nil
		if ctr.Capabilities == nil {
			ctr.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
		}
		ctr.Capabilities.Add = []corev1.Capability{"DAC_OVERRIDE"}
	case ex.RunAsUser != nil:
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		uid := *ex.RunAsUser
		pod.RunAsUser = &uid
		if ex.RunAsGroup != nil {
			gid := *ex.RunAsGroup
			pod.RunAsGroup = &gid
		}
		if ctr != nil {
			ctr.RunAsUser, ctr.RunAsGroup = nil, nil
		}
	}
	return pod, ctr
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

// taskPodIdentity runs a task's pod as the task pods' ServiceAccount,
// without its token (nothing in a task talks to the API server), and
// without the environment variables of the namespace's Services.
func taskPodIdentity(ps *corev1.PodSpec, cfg Config) {
	no := false
	ps.ServiceAccountName = cfg.ExecutorServiceAccount
	ps.AutomountServiceAccountToken = &no
	ps.EnableServiceLinks = &no
}

// ExecutorSecurity is an executor container's security context: the
// operator's (EXECUTOR_SECURITY_CONTEXT, or the default) with what the
// task's own asks for on top, which Admit allows only where it chooses the
// user or takes rights away: the user, the group, non-root, a read-only
// root file system, capabilities dropped (added to those dropped), and
// privilege escalation, privileged mode and the seccomp profile only where
// the operator's leaves them unset.
func ExecutorSecurity(base, task *corev1.SecurityContext) *corev1.SecurityContext {
	if base == nil {
		return task.DeepCopy()
	}
	sc := base.DeepCopy()
	if task == nil {
		return sc
	}
	if task.RunAsUser != nil {
		sc.RunAsUser = task.RunAsUser
	}
	if task.RunAsGroup != nil {
		sc.RunAsGroup = task.RunAsGroup
	}
	if task.RunAsNonRoot != nil && *task.RunAsNonRoot {
		sc.RunAsNonRoot = task.RunAsNonRoot
	}
	if task.ReadOnlyRootFilesystem != nil && *task.ReadOnlyRootFilesystem {
		sc.ReadOnlyRootFilesystem = task.ReadOnlyRootFilesystem
	}
	if c := task.Capabilities; c != nil && len(c.Drop) > 0 {
		if sc.Capabilities == nil {
			sc.Capabilities = &corev1.Capabilities{}
		}
		for _, d := range c.Drop {
			if !slices.Contains(sc.Capabilities.Drop, d) {
				sc.Capabilities.Drop = append(sc.Capabilities.Drop, d)
			}
		}
	}
	if sc.AllowPrivilegeEscalation == nil {
		sc.AllowPrivilegeEscalation = task.AllowPrivilegeEscalation
	}
	if sc.Privileged == nil {
		sc.Privileged = task.Privileged
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = task.SeccompProfile
	}
	if sc.ProcMount == nil {
		sc.ProcMount = task.ProcMount
	}
	if sc.AppArmorProfile == nil {
		sc.AppArmorProfile = task.AppArmorProfile
	}
	return sc
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

// describe names a part for messages.
func describe(task, part string) string {
	if part == taskmeta.PartPVC {
		return fmt.Sprintf("PVC '%s'", taskmeta.PVCName(task))
	}
	return fmt.Sprintf("job '%s'", taskmeta.ObjectName(task, part))
}
