package steps

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
)

// Reading the settings: the Config a service runs with (FromEnv), the
// environment variables of behaviour §3 (LoadEnv), each value checked and a
// malformed one reported and left at its default, and the pod timeout
// (ParsePodTimeout).

// ConfigIssue is a setting that was malformed and ignored. Level is "error"
// or "warn" (behaviour §3.1).
type ConfigIssue struct {
	Level, Name, Msg string
}

func (i ConfigIssue) String() string { return i.Name + ": " + i.Msg }

// FromEnv is the Config a service runs with, as both the handler and the
// TES API read it: DefaultConfig with the pod timeout of POD_TIMEOUT, or of
// podTimeout when a command's flag gave it (not nil); the variables LoadEnv
// reads, each issue logged at its level (behaviour §3.1); and the backend
// parameters (backendparams.FromEnv). A pod timeout or backend parameters
// that do not parse are an error: the service does not start. The caller
// sets the namespace.
func FromEnv(getenv func(string) string, log *zap.SugaredLogger, podTimeout *string) (Config, error) {
	cfg := DefaultConfig()
	if podTimeout == nil {
		if v := strings.TrimSpace(getenv("POD_TIMEOUT")); v != "" {
			podTimeout = &v
		}
	}
	if podTimeout != nil {
		d, err := ParsePodTimeout(*podTimeout)
		if err != nil {
			return cfg, err
		}
		cfg.PodTimeout = d
	}
	cfg, issues := LoadEnv(cfg, getenv)
	for _, i := range issues {
		if i.Level == "error" {
			log.Errorw("Invalid setting", "variable", i.Name, "problem", i.Msg)
		} else {
			log.Warnw("Invalid setting", "variable", i.Name, "problem", i.Msg)
		}
	}
	bp, err := backendparams.FromEnv(getenv)
	if err != nil {
		return cfg, err
	}
	cfg.BackendParameters = bp
	return cfg, nil
}

// LoadEnv applies the environment variables (behaviour §3) to cfg, with
// their validation rules: an empty value counts as unset, numbers may have
// spaces around them, and a value out of range or malformed is reported and
// leaves the default. The variables are envSettings, read in its order.
func LoadEnv(cfg Config, getenv func(string) string) (Config, []ConfigIssue) {
	r := &envReader{getenv: getenv}
	for _, s := range envSettings {
		v := r.get(s.name)
		if s.untrimmed {
			v = getenv(s.name)
		}
		if v != "" || s.evenEmpty {
			s.apply(&cfg, v, r)
		}
	}
	for _, i := range fileTransfer(&cfg) {
		r.bad("error", i.Name, "%s", i.Msg)
	}
	if cfg.FTPSecretName == "" && (cfg.FTPUsername != "" || cfg.FTPPassword != "") {
		r.bad("warn", "TESK_FTP_USERNAME", "FTP credentials are passed to the filer as values in its job; set TESK_FTP_SECRET_NAME to reference a secret instead")
	}
	return cfg, r.issues
}

