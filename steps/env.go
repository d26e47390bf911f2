package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsjson "sigs.k8s.io/json"

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
// leaves the default.
func LoadEnv(cfg Config, getenv func(string) string) (Config, []ConfigIssue) {
	var issues []ConfigIssue
	bad := func(level, name, format string, a ...any) {
		issues = append(issues, ConfigIssue{Level: level, Name: name, Msg: fmt.Sprintf(format, a...)})
	}
	get := func(name string) string { return strings.TrimSpace(getenv(name)) }
	intIn := func(name string, lo int64) (int64, bool) {
		v := get(name)
		if v == "" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > maxInt32 {
			bad("error", name, "%q is not a whole number from %d to %d; ignored", v, lo, maxInt32)
			return 0, false
		}
		return n, true
	}

	if n, ok := intIn("EXECUTOR_BACKOFF_LIMIT", 0); ok {
		v := int32(n)
		cfg.ExecutorBackoffLimit = &v
	}
	if n, ok := intIn("EXECUTOR_MAX_PREEMPTIONS", 0); ok {
		cfg.MaxPreemptions = int(n)
	}
	if n, ok := intIn("FILER_BACKOFF_LIMIT", 0); ok {
		v := int32(n)
		cfg.FilerBackoffLimit = &v
	}
	if v := get("FILER_HTTP_TIMEOUT"); v != "" {
		// The filer takes up to maxFilerTimeout seconds and fails on more.
		if n, err := strconv.ParseFloat(v, 64); err != nil || n <= 0 || n > maxFilerTimeout || math.IsNaN(n) {
			bad("error", "FILER_HTTP_TIMEOUT", "%q is not a positive number of seconds up to %g; using %s", v, float64(maxFilerTimeout), jobspec.DefaultFilerTimeout)
		} else {
			cfg.FilerHTTPTimeout = v
		}
	}
	if v := get("FILER_PARALLELISM"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > maxFilerParallelism {
			bad("error", "FILER_PARALLELISM", "%q is not a whole number from 1 to %d; the filer moves %d files at once", v, maxFilerParallelism, defaultFilerParallelism)
		} else {
			cfg.FilerParallelism = n
		}
	}
	if v := get("FILER_ALLOWED_CIDRS"); v != "" {
		if err := checkCIDRs(v); err != nil {
			bad("error", "FILER_ALLOWED_CIDRS", "%v; the filer reaches no private address", err)
		} else {
			cfg.FilerAllowedCIDRs = v
		}
	}
	if n, ok := intIn("QUOTA_TASKS_PER_USER", 0); ok {
		cfg.Quota.Tasks = int(n)
	}
	if n, ok := intIn("TASK_MAX_RUN_SECONDS", 1); ok {
		cfg.MaxRun = time.Duration(n) * time.Second
	}
	if n, ok := intIn("METRICS_USERS", 0); ok {
		cfg.MetricsUsers = int(n)
	}
	if v := get("QUOTA_CPU_PER_USER"); v != "" {
		if n, err := strconv.ParseFloat(v, 64); err != nil || !(n >= 0 && n <= 1e6) {
			bad("error", "QUOTA_CPU_PER_USER", "%q is not a number of CPU cores from 0 to 1000000; no limit of cores", v)
		} else {
			cfg.Quota.CPU = n
		}
	}
	if v := get("TES_LOG_TAIL_BYTES"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 || n > MaxLogTailBytes {
			bad("error", "TES_LOG_TAIL_BYTES", "%q is not a number of bytes from 1 to %d; keeping %d of each executor stream", v, MaxLogTailBytes, DefaultLogTailBytes)
		} else {
			cfg.LogTailBytes = n
		}
	}
	cfg.StorageClassName = get("STORAGE_CLASS_NAME")
	if v := get("DEFAULT_DISK_GB"); v != "" {
		// At least 1 MiB, at most 1 PiB: a PVC of a fraction of a byte, or
		// an overflowing quantity, is refused by the API server per task.
		if n, err := strconv.ParseFloat(v, 64); err != nil || math.IsNaN(n) || n < minDiskGB || n > maxDiskGB {
			bad("error", "DEFAULT_DISK_GB", "%q is not a number of GiB from %g to %g; tasks without disk_gb get %g", v, minDiskGB, float64(maxDiskGB), cfg.DiskGB())
		} else {
			cfg.DefaultDiskGB = n
		}
	}
	if n, ok := intIn("TESK_MAX_QUEUE_SECONDS", 1); ok {
		cfg.MaxQueue = time.Duration(n) * time.Second
	}
	if n, ok := intIn("TASK_TTL_SECONDS", 0); ok {
		d := time.Duration(n) * time.Second
		cfg.TaskTTL = &d
	}
	switch v := get("UPLOAD_OUTPUTS_ON_FAILURE"); v {
	case "true":
		cfg.UploadOutputsOnFailure = true
	case "", "false":
	default:
		bad("warn", "UPLOAD_OUTPUTS_ON_FAILURE", "%q is neither true nor false; a task whose executor fails uploads nothing unless its tag %s says so", v, TagUploadOutputsOnFailure)
	}
	if prefixes, err := ParseNotifyPrefixes(get("NOTIFY_URL_PREFIXES")); err != nil {
		bad("error", "NOTIFY_URL_PREFIXES", "%v; no task may name an address for its state changes", err)
	} else {
		cfg.NotifyURLPrefixes = prefixes
	}
	switch v := get("KEEP_FAILED_PVC"); v {
	case "true":
		cfg.KeepFailedPVC = true
	case "", "false":
		cfg.KeepFailedPVC = false
	default:
		bad("warn", "KEEP_FAILED_PVC", "%q is neither true nor false; failed tasks' PVCs are deleted", v)
	}
	if v := get("FILER_POD_SECURITY_CONTEXT"); v != "" {
		var sc corev1.PodSecurityContext
		if err := strictObject(v, &sc); err != nil {
			bad("error", "FILER_POD_SECURITY_CONTEXT", "%v; keeping the default", err)
		} else if v == "{}" || isZero(sc) {
			cfg.FilerPodSecurityContext = nil
		} else {
			cfg.FilerPodSecurityContext = &sc
		}
	}
	if v := get("FILER_SECURITY_CONTEXT"); v != "" {
		var sc corev1.SecurityContext
		if err := strictObject(v, &sc); err != nil {
			bad("error", "FILER_SECURITY_CONTEXT", "%v; keeping the default", err)
		} else if isZero(sc) {
			cfg.FilerSecurityContext = nil
		} else {
			cfg.FilerSecurityContext = &sc
		}
	}
	if v := get("FILER_RESOURCES"); v != "" {
		var rr corev1.ResourceRequirements
		if err := strictObject(v, &rr); err != nil {
			bad("error", "FILER_RESOURCES", "%v; setting none", err)
		} else {
			cfg.FilerResources = rr
		}
	}
	if v := get("AWS_SECRET_NAME"); v != "" {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			bad("error", "AWS_SECRET_NAME", "%q is not a secret name; the filer jobs mount %s", v, cfg.AWSSecretName)
		} else {
			cfg.AWSSecretName = v
		}
	}
	cfg.FTPUsername = getenv("TESK_FTP_USERNAME")
	cfg.FTPPassword = getenv("TESK_FTP_PASSWORD")
	cfg.FTPSecretName = get("TESK_FTP_SECRET_NAME")
	cfg.FTPHosts = get("TESK_FTP_HOSTS")
	cfg.NetrcSecretName = get("NETRC_SECRET_NAME")
	cfg.HostBasePath, cfg.ContainerBasePath, cfg.TransferPVCName = get("HOST_BASE_PATH"), get("CONTAINER_BASE_PATH"), get("TRANSFER_PVC_NAME")
	if v := get("EXECUTOR_SECURITY_CONTEXT"); v != "" {
		var sc corev1.SecurityContext
		if err := strictObject(v, &sc); err != nil {
			bad("error", "EXECUTOR_SECURITY_CONTEXT", "%v; keeping the default", err)
		} else if isZero(sc) {
			cfg.ExecutorSecurityContext = nil
		} else {
			cfg.ExecutorSecurityContext = &sc
		}
	}
	if v := get("EXECUTOR_SERVICE_ACCOUNT"); v != "" {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			bad("error", "EXECUTOR_SERVICE_ACCOUNT", "%q is not a ServiceAccount name; executors run as the namespace's default", v)
		} else {
			cfg.ExecutorServiceAccount = v
		}
	}
	if name, mount := get("EXECUTOR_SECRET_NAME"), get("EXECUTOR_SECRET_MOUNT_PATH"); name != "" {
		if mount == "" {
			mount = jobspec.DefaultExecutorSecretMountPath
		}
		switch {
		case len(validation.IsDNS1123Subdomain(name)) > 0:
			bad("error", "EXECUTOR_SECRET_NAME", "%q is not a secret name; no executor secret is mounted", name)
		case !cleanAbs(mount) || mount == "/":
			bad("error", "EXECUTOR_SECRET_MOUNT_PATH", "%q is not a clean absolute path below /; no executor secret is mounted", mount)
		default:
			cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: name, MountPath: mount}
		}
	}
	if v := get("EXECUTOR_POD_ANNOTATIONS"); v != "" {
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
				bad("error", "EXECUTOR_POD_ANNOTATIONS", "%q is not an annotation key or a prefix ending in /; ignored", k)
				continue
			}
			cfg.ExecutorPodAnnotations = append(cfg.ExecutorPodAnnotations, k)
		}
	}
	if v := get("TRUST_EVENTS"); v != "" {
		if b, err := strconv.ParseBool(v); err != nil {
			bad("error", "TRUST_EVENTS", "%q is not a boolean; events are not trusted", v)
		} else {
			cfg.TrustEvents = b
		}
	}
	cfg.EventsAudience = get("EVENTS_AUDIENCE")
	if v := get("FILER_USER_SECRET_PREFIX"); v != "" {
		// The prefix and a hash of 20 characters make a secret name.
		if errs := validation.IsDNS1123Subdomain(v + strings.Repeat("0", jobspec.UserHashLen)); len(errs) > 0 || strings.HasSuffix(v, ".") {
			bad("error", "FILER_USER_SECRET_PREFIX", "%q does not begin a secret name; every filer gets the shared credentials", v)
		} else {
			cfg.UserSecretPrefix = v
		}
	}
	for _, i := range fileTransfer(&cfg) {
		bad("error", i.Name, "%s", i.Msg)
	}
	if cfg.FTPSecretName == "" && (cfg.FTPUsername != "" || cfg.FTPPassword != "") {
		bad("warn", "TESK_FTP_USERNAME", "FTP credentials are passed to the filer as values in its job; set TESK_FTP_SECRET_NAME to reference a secret instead")
	}
	return cfg, issues
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

