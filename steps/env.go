package steps

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/elixir-cloud-aai/tesk-knative/backendparams"
	"github.com/elixir-cloud-aai/tesk-knative/internal/settings"
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
// leaves the default. The variables are envSettings, read in its order by
// the commands' loader (internal/settings).
func LoadEnv(cfg Config, getenv func(string) string) (Config, []ConfigIssue) {
	var issues []ConfigIssue
	for _, p := range settings.Load(getenv, envSettings(&cfg, getenv)) {
		level := "error"
		if errors.As(p.Err, new(warning)) {
			level = "warn"
		}
		issues = append(issues, ConfigIssue{Level: level, Name: p.Name, Msg: p.Err.Error()})
	}
	issues = append(issues, fileTransfer(&cfg)...)
	if cfg.FTPSecretName == "" && (cfg.FTPUsername != "" || cfg.FTPPassword != "") {
		issues = append(issues, ConfigIssue{Level: "warn", Name: "TESK_FTP_USERNAME", Msg: "FTP credentials are passed to the filer as values in its job; set TESK_FTP_SECRET_NAME to reference a secret instead"})
	}
	return cfg, issues
}

// envSettings are the variables LoadEnv reads into c, each with how its
// value is checked and where on the Config it goes; a value that does not
// pass leaves the Config's default (DefaultConfig), which its issue names.
func envSettings(c *Config, getenv func(string) string) []settings.Setting {
	return []settings.Setting{
		wholeNumber("EXECUTOR_BACKOFF_LIMIT", 0, func(n int64) { c.ExecutorBackoffLimit = ptrTo(int32(n)) }),
		wholeNumber("EXECUTOR_MAX_PREEMPTIONS", 0, func(n int64) { c.MaxPreemptions = int(n) }),
		wholeNumber("FILER_BACKOFF_LIMIT", 0, func(n int64) { c.FilerBackoffLimit = ptrTo(int32(n)) }),
		setting("FILER_HTTP_TIMEOUT", c, applyFilerHTTPTimeout),
		settings.Int("FILER_PARALLELISM", &c.FilerParallelism, 1, maxFilerParallelism,
			fmt.Sprintf("a whole number from 1 to %d; the filer moves %d files at once", maxFilerParallelism, defaultFilerParallelism)),
		setting("FILER_ALLOWED_CIDRS", c, applyFilerAllowedCIDRs),
		wholeNumber("QUOTA_TASKS_PER_USER", 0, func(n int64) { c.Quota.Tasks = int(n) }),
		wholeNumber("TASK_MAX_RUN_SECONDS", 1, func(n int64) { c.MaxRun = time.Duration(n) * time.Second }),
		wholeNumber("METRICS_USERS", 0, func(n int64) { c.MetricsUsers = int(n) }),
		settings.Float("QUOTA_CPU_PER_USER", &c.Quota.CPU, 0, 1e6, "a number of CPU cores from 0 to 1000000; no limit of cores"),
		settings.Int("TES_LOG_TAIL_BYTES", &c.LogTailBytes, 1, MaxLogTailBytes,
			fmt.Sprintf("a number of bytes from 1 to %d; keeping %d of each executor stream", MaxLogTailBytes, DefaultLogTailBytes)),
		text("STORAGE_CLASS_NAME", &c.StorageClassName),
		setting("DEFAULT_DISK_GB", c, applyDefaultDiskGB),
		wholeNumber("TESK_MAX_QUEUE_SECONDS", 1, func(n int64) { c.MaxQueue = time.Duration(n) * time.Second }),
		wholeNumber("TASK_TTL_SECONDS", 0, func(n int64) { c.TaskTTL = ptrTo(time.Duration(n) * time.Second) }),
		setting("UPLOAD_OUTPUTS_ON_FAILURE", c, applyUploadOutputsOnFailure),
		settingEvenEmpty("NOTIFY_URL_PREFIXES", c, applyNotifyURLPrefixes),
		settingEvenEmpty("KEEP_FAILED_PVC", c, applyKeepFailedPVC),
		k8sObject("FILER_POD_SECURITY_CONTEXT", "keeping the default", func(sc *corev1.PodSecurityContext) {
			c.FilerPodSecurityContext = nilIfEmpty(sc)
		}),
		k8sObject("FILER_SECURITY_CONTEXT", "keeping the default", func(sc *corev1.SecurityContext) {
			c.FilerSecurityContext = nilIfEmpty(sc)
		}),
		k8sObject("FILER_RESOURCES", "setting none", func(rr *corev1.ResourceRequirements) { c.FilerResources = *rr }),
		setting("AWS_SECRET_NAME", c, applyAWSSecretName),
		untrimmed("TESK_FTP_USERNAME", &c.FTPUsername),
		untrimmed("TESK_FTP_PASSWORD", &c.FTPPassword),
		text("TESK_FTP_SECRET_NAME", &c.FTPSecretName),
		text("TESK_FTP_HOSTS", &c.FTPHosts),
		text("NETRC_SECRET_NAME", &c.NetrcSecretName),
		text("HOST_BASE_PATH", &c.HostBasePath),
		text("CONTAINER_BASE_PATH", &c.ContainerBasePath),
		text("TRANSFER_PVC_NAME", &c.TransferPVCName),
		k8sObject("EXECUTOR_SECURITY_CONTEXT", "keeping the default", func(sc *corev1.SecurityContext) {
			c.ExecutorSecurityContext = nilIfEmpty(sc)
		}),
		setting("EXECUTOR_SERVICE_ACCOUNT", c, applyExecutorServiceAccount),
		// and EXECUTOR_SECRET_MOUNT_PATH
		setting("EXECUTOR_SECRET_NAME", c, func(c *Config, name string) error {
			return applyExecutorSecret(c, name, strings.TrimSpace(getenv("EXECUTOR_SECRET_MOUNT_PATH")))
		}),
		setting("EXECUTOR_POD_ANNOTATIONS", c, applyExecutorPodAnnotations),
		settings.Bool("TRUST_EVENTS", &c.TrustEvents, "a boolean; events are not trusted"),
		text("EVENTS_AUDIENCE", &c.EventsAudience),
		setting("FILER_USER_SECRET_PREFIX", c, applyUserSecretPrefix),
	}
}

