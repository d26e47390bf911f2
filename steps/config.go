package steps

import (
	"math"
	"time"

	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
)

// The settings a step depends on besides the cluster (Config), and their
// defaults.

// Defaults of the options.
const (
	DefaultNamespace  = "default"
	DefaultPodTimeout = 240 * time.Second
	maxFilerTimeout   = 1e9
	// The filer's bounds of FILER_PARALLELISM (filer.DefaultParallelism,
	// filer.MaxParallelism).
	defaultFilerParallelism = 8
	maxFilerParallelism     = 256
	minDiskGB               = 1.0 / 1024
	maxDiskGB               = 1 << 20
	// AWSSecretName is jobspec.AWSSecretName, the default S3 secret, as the
	// cluster tests name it.
	AWSSecretName        = jobspec.AWSSecretName
	maxInt32             = math.MaxInt32
	recordedMissingGrace = 60 * time.Second
)

// Config is everything a step depends on besides the cluster: the options
// (flags or environment) and the environment variables of behaviour §3.
type Config struct {
	// Config is what a task's PVC and jobs are built from.
	jobspec.Config

	Namespace  string
	PodTimeout time.Duration

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
	// Quota is each owner's share of the cluster: the most active tasks
	// and CPU cores its tasks hold at once (zero: no limit).
	Quota Quota
	// MetricsUsers is how many owners the sweep's gauges name, those with
	// the most active tasks, the rest summed as OtherUsers (0: none).
	MetricsUsers int
	// MaxRun is the most a task may run from its start: each job gets
	// what is left of it as its activeDeadlineSeconds, and a part is not
	// started past it (0: no limit).
	MaxRun        time.Duration
	MaxQueue      time.Duration // 0: pods may wait to be scheduled forever
	TaskTTL       *time.Duration
	KeepFailedPVC bool

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

	// LogTailBytes is how much of the end of each of an executor's streams
	// is kept (TES_LOG_TAIL_BYTES; 0: DefaultLogTailBytes). The record on
	// the executor's job keeps at most half of MaxRecordedLogBytes of each.
	LogTailBytes int
}

// LogTailLimit is how much of the end of each of an executor's streams is
// kept.
func (c Config) LogTailLimit() int {
	if c.LogTailBytes <= 0 {
		return DefaultLogTailBytes
	}
	return c.LogTailBytes
}

// DefaultConfig is the configuration with nothing set.
func DefaultConfig() Config {
	return Config{
		Config:         jobspec.DefaultConfig(),
		Namespace:      DefaultNamespace,
		PodTimeout:     DefaultPodTimeout,
		LogTailBytes:   DefaultLogTailBytes,
		MaxPreemptions: DefaultMaxPreemptions,
	}
}

// DefaultMaxPreemptions is Config.MaxPreemptions unless
// EXECUTOR_MAX_PREEMPTIONS sets it.
const DefaultMaxPreemptions = 3