func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p }

// ParsePodTimeout reads --pod-timeout / POD_TIMEOUT: seconds, more than 0.
func ParsePodTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 || n > maxInt32 || math.IsNaN(n) {
		return 0, fmt.Errorf("pod timeout %q is not a number of seconds above 0, up to %d", v, maxInt32)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// strictObject decodes a JSON object into a Kubernetes type, refusing
// anything else, unknown fields and fields of the wrong type.
func strictObject(v string, into any) error {
	if !strings.HasPrefix(v, "{") {
		return fmt.Errorf("%q is not a JSON object", v)
	}
	strict, err := sigsjson.UnmarshalStrict([]byte(v), into, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fmt.Errorf("not a valid JSON object of this type: %v", err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("does not fit the Kubernetes type: %v", strict[0])
	}
	return nil
}

func isZero(v any) bool {
	b, _ := json.Marshal(v)
	return bytes.Equal(b, []byte("{}"))
}

// checkCIDRs checks a comma-separated list of CIDRs, as the filer reads
// FILER_ALLOWED_CIDRS.
func checkCIDRs(list string) error {
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		if _, err := netip.ParsePrefix(c); err != nil {
			return fmt.Errorf("%q is not a CIDR (e.g. 10.20.0.0/16)", c)
		}
	}
	return nil
}
