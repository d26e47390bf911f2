package jobspec

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// UserHashLen is the length of the hash that names a user's secret.
const UserHashLen = 20

// UserSecretName is the secret that holds a user's credentials for the
// filer: the prefix and the first 20 hex digits of the SHA-256 of the
// user's subject (as the TES API's tokens name it), so that
// `printf %s "$SUBJECT" | sha256sum | cut -c1-20` names it too.
func UserSecretName(prefix, subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return prefix + hex.EncodeToString(sum[:])[:UserHashLen]
}

// FilerJob is the inputs or outputs filer's job (part
// taskmeta.PartInputsFiler or taskmeta.PartOutputsFiler). It mounts the
// whole task volume below taskspec.FilerTaskDir, reads the task from the
// anchor ConfigMap, gets the filer's environment and secrets (behaviour
// §3), and runs in the zones the task's backend parameters name (t,
// admitted by steps.Admit; nil: anywhere).
func FilerJob(a taskmeta.Anchor, part string, t *taskspec.Task, cfg Config) *batchv1.Job {
	podSecurity, security := cfg.FilerPodSecurityContext.DeepCopy(), cfg.FilerSecurityContext.DeepCopy()
	if part == taskmeta.PartOutputsFiler {
		podSecurity, security = OutputsFilerSecurity(cfg)
	}
	pull := corev1.PullIfNotPresent
	if cfg.PullPolicyAlways {
		pull = corev1.PullAlways
	}
	user := userSecret(a, cfg)
	mounts, volumes := filerVolumes(a, user, cfg)
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            taskmeta.ObjectName(a.Name, part),
			Namespace:       a.Namespace,
			Labels:          map[string]string{taskmeta.LabelTask: a.Name},
			OwnerReferences: a.OwnerRefs(),
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
						Args:            filerArgs(part, cfg),
						Env:             filerEnv(part, user, cfg),
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

// filerArgs are the filer's arguments: its mode (inputs or outputs) and
// the task JSON mounted from the anchor; --debug first with --debug.
func filerArgs(part string, cfg Config) []string {
	args := []string{strings.TrimSuffix(part, "-filer"), "--file", path.Join(jsonMountPath, taskspec.ConfigMapKey)}
	if cfg.Debug {
		args = append([]string{"--debug"}, args...)
	}
	return args
}

// userSecret is the secret of the task's user's own credentials, if the
// operator keeps them per user and the task's creator is known (behaviour
// §3.14); "": the task gets the shared ones.
func userSecret(a taskmeta.Anchor, cfg Config) string {
	if cfg.UserSecretPrefix != "" && a.Creator != "" {
		return UserSecretName(cfg.UserSecretPrefix, a.Creator)
	}
	return ""
}

// filerEnv is the filer's environment (behaviour §3): its settings, whom a
// root outputs filer writes the transfer volume as, where its credentials
// are (user: its user's own secret, else the shared S3 secret, FTP
// credentials and netrc), and DEBUG with --debug.
func filerEnv(part, user string, cfg Config) []corev1.EnvVar {
	credentialsPath := awsMountPath
	if user != "" {
		credentialsPath = userMountPath
	}
	env := []corev1.EnvVar{
		{Name: "FILER_HTTP_TIMEOUT", Value: cfg.FilerHTTPTimeout},
		{Name: "AWS_CONFIG_FILE", Value: path.Join(credentialsPath, "config")},
		{Name: "AWS_SHARED_CREDENTIALS_FILE", Value: path.Join(credentialsPath, "credentials")},
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
	if user != "" {
		env = append(env, corev1.EnvVar{Name: "TESK_USER_CREDENTIALS", Value: userMountPath})
	} else {
		env = append(env, ftpEnv(cfg)...)
	}
	for _, kv := range [][2]string{{"TESK_FTP_HOSTS", cfg.FTPHosts}, {"HOST_BASE_PATH", cfg.HostBasePath}, {"CONTAINER_BASE_PATH", cfg.ContainerBasePath}} {
		if kv[1] != "" {
			env = append(env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
		}
	}
	if cfg.NetrcSecretName != "" && user == "" {
		env = append(env, corev1.EnvVar{Name: "NETRC", Value: path.Join(netrcMountPath, ".netrc")})
	}
	if cfg.Debug {
		env = append(env, corev1.EnvVar{Name: "DEBUG", Value: "true"})
	}
	return env
}

// filerVolumes are the filer's mounts and their volumes: the whole task
// volume, the task JSON from the anchor, the S3 credentials (user, the
// task's user's own secret, if set: then none of the shared ones), the
// shared netrc, and the file:// transfer volume.
func filerVolumes(a taskmeta.Anchor, user string, cfg Config) ([]corev1.VolumeMount, []corev1.Volume) {
	optional := true
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
	credentials, credentialsPath := cfg.AWSSecretName, awsMountPath
	if credentials == "" {
		credentials = AWSSecretName
	}
	if user != "" {
		credentials, credentialsPath = user, userMountPath
	}
	mounts = append(mounts, corev1.VolumeMount{Name: awsVolumeName, MountPath: credentialsPath, ReadOnly: true})
	volumes = append(volumes, corev1.Volume{Name: awsVolumeName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: credentials, Optional: &optional,
	}}})
	if cfg.NetrcSecretName != "" && user == "" {
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
	return mounts, volumes
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

// ReservedMount reports whether a path is, holds or is below one of the
// filer's own mounts.
func ReservedMount(p string) bool {
	for _, m := range []string{taskspec.FilerTaskDir, jsonMountPath, awsMountPath, netrcMountPath} {
		if p == m || strings.HasPrefix(m, p+"/") || strings.HasPrefix(p, m+"/") {
			return true
		}
	}
	return false
}