// envSettings are the variables LoadEnv reads, each with how its value is
// checked and where on the Config it goes; a value that does not pass
// leaves the Config's default (DefaultConfig), which its issue names.
var envSettings = []envSetting{
	wholeNumber("EXECUTOR_BACKOFF_LIMIT", 0, func(c *Config, n int64) { c.ExecutorBackoffLimit = ptrTo(int32(n)) }),
	wholeNumber("EXECUTOR_MAX_PREEMPTIONS", 0, func(c *Config, n int64) { c.MaxPreemptions = int(n) }),
	wholeNumber("FILER_BACKOFF_LIMIT", 0, func(c *Config, n int64) { c.FilerBackoffLimit = ptrTo(int32(n)) }),
	setting("FILER_HTTP_TIMEOUT", applyFilerHTTPTimeout),
	setting("FILER_PARALLELISM", applyFilerParallelism),
	setting("FILER_ALLOWED_CIDRS", applyFilerAllowedCIDRs),
	wholeNumber("QUOTA_TASKS_PER_USER", 0, func(c *Config, n int64) { c.Quota.Tasks = int(n) }),
	wholeNumber("TASK_MAX_RUN_SECONDS", 1, func(c *Config, n int64) { c.MaxRun = time.Duration(n) * time.Second }),
	wholeNumber("METRICS_USERS", 0, func(c *Config, n int64) { c.MetricsUsers = int(n) }),
	setting("QUOTA_CPU_PER_USER", applyQuotaCPU),
	setting("TES_LOG_TAIL_BYTES", applyLogTailBytes),
	text("STORAGE_CLASS_NAME", func(c *Config, v string) { c.StorageClassName = v }),
	setting("DEFAULT_DISK_GB", applyDefaultDiskGB),
	wholeNumber("TESK_MAX_QUEUE_SECONDS", 1, func(c *Config, n int64) { c.MaxQueue = time.Duration(n) * time.Second }),
	wholeNumber("TASK_TTL_SECONDS", 0, func(c *Config, n int64) { c.TaskTTL = ptrTo(time.Duration(n) * time.Second) }),
	setting("UPLOAD_OUTPUTS_ON_FAILURE", applyUploadOutputsOnFailure),
	settingEvenEmpty("NOTIFY_URL_PREFIXES", applyNotifyURLPrefixes),
	settingEvenEmpty("KEEP_FAILED_PVC", applyKeepFailedPVC),
	k8sObject("FILER_POD_SECURITY_CONTEXT", "keeping the default", func(c *Config, sc *corev1.PodSecurityContext) {
		c.FilerPodSecurityContext = nilIfEmpty(sc)
	}),
	k8sObject("FILER_SECURITY_CONTEXT", "keeping the default", func(c *Config, sc *corev1.SecurityContext) {
		c.FilerSecurityContext = nilIfEmpty(sc)
	}),
	k8sObject("FILER_RESOURCES", "setting none", func(c *Config, rr *corev1.ResourceRequirements) { c.FilerResources = *rr }),
	setting("AWS_SECRET_NAME", applyAWSSecretName),
	untrimmed("TESK_FTP_USERNAME", func(c *Config, v string) { c.FTPUsername = v }),
	untrimmed("TESK_FTP_PASSWORD", func(c *Config, v string) { c.FTPPassword = v }),
	text("TESK_FTP_SECRET_NAME", func(c *Config, v string) { c.FTPSecretName = v }),
	text("TESK_FTP_HOSTS", func(c *Config, v string) { c.FTPHosts = v }),
	text("NETRC_SECRET_NAME", func(c *Config, v string) { c.NetrcSecretName = v }),
	text("HOST_BASE_PATH", func(c *Config, v string) { c.HostBasePath = v }),
	text("CONTAINER_BASE_PATH", func(c *Config, v string) { c.ContainerBasePath = v }),
	text("TRANSFER_PVC_NAME", func(c *Config, v string) { c.TransferPVCName = v }),
	k8sObject("EXECUTOR_SECURITY_CONTEXT", "keeping the default", func(c *Config, sc *corev1.SecurityContext) {
		c.ExecutorSecurityContext = nilIfEmpty(sc)
	}),
	setting("EXECUTOR_SERVICE_ACCOUNT", applyExecutorServiceAccount),
	setting("EXECUTOR_SECRET_NAME", applyExecutorSecret), // and EXECUTOR_SECRET_MOUNT_PATH
	setting("EXECUTOR_POD_ANNOTATIONS", applyExecutorPodAnnotations),
	setting("TRUST_EVENTS", applyTrustEvents),
	text("EVENTS_AUDIENCE", func(c *Config, v string) { c.EventsAudience = v }),
	setting("FILER_USER_SECRET_PREFIX", applyUserSecretPrefix),
}