// warning is a problem of a setting reported at the level "warn" (behaviour
// §3.1); every other is an error.
type warning struct{ error }

// setting is a variable checked by apply, which puts its value on c or
// says what is wrong with it; unset or empty, it leaves the default.
func setting(name string, c *Config, apply func(c *Config, v string) error) settings.Setting {
	return settings.Setting{Name: name, Set: func(v string) error { return apply(c, v) }}
}

// settingEvenEmpty is a variable checked by apply, which an empty value
// reaches too.
func settingEvenEmpty(name string, c *Config, apply func(c *Config, v string) error) settings.Setting {
	s := setting(name, c, apply)
	s.EvenEmpty = true
	return s
}

// text is a variable taken as it is, trimmed: an empty value too.
func text(name string, to *string) settings.Setting { return settings.Text(name, "", to) }

// untrimmed is a variable taken as it is, spaces kept (a password's).
func untrimmed(name string, to *string) settings.Setting { return settings.RawText(name, to) }

// wholeNumber is a variable of a whole number from lo to maxInt32.
func wholeNumber(name string, lo int64, set func(int64)) settings.Setting {
	return settings.IntFunc(name, lo, maxInt32, fmt.Sprintf("a whole number from %d to %d; ignored", lo, maxInt32), set)
}

// k8sObject is a variable of a JSON object of a Kubernetes type (T), read
// strictly (strictObject); otherwise says what holds when it does not parse.
func k8sObject[T any](name, otherwise string, set func(*T)) settings.Setting {
	return settings.Setting{Name: name, Set: func(v string) error {
		var obj T
		if err := strictObject(v, &obj); err != nil {
			return fmt.Errorf("%v; %s", err, otherwise)
		}
		set(&obj)
		return nil
	}}
}

// applyFilerHTTPTimeout: the filer takes up to maxFilerTimeout seconds and
// fails on more.
func applyFilerHTTPTimeout(cfg *Config, v string) error {
	if n, err := strconv.ParseFloat(v, 64); err != nil || n <= 0 || n > maxFilerTimeout || math.IsNaN(n) {
		return fmt.Errorf("%q is not a positive number of seconds up to %g; using %s", v, float64(maxFilerTimeout), jobspec.DefaultFilerTimeout)
	}
	cfg.FilerHTTPTimeout = v
	return nil
}

