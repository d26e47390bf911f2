package steps

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
)

// The settings a step depends on besides the cluster (Config), and their
// defaults.

// Defaults of the options.
const (
	DefaultNamespace    = "default"
	DefaultPodTimeout   = 240 * time.Second
	DefaultFilerName    = "ghcr.io/elixir-cloud-aai/tesk-knative-filer"
	DefaultFilerVersion = "latest"
	DefaultFilerTimeout = "300"
	maxFilerTimeout     = 1e9
	// The filer's bounds of FILER_PARALLELISM (filer.DefaultParallelism,
	// filer.MaxParallelism).
	defaultFilerParallelism = 8
	maxFilerParallelism     = 256
	DefaultDiskGB           = 1.0
	minDiskGB               = 1.0 / 1024
	maxDiskGB               = 1 << 20
	AWSSecretName           = "aws-secret"
	maxInt32                = math.MaxInt32
	defaultFilerUID         = 65532
	recordedMissingGrace    = 60 * time.Second
)

// Config is everything a step depends on besides the cluster: the options
// (flags or environment) and the environment variables of behaviour §3.
type Config struct {
	Namespace        string
	PodTimeout       time.Duration
	FilerName        string
	FilerVersion     string
	PullPolicyAlways bool
	Debug            bool

	ExecutorBackoffLimit *int32
	// MaxPreemptions is how many times an executor's pod the cluster takes
	// away (evicted, preempted, lost with its node) is run again without
	// spending the executor's retries; one more ends the task PREEMPTED
	// (EXECUTOR_MAX_PREEMPTIONS).
	MaxPreemptions int
	// UploadOutputsOnFailure: a task whose executor fails uploads the
	// outputs that exist before it ends EXECUTOR_ERROR, unless its tag
	// TagUploadOutputsOnFailure says otherwise (UPLOAD_OUTPUTS_ON_FAILURE).
	UploadOutputsOnFailure bool
	// NotifyURLPrefixes are the addresses a task's tag TagNotifyURL may
	// name (NotifyURLAllowed; NOTIFY_URL_PREFIXES); none: no task may.
	NotifyURLPrefixes []string
	FilerBackoffLimit *int32
	FilerHTTPTimeout  string
	FilerParallelism  int // files each filer moves at once; 0: the filer's default
	// FilerAllowedCIDRs are the private ranges (comma-separated CIDRs) the
	// filer may reach for HTTP(S) and FTP URLs; "": none.
	FilerAllowedCIDRs string
	// Quota is each owner's share of the cluster: the most active tasks
	// and CPU cores its tasks hold at once (zero: no limit).
	Quota Quota
	// MetricsUsers is how many owners the sweep's gauges name, those with
	// the most active tasks, the rest summed as OtherUsers (0: none).
	MetricsUsers int
	// MaxRun is the most a task may run from its start: each job gets
	// what is left of it as its activeDeadlineSeconds, and a part is not
	// started past it (0: no limit).
	MaxRun           time.Duration
	StorageClassName string
	DefaultDiskGB    float64       // a task's PVC size without disk_gb; 0: DefaultDiskGB
	MaxQueue         time.Duration // 0: pods may wait to be scheduled forever
	TaskTTL          *time.Duration
	KeepFailedPVC    bool

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

	// ExecutorPodAnnotations are the annotation keys, or prefixes ending in
	// "/", that an executor's pod template may carry besides what the
	// allow-list admits (EXECUTOR_POD_ANNOTATIONS; behaviour §8.8).
	ExecutorPodAnnotations []string

	// TrustEvents takes events at their word (TRUST_EVENTS): a
	// task.submitted may carry the task JSON (data.input) and a
	// task.cancelled cancels the task it names. Meant for local use. Off,
	// an event only makes the handler look at a task again: what the task
	// runs and whether it is cancelled are read from its anchor, which the
	// TES API (or the TESK API) wrote (behaviour §5.2).
	TrustEvents bool
	// EventsAudience, when set, is the audience of the token each event
	// must carry (EVENTS_AUDIENCE): Knative Eventing's authentication-oidc
	// on, and the Triggers' subscriber audience set to it.
	EventsAudience string

	// UserSecretPrefix, if set, gives the filer jobs of a task that the TES
	// API created for a known user the secret <prefix><user hash> in place
	// of the shared credentials (FILER_USER_SECRET_PREFIX, behaviour §3.14).
	UserSecretPrefix string

	// BackendParameters are the backend parameters a task may set and
	// what they make of its pods (BACKEND_PARAMETERS; nil: none).
	BackendParameters *backendparams.Config

	// LogTailBytes is how much of the end of each of an executor's streams
	// is kept (TES_LOG_TAIL_BYTES; 0: DefaultLogTailBytes). The record on
	// the executor's job keeps at most half of MaxRecordedLogBytes of each.
	LogTailBytes int
}

// logTailBytes is how much of the end of each of an executor's streams is
// kept.
func (c Config) logTailBytes() int {
	if c.LogTailBytes <= 0 {
		return DefaultLogTailBytes
	}
	return c.LogTailBytes
}

// diskGB is the size of the PVC of a task without disk_gb.
func (c Config) diskGB() float64 {
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

// DefaultConfig is the configuration with nothing set.
func DefaultConfig() Config {
	return Config{
		Namespace:               DefaultNamespace,
		PodTimeout:              DefaultPodTimeout,
		FilerName:               DefaultFilerName,
		FilerVersion:            DefaultFilerVersion,
		FilerHTTPTimeout:        DefaultFilerTimeout,
		AWSSecretName:           AWSSecretName,
		FilerPodSecurityContext: DefaultFilerPodSecurityContext(),
		FilerSecurityContext:    DefaultFilerSecurityContext(),
		ExecutorSecurityContext: DefaultExecutorSecurityContext(),
		LogTailBytes:            DefaultLogTailBytes,
		MaxPreemptions:          DefaultMaxPreemptions,
	}
}

// DefaultExecutorSecretMountPath is where executors mount the executor
// secret unless EXECUTOR_SECRET_MOUNT_PATH says otherwise: the TESK API's
// default.
const DefaultExecutorSecretMountPath = "/secret"

// DefaultMaxPreemptions is Config.MaxPreemptions unless
// EXECUTOR_MAX_PREEMPTIONS sets it.
const DefaultMaxPreemptions = 3

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
