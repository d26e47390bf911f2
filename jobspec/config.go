package jobspec

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
)

// The settings the builders read (Config), and their defaults.

// Defaults of the settings.
const (
	DefaultFilerName    = "ghcr.io/elixir-cloud-aai/tesk-knative-filer"
	DefaultFilerVersion = "latest"
	DefaultFilerTimeout = "300"
	DefaultDiskGB       = 1.0
	AWSSecretName       = "aws-secret"
	defaultFilerUID     = 65532
)

// Config is what a task's PVC and jobs are built from besides the task:
// the options (flags or environment) and the environment variables of
// behaviour §3 that shape them.
type Config struct {
	FilerName        string
	FilerVersion     string
	PullPolicyAlways bool
	Debug            bool

	ExecutorBackoffLimit *int32
	FilerBackoffLimit    *int32
	FilerHTTPTimeout     string
	FilerParallelism     int // files each filer moves at once; 0: the filer's default
	// FilerAllowedCIDRs are the private ranges (comma-separated CIDRs) the
	// filer may reach for HTTP(S) and FTP URLs; "": none.
	FilerAllowedCIDRs string
	StorageClassName  string
	DefaultDiskGB     float64 // a task's PVC size without disk_gb; 0: DefaultDiskGB

	FilerPodSecurityContext *corev1.PodSecurityContext // nil: none
	FilerSecurityContext    *corev1.SecurityContext    // nil: none
	FilerResources          corev1.ResourceRequirements

	// AWSSecretName is the secret of S3 credentials every filer job mounts
	// when it exists (AWS_SECRET_NAME; behaviour §3.12).
	AWSSecretName string

	FTPUsername, FTPPassword string
	FTPSecretName            string
	FTPHosts                 string
	NetrcSecretName          string

	HostBasePath, ContainerBasePath, TransferPVCName string

	// ExecutorSecret, if its Name is set, is mounted read-only into every
	// executor (EXECUTOR_SECRET_NAME, EXECUTOR_SECRET_MOUNT_PATH), as the
	// TESK API's executor secret; it is also the one volume an executor's
	// job spec may name itself (behaviour §8.8).
	ExecutorSecret ExecutorSecret
	// ExecutorSecurityContext is every executor container's security
	// context (EXECUTOR_SECURITY_CONTEXT; nil: none). A task's own may only
	// choose the user and take rights away (behaviour §3.13).
	ExecutorSecurityContext *corev1.SecurityContext
	// ExecutorServiceAccount runs the executor pods
	// (EXECUTOR_SERVICE_ACCOUNT; empty: the namespace's default). No
	// executor or filer pod gets a token of its ServiceAccount.
	ExecutorServiceAccount string

	// UserSecretPrefix, if set, gives the filer jobs of a task that the TES
	// API created for a known user the secret <prefix><user hash> in place
	// of the shared credentials (FILER_USER_SECRET_PREFIX, behaviour §3.14).
	UserSecretPrefix string

	// BackendParameters are the backend parameters a task may set and
	// what they make of its pods (BACKEND_PARAMETERS; nil: none).
	BackendParameters *backendparams.Config
}

// DiskGB is the size of the PVC of a task without disk_gb.
func (c Config) DiskGB() float64 {
	if c.DefaultDiskGB <= 0 {
		return DefaultDiskGB
	}
	return c.DefaultDiskGB
}

// ExecutorSecret is a secret mounted read-only into every executor.
type ExecutorSecret struct {
	Name      string
	MountPath string
}

// FilerImage is the image of the filer jobs.
func (c Config) FilerImage() string { return c.FilerName + ":" + c.FilerVersion }

// DefaultConfig is the builders' configuration with nothing set.
func DefaultConfig() Config {
	return Config{
		FilerName:               DefaultFilerName,
		FilerVersion:            DefaultFilerVersion,
		FilerHTTPTimeout:        DefaultFilerTimeout,
		AWSSecretName:           AWSSecretName,
		FilerPodSecurityContext: DefaultFilerPodSecurityContext(),
		FilerSecurityContext:    DefaultFilerSecurityContext(),
		ExecutorSecurityContext: DefaultExecutorSecurityContext(),
	}
}

// DefaultExecutorSecretMountPath is where executors mount the executor
// secret unless EXECUTOR_SECRET_MOUNT_PATH says otherwise: the TESK API's
// default.
const DefaultExecutorSecretMountPath = "/secret"

// DefaultExecutorSecurityContext is the executor container's security
// context unless EXECUTOR_SECURITY_CONTEXT replaces it: no privilege
// escalation, no capabilities, the runtime's default seccomp profile. The
// user stays the one the image asks for (root included), so images that
// run as root and write only what they own keep working.
func DefaultExecutorSecurityContext() *corev1.SecurityContext {
	no := false
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// DefaultFilerPodSecurityContext is the filer pod's security context unless
// FILER_POD_SECURITY_CONTEXT replaces it: user, group and fsGroup 65532,
// changed on a volume only where its root does not have it yet (a
// recursive change of a large volume at every filer pod's start would
// cost minutes).
func DefaultFilerPodSecurityContext() *corev1.PodSecurityContext {
	uid := int64(defaultFilerUID)
	yes := true
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	return &corev1.PodSecurityContext{
		RunAsUser:           &uid,
		RunAsGroup:          &uid,
		FSGroup:             &uid,
		FSGroupChangePolicy: &onRootMismatch,
		RunAsNonRoot:        &yes,
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// DefaultFilerSecurityContext is the filer container's security context
// unless FILER_SECURITY_CONTEXT replaces it.
func DefaultFilerSecurityContext() *corev1.SecurityContext {
	no, yes := false, true
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