func applyFilerAllowedCIDRs(cfg *Config, v string) error {
	if err := checkCIDRs(v); err != nil {
		return fmt.Errorf("%v; the filer reaches no private address", err)
	}
	cfg.FilerAllowedCIDRs = v
	return nil
}

// applyDefaultDiskGB: at least 1 MiB, at most 1 PiB; a PVC of a fraction of
// a byte, or an overflowing quantity, is refused by the API server per task.
func applyDefaultDiskGB(cfg *Config, v string) error {
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(n) || n < minDiskGB || n > maxDiskGB {
		return fmt.Errorf("%q is not a number of GiB from %g to %g; tasks without disk_gb get %g", v, minDiskGB, float64(maxDiskGB), cfg.DiskGB())
	}
	cfg.DefaultDiskGB = n
	return nil
}

func applyUploadOutputsOnFailure(cfg *Config, v string) error {
	switch v {
	case "true":
		cfg.UploadOutputsOnFailure = true
	case "false":
	default:
		return warning{fmt.Errorf("%q is neither true nor false; a task whose executor fails uploads nothing unless its tag %s says so", v, TagUploadOutputsOnFailure)}
	}
	return nil
}

func applyNotifyURLPrefixes(cfg *Config, v string) error {
	prefixes, err := ParseNotifyPrefixes(v)
	if err != nil {
		return fmt.Errorf("%v; no task may name an address for its state changes", err)
	}
	cfg.NotifyURLPrefixes = prefixes
	return nil
}

func applyKeepFailedPVC(cfg *Config, v string) error {
	switch v {
	case "true":
		cfg.KeepFailedPVC = true
	case "", "false":
		cfg.KeepFailedPVC = false
	default:
		return warning{fmt.Errorf("%q is neither true nor false; failed tasks' PVCs are deleted", v)}
	}
	return nil
}

func applyAWSSecretName(cfg *Config, v string) error {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return fmt.Errorf("%q is not a secret name; the filer jobs mount %s", v, cfg.AWSSecretName)
	}
	cfg.AWSSecretName = v
	return nil
}

func applyExecutorServiceAccount(cfg *Config, v string) error {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return fmt.Errorf("%q is not a ServiceAccount name; executors run as the namespace's default", v)
	}
	cfg.ExecutorServiceAccount = v
	return nil
}

// applyExecutorSecret reads the secret's name and the mount path of
// EXECUTOR_SECRET_MOUNT_PATH with it (jobspec.DefaultExecutorSecretMountPath
// when unset).
func applyExecutorSecret(cfg *Config, name, mount string) error {
	if mount == "" {
		mount = jobspec.DefaultExecutorSecretMountPath
	}
	switch {
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		return fmt.Errorf("%q is not a secret name; no executor secret is mounted", name)
	case !cleanAbs(mount) || mount == "/":
		return &settings.Problem{Name: "EXECUTOR_SECRET_MOUNT_PATH", Err: fmt.Errorf("%q is not a clean absolute path below /; no executor secret is mounted", mount)}
	}
	cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: name, MountPath: mount}
	return nil
}

// applyExecutorPodAnnotations takes each key or prefix of the list that is
// one, and reports each other.
func applyExecutorPodAnnotations(cfg *Config, v string) error {
	var bad []error
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
			bad = append(bad, fmt.Errorf("%q is not an annotation key or a prefix ending in /; ignored", k))
			continue
		}
		cfg.ExecutorPodAnnotations = append(cfg.ExecutorPodAnnotations, k)
	}
	return errors.Join(bad...)
}

// applyUserSecretPrefix: the prefix and a hash of 20 characters make a
// secret name.
func applyUserSecretPrefix(cfg *Config, v string) error {
	if errs := validation.IsDNS1123Subdomain(v + strings.Repeat("0", jobspec.UserHashLen)); len(errs) > 0 || strings.HasSuffix(v, ".") {
		return fmt.Errorf("%q does not begin a secret name; every filer gets the shared credentials", v)
	}
	cfg.UserSecretPrefix = v
	return nil
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