// envSetting is a variable LoadEnv reads: its name, and apply, which puts
// its value on the Config or reports it (r.bad) and leaves the default. The
// value is trimmed of spaces unless untrimmed, and an empty one leaves the
// default unless evenEmpty.
type envSetting struct {
	name                 string
	untrimmed, evenEmpty bool
	apply                func(cfg *Config, v string, r *envReader)
}

// envReader reads the environment for LoadEnv and gathers the issues.
type envReader struct {
	getenv func(string) string
	issues []ConfigIssue
}

func (r *envReader) get(name string) string { return strings.TrimSpace(r.getenv(name)) }

func (r *envReader) bad(level, name, format string, a ...any) {
	r.issues = append(r.issues, ConfigIssue{Level: level, Name: name, Msg: fmt.Sprintf(format, a...)})
}

// setting is a variable checked by apply; unset or empty, it leaves the
// default.
func setting(name string, apply func(cfg *Config, v string, r *envReader)) envSetting {
	return envSetting{name: name, apply: apply}
}

// settingEvenEmpty is a variable checked by apply, which an empty value
// reaches too.
func settingEvenEmpty(name string, apply func(cfg *Config, v string, r *envReader)) envSetting {
	return envSetting{name: name, evenEmpty: true, apply: apply}
}

// text is a variable taken as it is, trimmed: an empty value too.
func text(name string, set func(*Config, string)) envSetting {
	return envSetting{name: name, evenEmpty: true, apply: func(cfg *Config, v string, _ *envReader) { set(cfg, v) }}
}

// untrimmed is a variable taken as it is, spaces kept (a password's).
func untrimmed(name string, set func(*Config, string)) envSetting {
	s := text(name, set)
	s.untrimmed = true
	return s
}

// wholeNumber is a variable of a whole number from lo to maxInt32.
func wholeNumber(name string, lo int64, set func(*Config, int64)) envSetting {
	return setting(name, func(cfg *Config, v string, r *envReader) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > maxInt32 {
			r.bad("error", name, "%q is not a whole number from %d to %d; ignored", v, lo, maxInt32)
			return
		}
		set(cfg, n)
	})
}

// k8sObject is a variable of a JSON object of a Kubernetes type (T), read
// strictly (strictObject); otherwise says what holds when it does not parse.
func k8sObject[T any](name, otherwise string, set func(*Config, *T)) envSetting {
	return setting(name, func(cfg *Config, v string, r *envReader) {
		var obj T
		if err := strictObject(v, &obj); err != nil {
			r.bad("error", name, "%v; %s", err, otherwise)
			return
		}
		set(cfg, &obj)
	})
}

// applyFilerHTTPTimeout: the filer takes up to maxFilerTimeout seconds and
// fails on more.
func applyFilerHTTPTimeout(cfg *Config, v string, r *envReader) {
	if n, err := strconv.ParseFloat(v, 64); err != nil || n <= 0 || n > maxFilerTimeout || math.IsNaN(n) {
		r.bad("error", "FILER_HTTP_TIMEOUT", "%q is not a positive number of seconds up to %g; using %s", v, float64(maxFilerTimeout), jobspec.DefaultFilerTimeout)
	} else {
		cfg.FilerHTTPTimeout = v
	}
}

func applyFilerParallelism(cfg *Config, v string, r *envReader) {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > maxFilerParallelism {
		r.bad("error", "FILER_PARALLELISM", "%q is not a whole number from 1 to %d; the filer moves %d files at once", v, maxFilerParallelism, defaultFilerParallelism)
	} else {
		cfg.FilerParallelism = n
	}
}

func applyFilerAllowedCIDRs(cfg *Config, v string, r *envReader) {
	if err := checkCIDRs(v); err != nil {
		r.bad("error", "FILER_ALLOWED_CIDRS", "%v; the filer reaches no private address", err)
	} else {
		cfg.FilerAllowedCIDRs = v
	}
}

func applyQuotaCPU(cfg *Config, v string, r *envReader) {
	if n, err := strconv.ParseFloat(v, 64); err != nil || !(n >= 0 && n <= 1e6) {
		r.bad("error", "QUOTA_CPU_PER_USER", "%q is not a number of CPU cores from 0 to 1000000; no limit of cores", v)
	} else {
		cfg.Quota.CPU = n
	}
}

func applyLogTailBytes(cfg *Config, v string, r *envReader) {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > MaxLogTailBytes {
		r.bad("error", "TES_LOG_TAIL_BYTES", "%q is not a number of bytes from 1 to %d; keeping %d of each executor stream", v, MaxLogTailBytes, DefaultLogTailBytes)
	} else {
		cfg.LogTailBytes = n
	}
}

// applyDefaultDiskGB: at least 1 MiB, at most 1 PiB; a PVC of a fraction of
// a byte, or an overflowing quantity, is refused by the API server per task.
func applyDefaultDiskGB(cfg *Config, v string, r *envReader) {
	if n, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(n) || n < minDiskGB || n > maxDiskGB {
		r.bad("error", "DEFAULT_DISK_GB", "%q is not a number of GiB from %g to %g; tasks without disk_gb get %g", v, minDiskGB, float64(maxDiskGB), cfg.DiskGB())
	} else {
		cfg.DefaultDiskGB = n
	}
}

func applyUploadOutputsOnFailure(cfg *Config, v string, r *envReader) {
	switch v {
	case "true":
		cfg.UploadOutputsOnFailure = true
	case "false":
	default:
		r.bad("warn", "UPLOAD_OUTPUTS_ON_FAILURE", "%q is neither true nor false; a task whose executor fails uploads nothing unless its tag %s says so", v, TagUploadOutputsOnFailure)
	}
}

func applyNotifyURLPrefixes(cfg *Config, v string, r *envReader) {
	if prefixes, err := ParseNotifyPrefixes(v); err != nil {
		r.bad("error", "NOTIFY_URL_PREFIXES", "%v; no task may name an address for its state changes", err)
	} else {
		cfg.NotifyURLPrefixes = prefixes
	}
}

func applyKeepFailedPVC(cfg *Config, v string, r *envReader) {
	switch v {
	case "true":
		cfg.KeepFailedPVC = true
	case "", "false":
		cfg.KeepFailedPVC = false
	default:
		r.bad("warn", "KEEP_FAILED_PVC", "%q is neither true nor false; failed tasks' PVCs are deleted", v)
	}
}

func applyAWSSecretName(cfg *Config, v string, r *envReader) {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		r.bad("error", "AWS_SECRET_NAME", "%q is not a secret name; the filer jobs mount %s", v, cfg.AWSSecretName)
	} else {
		cfg.AWSSecretName = v
	}
}

func applyExecutorServiceAccount(cfg *Config, v string, r *envReader) {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		r.bad("error", "EXECUTOR_SERVICE_ACCOUNT", "%q is not a ServiceAccount name; executors run as the namespace's default", v)
	} else {
		cfg.ExecutorServiceAccount = v
	}
}

// applyExecutorSecret reads the secret's name and EXECUTOR_SECRET_MOUNT_PATH
// with it (jobspec.DefaultExecutorSecretMountPath when unset).
func applyExecutorSecret(cfg *Config, name string, r *envReader) {
	mount := r.get("EXECUTOR_SECRET_MOUNT_PATH")
	if mount == "" {
		mount = jobspec.DefaultExecutorSecretMountPath
	}
	switch {
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		r.bad("error", "EXECUTOR_SECRET_NAME", "%q is not a secret name; no executor secret is mounted", name)
	case !cleanAbs(mount) || mount == "/":
		r.bad("error", "EXECUTOR_SECRET_MOUNT_PATH", "%q is not a clean absolute path below /; no executor secret is mounted", mount)
	default:
		cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: name, MountPath: mount}
	}
}

// applyExecutorPodAnnotations takes each key or prefix of the list that is
// one, and reports each other.
func applyExecutorPodAnnotations(cfg *Config, v string, r *envReader) {
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		// A prefix is a key's prefix and domain: "example.org/".
		name := k
		if strings.HasSuffix(k, "/") {
			name = k + "x"
		}
		if errs := validation.IsQualifiedName(name); len(errs) > 0 {
			r.bad("error", "EXECUTOR_POD_ANNOTATIONS", "%q is not an annotation key or a prefix ending in /; ignored", k)
			continue
		}
		cfg.ExecutorPodAnnotations = append(cfg.ExecutorPodAnnotations, k)
	}
}

func applyTrustEvents(cfg *Config, v string, r *envReader) {
	if b, err := strconv.ParseBool(v); err != nil {
		r.bad("error", "TRUST_EVENTS", "%q is not a boolean; events are not trusted", v)
	} else {
		cfg.TrustEvents = b
	}
}

// applyUserSecretPrefix: the prefix and a hash of 20 characters make a
// secret name.
func applyUserSecretPrefix(cfg *Config, v string, r *envReader) {
	if errs := validation.IsDNS1123Subdomain(v + strings.Repeat("0", jobspec.UserHashLen)); len(errs) > 0 || strings.HasSuffix(v, ".") {
		r.bad("error", "FILER_USER_SECRET_PREFIX", "%q does not begin a secret name; every filer gets the shared credentials", v)
	} else {
		cfg.UserSecretPrefix = v
	}
}

// fileTransfer checks the settings of file:// transfers (behaviour §3.9,
// §8.7): CONTAINER_BASE_PATH defaults to HOST_BASE_PATH, as in the filer; a
// combination that cannot work is reported and turned off, so that no task
// gets a filer that fails on it.
func fileTransfer(cfg *Config) []ConfigIssue {
	var issues []ConfigIssue
	off := func(name, format string, a ...any) {
		issues = append(issues, ConfigIssue{Level: "error", Name: name, Msg: fmt.Sprintf(format, a...) + "; file:// transfers are off"})
		cfg.HostBasePath, cfg.ContainerBasePath, cfg.TransferPVCName = "", "", ""
	}
	if cfg.ContainerBasePath == "" {
		cfg.ContainerBasePath = cfg.HostBasePath
	}
	switch {
	case cfg.HostBasePath == "" && cfg.ContainerBasePath == "" && cfg.TransferPVCName == "":
	case cfg.HostBasePath == "":
		off("HOST_BASE_PATH", "is unset, but CONTAINER_BASE_PATH or TRANSFER_PVC_NAME is set: file:// URLs name paths below it")
	case !cleanAbs(cfg.HostBasePath):
		off("HOST_BASE_PATH", "%q is not a clean absolute path", cfg.HostBasePath)
	case !cleanAbs(cfg.ContainerBasePath) || cfg.ContainerBasePath == "/":
		off("CONTAINER_BASE_PATH", "%q is not a clean absolute path below /", cfg.ContainerBasePath)
	case jobspec.ReservedMount(cfg.ContainerBasePath):
		off("CONTAINER_BASE_PATH", "%q is where the filer mounts the task's own volumes", cfg.ContainerBasePath)
	case cfg.TransferPVCName != "" && len(validation.IsDNS1123Subdomain(cfg.TransferPVCName)) > 0:
		off("TRANSFER_PVC_NAME", "%q is not a valid PVC name", cfg.TransferPVCName)
	}
	return issues
}

// ParsePodTimeout reads --pod-timeout / POD_TIMEOUT: seconds, more than 0.
func ParsePodTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 || n > maxInt32 || math.IsNaN(n) {
		return 0, fmt.Errorf("pod timeout %q is not a number of seconds above 0, up to %d", v, maxInt32)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// ptrTo points at a copy of v.
func ptrTo[T any](v T) *T { return &v }
