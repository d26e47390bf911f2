package steps

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/elixir-cloud-aai/tesk-knative/filer"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	corev1 "k8s.io/api/core/v1"
)

// The cases check docs/behaviour.md section 3 (environment variables; §3.1
// for how values are read).

func TestLoadEnv(t *testing.T) {
	def := DefaultConfig()
	cases := []struct {
		name   string
		env    map[string]string
		check  func(t *testing.T, c Config)
		issues []string // "level name" of each issue, in order
	}{
		{
			name: "nothing set: the defaults",
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c, def) {
					t.Errorf("config %+v, want the defaults %+v", c, def)
				}
			},
		},
		{
			name: "an empty or blank value counts as unset",
			env: map[string]string{
				"EXECUTOR_BACKOFF_LIMIT": "", "FILER_BACKOFF_LIMIT": "  ", "TESK_MAX_QUEUE_SECONDS": "",
				"TASK_TTL_SECONDS": " ", "KEEP_FAILED_PVC": "", "FILER_POD_SECURITY_CONTEXT": "",
				"FILER_SECURITY_CONTEXT": " ", "FILER_RESOURCES": "", "FILER_HTTP_TIMEOUT": "",
			},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c, def) {
					t.Errorf("config %+v, want the defaults", c)
				}
			},
		},
		{
			name: "numbers may have spaces around them",
			env: map[string]string{
				"EXECUTOR_BACKOFF_LIMIT": " 3 ", "FILER_BACKOFF_LIMIT": "\t2\n", "TESK_MAX_QUEUE_SECONDS": " 600",
				"TASK_TTL_SECONDS": "86400 ", "FILER_HTTP_TIMEOUT": " 30 ",
			},
			check: func(t *testing.T, c Config) {
				wantInt32(t, "ExecutorBackoffLimit", c.ExecutorBackoffLimit, 3)
				wantInt32(t, "FilerBackoffLimit", c.FilerBackoffLimit, 2)
				if c.MaxQueue != 600*time.Second {
					t.Errorf("MaxQueue %v", c.MaxQueue)
				}
				if c.TaskTTL == nil || *c.TaskTTL != 24*time.Hour {
					t.Errorf("TaskTTL %v", c.TaskTTL)
				}
				if c.FilerHTTPTimeout != "30" {
					t.Errorf("FilerHTTPTimeout %q", c.FilerHTTPTimeout)
				}
			},
		},
		{
			name: "EXECUTOR_BACKOFF_LIMIT and FILER_BACKOFF_LIMIT take 0 and 2147483647",
			env:  map[string]string{"EXECUTOR_BACKOFF_LIMIT": "0", "FILER_BACKOFF_LIMIT": "2147483647"},
			check: func(t *testing.T, c Config) {
				wantInt32(t, "ExecutorBackoffLimit", c.ExecutorBackoffLimit, 0)
				wantInt32(t, "FilerBackoffLimit", c.FilerBackoffLimit, 2147483647)
			},
		},
		{
			name:   "EXECUTOR_BACKOFF_LIMIT out of range or malformed: an error, and ignored",
			env:    map[string]string{"EXECUTOR_BACKOFF_LIMIT": "2147483648"},
			issues: []string{"error EXECUTOR_BACKOFF_LIMIT"},
			check:  func(t *testing.T, c Config) { wantNil(t, "ExecutorBackoffLimit", c.ExecutorBackoffLimit) },
		},
		{
			name:   "EXECUTOR_BACKOFF_LIMIT negative: an error, and ignored",
			env:    map[string]string{"EXECUTOR_BACKOFF_LIMIT": "-1"},
			issues: []string{"error EXECUTOR_BACKOFF_LIMIT"},
			check:  func(t *testing.T, c Config) { wantNil(t, "ExecutorBackoffLimit", c.ExecutorBackoffLimit) },
		},
		{
			name:  "UPLOAD_OUTPUTS_ON_FAILURE true",
			env:   map[string]string{"UPLOAD_OUTPUTS_ON_FAILURE": "true"},
			check: func(t *testing.T, c Config) { wantBool(t, "UploadOutputsOnFailure", c.UploadOutputsOnFailure, true) },
		},
		{
			name:   "UPLOAD_OUTPUTS_ON_FAILURE neither true nor false: a warning, off",
			env:    map[string]string{"UPLOAD_OUTPUTS_ON_FAILURE": "yes"},
			issues: []string{"warn UPLOAD_OUTPUTS_ON_FAILURE"},
			check:  func(t *testing.T, c Config) { wantBool(t, "UploadOutputsOnFailure", c.UploadOutputsOnFailure, false) },
		},
		{
			name:  "EXECUTOR_MAX_PREEMPTIONS sets the runs again of a pod taken away; unset, 3",
			env:   map[string]string{"EXECUTOR_MAX_PREEMPTIONS": " 0 "},
			check: func(t *testing.T, c Config) { wantInt(t, "MaxPreemptions", c.MaxPreemptions, 0) },
		},
		{
			name:   "EXECUTOR_MAX_PREEMPTIONS negative: an error, the default kept",
			env:    map[string]string{"EXECUTOR_MAX_PREEMPTIONS": "-1"},
			issues: []string{"error EXECUTOR_MAX_PREEMPTIONS"},
			check:  func(t *testing.T, c Config) { wantInt(t, "MaxPreemptions", c.MaxPreemptions, DefaultMaxPreemptions) },
		},
		{
			name:   "FILER_BACKOFF_LIMIT not a whole number: an error, Kubernetes' default kept",
			env:    map[string]string{"FILER_BACKOFF_LIMIT": "1.5"},
			issues: []string{"error FILER_BACKOFF_LIMIT"},
			check:  func(t *testing.T, c Config) { wantNil(t, "FilerBackoffLimit", c.FilerBackoffLimit) },
		},
		{
			name:   "FILER_BACKOFF_LIMIT words: an error",
			env:    map[string]string{"FILER_BACKOFF_LIMIT": "three"},
			issues: []string{"error FILER_BACKOFF_LIMIT"},
			check:  func(t *testing.T, c Config) { wantNil(t, "FilerBackoffLimit", c.FilerBackoffLimit) },
		},
		{
			name:  "TESK_MAX_QUEUE_SECONDS from 1",
			env:   map[string]string{"TESK_MAX_QUEUE_SECONDS": "1"},
			check: func(t *testing.T, c Config) { wantDuration(t, "MaxQueue", c.MaxQueue, time.Second) },
		},
		{
			name:   "TESK_MAX_QUEUE_SECONDS 0 is out of range: an error, pods wait forever",
			env:    map[string]string{"TESK_MAX_QUEUE_SECONDS": "0"},
			issues: []string{"error TESK_MAX_QUEUE_SECONDS"},
			check:  func(t *testing.T, c Config) { wantDuration(t, "MaxQueue", c.MaxQueue, 0) },
		},
		{
			name:   "TESK_MAX_QUEUE_SECONDS above 2147483647: an error",
			env:    map[string]string{"TESK_MAX_QUEUE_SECONDS": "2147483648"},
			issues: []string{"error TESK_MAX_QUEUE_SECONDS"},
			check:  func(t *testing.T, c Config) { wantDuration(t, "MaxQueue", c.MaxQueue, 0) },
		},
		{
			name: "TASK_TTL_SECONDS from 0",
			env:  map[string]string{"TASK_TTL_SECONDS": "0"},
			check: func(t *testing.T, c Config) {
				if c.TaskTTL == nil || *c.TaskTTL != 0 {
					t.Errorf("TaskTTL %v, want 0", c.TaskTTL)
				}
			},
		},
		{
			name:   "TASK_TTL_SECONDS negative: an error, no TTL",
			env:    map[string]string{"TASK_TTL_SECONDS": "-5"},
			issues: []string{"error TASK_TTL_SECONDS"},
			check: func(t *testing.T, c Config) {
				if c.TaskTTL != nil {
					t.Errorf("TaskTTL %v, want none", *c.TaskTTL)
				}
			},
		},
		{
			name:   "TASK_TTL_SECONDS with a unit: an error, no TTL",
			env:    map[string]string{"TASK_TTL_SECONDS": "1h"},
			issues: []string{"error TASK_TTL_SECONDS"},
			check: func(t *testing.T, c Config) {
				if c.TaskTTL != nil {
					t.Errorf("TaskTTL %v, want none", *c.TaskTTL)
				}
			},
		},
		{
			name:  "KEEP_FAILED_PVC true keeps the PVC",
			env:   map[string]string{"KEEP_FAILED_PVC": "true"},
			check: func(t *testing.T, c Config) { wantBool(t, "KeepFailedPVC", c.KeepFailedPVC, true) },
		},
		{
			name:  "KEEP_FAILED_PVC false deletes it",
			env:   map[string]string{"KEEP_FAILED_PVC": "false"},
			check: func(t *testing.T, c Config) { wantBool(t, "KeepFailedPVC", c.KeepFailedPVC, false) },
		},
		{
			name:   "KEEP_FAILED_PVC other values: a warning, and it is deleted",
			env:    map[string]string{"KEEP_FAILED_PVC": "yes"},
			issues: []string{"warn KEEP_FAILED_PVC"},
			check:  func(t *testing.T, c Config) { wantBool(t, "KeepFailedPVC", c.KeepFailedPVC, false) },
		}, {
			name:   "KEEP_FAILED_PVC TRUE is not true: a warning, and it is deleted",
			env:    map[string]string{"KEEP_FAILED_PVC": "TRUE"},
			issues: []string{"warn KEEP_FAILED_PVC"},
			check:  func(t *testing.T, c Config) { wantBool(t, "KeepFailedPVC", c.KeepFailedPVC, false) },
		},
		{
			name:   "FILER_HTTP_TIMEOUT not a positive number: an error, 300 kept",
			env:    map[string]string{"FILER_HTTP_TIMEOUT": "0"},
			issues: []string{"error FILER_HTTP_TIMEOUT"},
			check: func(t *testing.T, c Config) {
				if c.FilerHTTPTimeout != jobspec.DefaultFilerTimeout {
					t.Errorf("FilerHTTPTimeout %q", c.FilerHTTPTimeout)
				}
			},
		},
		{
			name:   "FILER_HTTP_TIMEOUT above what the filer takes (1e9 s): an error, 300 kept",
			env:    map[string]string{"FILER_HTTP_TIMEOUT": "1e10"},
			issues: []string{"error FILER_HTTP_TIMEOUT"},
			check: func(t *testing.T, c Config) {
				if c.FilerHTTPTimeout != jobspec.DefaultFilerTimeout {
					t.Errorf("FilerHTTPTimeout %q", c.FilerHTTPTimeout)
				}
			},
		},
		{
			name: "FILER_PARALLELISM from 1 to 256, spaces allowed",
			env:  map[string]string{"FILER_PARALLELISM": " 16 "},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 16 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name: "FILER_PARALLELISM 256, the most",
			env:  map[string]string{"FILER_PARALLELISM": "256"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 256 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name:   "FILER_PARALLELISM 0: an error, the filer's default",
			env:    map[string]string{"FILER_PARALLELISM": "0"},
			issues: []string{"error FILER_PARALLELISM"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 0 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name:   "FILER_PARALLELISM 257: an error, the filer's default",
			env:    map[string]string{"FILER_PARALLELISM": "257"},
			issues: []string{"error FILER_PARALLELISM"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 0 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name:   "FILER_PARALLELISM -1: an error, the filer's default",
			env:    map[string]string{"FILER_PARALLELISM": "-1"},
			issues: []string{"error FILER_PARALLELISM"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 0 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name:   "FILER_PARALLELISM eight: an error, the filer's default",
			env:    map[string]string{"FILER_PARALLELISM": "eight"},
			issues: []string{"error FILER_PARALLELISM"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 0 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name:   "FILER_PARALLELISM 1.5: an error, the filer's default",
			env:    map[string]string{"FILER_PARALLELISM": "1.5"},
			issues: []string{"error FILER_PARALLELISM"},
			check: func(t *testing.T, c Config) {
				if c.FilerParallelism != 0 {
					t.Errorf("FilerParallelism %d", c.FilerParallelism)
				}
			},
		},
		{
			name: "QUOTA_TASKS_PER_USER, QUOTA_CPU_PER_USER and METRICS_USERS",
			env:  map[string]string{"QUOTA_TASKS_PER_USER": "3", "QUOTA_CPU_PER_USER": " 7.5 ", "METRICS_USERS": "20", "TASK_MAX_RUN_SECONDS": "86400"},
			check: func(t *testing.T, c Config) {
				if c.Quota != (Quota{Tasks: 3, CPU: 7.5}) || c.MetricsUsers != 20 || c.MaxRun != 24*time.Hour {
					t.Errorf("Quota %+v, MetricsUsers %d, MaxRun %s", c.Quota, c.MetricsUsers, c.MaxRun)
				}
			},
		},
		{
			name:   "QUOTA_TASKS_PER_USER and QUOTA_CPU_PER_USER not numbers: errors, no quota",
			env:    map[string]string{"QUOTA_TASKS_PER_USER": "two", "QUOTA_CPU_PER_USER": "-1", "TASK_MAX_RUN_SECONDS": "0"},
			issues: []string{"error QUOTA_TASKS_PER_USER", "error TASK_MAX_RUN_SECONDS", "error QUOTA_CPU_PER_USER"},
			check: func(t *testing.T, c Config) {
				if c.Quota.On() || c.MaxRun != 0 {
					t.Errorf("Quota %+v", c.Quota)
				}
			},
		},
		{
			name: "FILER_ALLOWED_CIDRS: CIDRs, spaces allowed",
			env:  map[string]string{"FILER_ALLOWED_CIDRS": "10.20.0.0/16, fd00::/8"},
			check: func(t *testing.T, c Config) {
				if c.FilerAllowedCIDRs != "10.20.0.0/16, fd00::/8" {
					t.Errorf("FilerAllowedCIDRs %q", c.FilerAllowedCIDRs)
				}
			},
		},
		{
			name:   "FILER_ALLOWED_CIDRS with an address that is not a CIDR: an error, none allowed",
			env:    map[string]string{"FILER_ALLOWED_CIDRS": "10.20.0.0/16,minio.local"},
			issues: []string{"error FILER_ALLOWED_CIDRS"},
			check: func(t *testing.T, c Config) {
				if c.FilerAllowedCIDRs != "" {
					t.Errorf("FilerAllowedCIDRs %q", c.FilerAllowedCIDRs)
				}
			},
		},
		{
			name: "FILER_HTTP_TIMEOUT takes fractions of seconds",
			env:  map[string]string{"FILER_HTTP_TIMEOUT": "2.5"},
			check: func(t *testing.T, c Config) {
				if c.FilerHTTPTimeout != "2.5" {
					t.Errorf("FilerHTTPTimeout %q", c.FilerHTTPTimeout)
				}
			},
		},
		{
			name: "FILER_POD_SECURITY_CONTEXT replaces the whole default",
			env:  map[string]string{"FILER_POD_SECURITY_CONTEXT": `{"runAsUser": 1000, "fsGroup": 2000}`},
			check: func(t *testing.T, c Config) {
				sc := c.FilerPodSecurityContext
				if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.FSGroup == nil || *sc.FSGroup != 2000 {
					t.Fatalf("pod security context %+v", sc)
				}
				if sc.RunAsNonRoot != nil || sc.SeccompProfile != nil {
					t.Errorf("default fields kept: %+v", sc)
				}
			},
		},
		{
			name: "FILER_POD_SECURITY_CONTEXT {} leaves it out",
			env:  map[string]string{"FILER_POD_SECURITY_CONTEXT": "{}"},
			check: func(t *testing.T, c Config) {
				if c.FilerPodSecurityContext != nil {
					t.Errorf("pod security context %+v, want none", c.FilerPodSecurityContext)
				}
			},
		},
		{
			name:   "FILER_POD_SECURITY_CONTEXT with an unknown field: an error, the default kept",
			env:    map[string]string{"FILER_POD_SECURITY_CONTEXT": `{"runAsUser": 1000, "runAsUsr": 5}`},
			issues: []string{"error FILER_POD_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerPodSecurityContext, jobspec.DefaultFilerPodSecurityContext()) {
					t.Errorf("pod security context %+v, want the default", c.FilerPodSecurityContext)
				}
			},
		},
		{
			name:   "FILER_POD_SECURITY_CONTEXT with a field of the wrong type: an error, the default kept",
			env:    map[string]string{"FILER_POD_SECURITY_CONTEXT": `{"runAsUser": "root"}`},
			issues: []string{"error FILER_POD_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerPodSecurityContext, jobspec.DefaultFilerPodSecurityContext()) {
					t.Errorf("pod security context %+v, want the default", c.FilerPodSecurityContext)
				}
			},
		},
		{
			name:   "FILER_POD_SECURITY_CONTEXT with a field in the wrong case: an error",
			env:    map[string]string{"FILER_POD_SECURITY_CONTEXT": `{"RunAsUser": 1000}`},
			issues: []string{"error FILER_POD_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerPodSecurityContext, jobspec.DefaultFilerPodSecurityContext()) {
					t.Errorf("pod security context %+v, want the default", c.FilerPodSecurityContext)
				}
			},
		},
		{
			name:   "FILER_POD_SECURITY_CONTEXT not a JSON object: an error, the default kept",
			env:    map[string]string{"FILER_POD_SECURITY_CONTEXT": `[{"runAsUser": 1000}]`},
			issues: []string{"error FILER_POD_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerPodSecurityContext, jobspec.DefaultFilerPodSecurityContext()) {
					t.Errorf("pod security context %+v, want the default", c.FilerPodSecurityContext)
				}
			},
		},
		{
			name: "FILER_SECURITY_CONTEXT replaces the container's default",
			env:  map[string]string{"FILER_SECURITY_CONTEXT": `{"privileged": false, "capabilities": {"drop": ["NET_RAW"]}}`},
			check: func(t *testing.T, c Config) {
				want := &corev1.SecurityContext{Privileged: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}}
				if !reflect.DeepEqual(c.FilerSecurityContext, want) {
					t.Errorf("security context %+v, want %+v", c.FilerSecurityContext, want)
				}
			},
		},
		{
			name: "FILER_SECURITY_CONTEXT {} leaves it out",
			env:  map[string]string{"FILER_SECURITY_CONTEXT": " {} "},
			check: func(t *testing.T, c Config) {
				if c.FilerSecurityContext != nil {
					t.Errorf("security context %+v, want none", c.FilerSecurityContext)
				}
			},
		},
		{
			name:   "FILER_SECURITY_CONTEXT with a nested unknown field: an error, the default kept",
			env:    map[string]string{"FILER_SECURITY_CONTEXT": `{"capabilities": {"remove": ["ALL"]}}`},
			issues: []string{"error FILER_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerSecurityContext, jobspec.DefaultFilerSecurityContext()) {
					t.Errorf("security context %+v, want the default", c.FilerSecurityContext)
				}
			},
		},
		{
			name:   "FILER_SECURITY_CONTEXT not JSON: an error, the default kept",
			env:    map[string]string{"FILER_SECURITY_CONTEXT": `privileged: false`},
			issues: []string{"error FILER_SECURITY_CONTEXT"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerSecurityContext, jobspec.DefaultFilerSecurityContext()) {
					t.Errorf("security context %+v, want the default", c.FilerSecurityContext)
				}
			},
		},
		{
			name: "FILER_RESOURCES sets the filer's requests and limits",
			env:  map[string]string{"FILER_RESOURCES": `{"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}`},
			check: func(t *testing.T, c Config) {
				want := corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("100m"), corev1.ResourceMemory: quantity("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: quantity("1Gi")},
				}
				if !reflect.DeepEqual(c.FilerResources, want) {
					t.Errorf("resources %+v, want %+v", c.FilerResources, want)
				}
			},
		},
		{
			name: "FILER_RESOURCES {} sets none",
			env:  map[string]string{"FILER_RESOURCES": `{}`},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerResources, corev1.ResourceRequirements{}) {
					t.Errorf("resources %+v, want none", c.FilerResources)
				}
			},
		},
		{
			name:   "FILER_RESOURCES with an unknown field: an error, none set",
			env:    map[string]string{"FILER_RESOURCES": `{"request": {"cpu": "1"}}`},
			issues: []string{"error FILER_RESOURCES"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerResources, corev1.ResourceRequirements{}) {
					t.Errorf("resources %+v, want none", c.FilerResources)
				}
			},
		},
		{
			name:   "FILER_RESOURCES with a field of the wrong type: an error, none set",
			env:    map[string]string{"FILER_RESOURCES": `{"limits": ["1Gi"]}`},
			issues: []string{"error FILER_RESOURCES"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerResources, corev1.ResourceRequirements{}) {
					t.Errorf("resources %+v, want none", c.FilerResources)
				}
			},
		},
		{
			name:   "FILER_RESOURCES not a JSON object: an error, none set",
			env:    map[string]string{"FILER_RESOURCES": `"1Gi"`},
			issues: []string{"error FILER_RESOURCES"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerResources, corev1.ResourceRequirements{}) {
					t.Errorf("resources %+v, want none", c.FilerResources)
				}
			},
		},
		{
			name:   "FILER_RESOURCES with trailing data: an error",
			env:    map[string]string{"FILER_RESOURCES": `{} {}`},
			issues: []string{"error FILER_RESOURCES"},
			check: func(t *testing.T, c Config) {
				if !reflect.DeepEqual(c.FilerResources, corev1.ResourceRequirements{}) {
					t.Errorf("resources %+v, want none", c.FilerResources)
				}
			},
		},
		{
			name:   "FTP credentials without TESK_FTP_SECRET_NAME: a warning, passed as values",
			env:    map[string]string{"TESK_FTP_USERNAME": "alice", "TESK_FTP_PASSWORD": "s3cret"},
			issues: []string{"warn TESK_FTP_USERNAME"},
			check: func(t *testing.T, c Config) {
				if c.FTPUsername != "alice" || c.FTPPassword != "s3cret" {
					t.Errorf("FTP credentials %q %q", c.FTPUsername, c.FTPPassword)
				}
			},
		},
		{
			name: "FTP credentials with TESK_FTP_SECRET_NAME: no warning",
			env:  map[string]string{"TESK_FTP_USERNAME": "alice", "TESK_FTP_PASSWORD": "s3cret", "TESK_FTP_SECRET_NAME": "ftp-secret"},
			check: func(t *testing.T, c Config) {
				if c.FTPSecretName != "ftp-secret" {
					t.Errorf("FTPSecretName %q", c.FTPSecretName)
				}
			},
		},
		{
			name: "the filer's other settings are passed on as they are",
			env: map[string]string{
				"STORAGE_CLASS_NAME": "fast", "TESK_FTP_HOSTS": "ftp.example.org", "NETRC_SECRET_NAME": "netrc",
				"HOST_BASE_PATH": "/host", "CONTAINER_BASE_PATH": "/transfer", "TRANSFER_PVC_NAME": "transfer-pvc",
			},
			check: func(t *testing.T, c Config) {
				got := []string{c.StorageClassName, c.FTPHosts, c.NetrcSecretName, c.HostBasePath, c.ContainerBasePath, c.TransferPVCName}
				want := []string{"fast", "ftp.example.org", "netrc", "/host", "/transfer", "transfer-pvc"}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %q, want %q", got, want)
				}
			},
		},
		// behaviour §3.12: the S3 secret.
		{
			name: "AWS_SECRET_NAME names the S3 secret",
			env:  map[string]string{"AWS_SECRET_NAME": " s3-creds "},
			check: func(t *testing.T, c Config) {
				if c.AWSSecretName != "s3-creds" {
					t.Errorf("AWSSecretName %q", c.AWSSecretName)
				}
			},
		},
		{
			name: "AWS_SECRET_NAME not a secret name: error, aws-secret",
			env:  map[string]string{"AWS_SECRET_NAME": "S3_Creds"},
			check: func(t *testing.T, c Config) {
				if c.AWSSecretName != AWSSecretName {
					t.Errorf("AWSSecretName %q", c.AWSSecretName)
				}
			},
			issues: []string{"error AWS_SECRET_NAME"},
		},
		// behaviour §3.4: the PVC of a task without disk_gb.
		{
			name: "DEFAULT_DISK_GB sizes the PVC of a task without disk_gb, fractions allowed",
			env:  map[string]string{"DEFAULT_DISK_GB": " 2.5 "},
			check: func(t *testing.T, c Config) {
				if c.DefaultDiskGB != 2.5 || c.DiskGB() != 2.5 {
					t.Errorf("DefaultDiskGB %v, diskGB %v", c.DefaultDiskGB, c.DiskGB())
				}
			},
		},
		{
			name: "DEFAULT_DISK_GB not a size from 1 MiB to 1 PiB: error, 1 GiB",
			env:  map[string]string{"DEFAULT_DISK_GB": "0"},
			check: func(t *testing.T, c Config) {
				if c.DefaultDiskGB != 0 || c.DiskGB() != jobspec.DefaultDiskGB {
					t.Errorf("DefaultDiskGB %v, diskGB %v", c.DefaultDiskGB, c.DiskGB())
				}
			},
			issues: []string{"error DEFAULT_DISK_GB"},
		},
		// behaviour §8.7: file:// transfers.
		{
			name: "HOST_BASE_PATH and TRANSFER_PVC_NAME without CONTAINER_BASE_PATH: the volume is mounted at HOST_BASE_PATH, as the filer expects",
			env:  map[string]string{"HOST_BASE_PATH": "/mnt/data", "TRANSFER_PVC_NAME": "transfer-pvc"},
			check: func(t *testing.T, c Config) {
				if c.HostBasePath != "/mnt/data" || c.ContainerBasePath != "/mnt/data" || c.TransferPVCName != "transfer-pvc" {
					t.Errorf("host %q container %q pvc %q", c.HostBasePath, c.ContainerBasePath, c.TransferPVCName)
				}
				ps := jobspec.FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, c.Config).Spec.Template.Spec
				if !hasMount(ps.Containers[0], "transfer", "/mnt/data", false) {
					t.Errorf("mounts %+v", ps.Containers[0].VolumeMounts)
				}
				env := map[string]string{}
				for _, e := range ps.Containers[0].Env {
					env[e.Name] = e.Value
				}
				if env["HOST_BASE_PATH"] != "/mnt/data" || env["CONTAINER_BASE_PATH"] != "/mnt/data" {
					t.Errorf("filer env %v", env)
				}
			},
		},
		{
			name:   "CONTAINER_BASE_PATH or TRANSFER_PVC_NAME without HOST_BASE_PATH cannot work: an error, and file:// transfers are off",
			env:    map[string]string{"CONTAINER_BASE_PATH": "/transfer", "TRANSFER_PVC_NAME": "transfer-pvc"},
			issues: []string{"error HOST_BASE_PATH"},
			check:  wantNoFileTransfer,
		},
		{
			name:   "a relative HOST_BASE_PATH",
			env:    map[string]string{"HOST_BASE_PATH": "mnt/data"},
			issues: []string{"error HOST_BASE_PATH"},
			check:  wantNoFileTransfer,
		},
		{
			name:   "CONTAINER_BASE_PATH at /",
			env:    map[string]string{"HOST_BASE_PATH": "/mnt", "CONTAINER_BASE_PATH": "/"},
			issues: []string{"error CONTAINER_BASE_PATH"},
			check:  wantNoFileTransfer,
		},
		{
			name:   "CONTAINER_BASE_PATH on the filer's own mounts",
			env:    map[string]string{"HOST_BASE_PATH": "/tesk", "TRANSFER_PVC_NAME": "t"},
			issues: []string{"error CONTAINER_BASE_PATH"},
			check:  wantNoFileTransfer,
		},
		{
			name:   "an invalid TRANSFER_PVC_NAME",
			env:    map[string]string{"HOST_BASE_PATH": "/mnt", "TRANSFER_PVC_NAME": "Transfer_PVC"},
			issues: []string{"error TRANSFER_PVC_NAME"},
			check:  wantNoFileTransfer,
		},
		{
			name: "the executors' settings (behaviour §3.13)",
			env: map[string]string{
				"EXECUTOR_SERVICE_ACCOUNT": "tesk-executor", "EXECUTOR_SECRET_NAME": "creds", "EXECUTOR_SECRET_MOUNT_PATH": "/secret",
				"EXECUTOR_SECURITY_CONTEXT": `{"runAsNonRoot": true}`, "TRUST_EVENTS": "true", "FILER_USER_SECRET_PREFIX": "tesk-user-",
			},
			check: func(t *testing.T, c Config) {
				if c.ExecutorServiceAccount != "tesk-executor" || c.ExecutorSecret != (jobspec.ExecutorSecret{Name: "creds", MountPath: "/secret"}) ||
					c.ExecutorSecurityContext == nil || !*c.ExecutorSecurityContext.RunAsNonRoot || c.ExecutorSecurityContext.Capabilities != nil ||
					!c.TrustEvents || c.UserSecretPrefix != "tesk-user-" {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name: "malformed executors' settings keep the defaults",
			env: map[string]string{
				"EXECUTOR_SERVICE_ACCOUNT": "Tesk_Executor", "EXECUTOR_SECRET_NAME": "creds", "EXECUTOR_SECRET_MOUNT_PATH": "secret",
				"EXECUTOR_SECURITY_CONTEXT": `{"privileged": "yes"}`, "TRUST_EVENTS": "sometimes", "FILER_USER_SECRET_PREFIX": "Users_",
			},
			issues: []string{"error EXECUTOR_SECURITY_CONTEXT", "error EXECUTOR_SERVICE_ACCOUNT", "error EXECUTOR_SECRET_MOUNT_PATH", "error TRUST_EVENTS", "error FILER_USER_SECRET_PREFIX"},
			check: func(t *testing.T, c Config) {
				if c.ExecutorServiceAccount != "" || c.ExecutorSecret.Name != "" || !reflect.DeepEqual(c.ExecutorSecurityContext, jobspec.DefaultExecutorSecurityContext()) || c.TrustEvents || c.UserSecretPrefix != "" {
					t.Errorf("%+v", c)
				}
			},
		},
		{
			name: "an executor secret without a mount path: at /secret, as the TESK API mounts it",
			env:  map[string]string{"EXECUTOR_SECRET_NAME": "creds"},
			check: func(t *testing.T, c Config) {
				if c.ExecutorSecret != (jobspec.ExecutorSecret{Name: "creds", MountPath: "/secret"}) {
					t.Errorf("%+v", c.ExecutorSecret)
				}
			},
		},
		{
			name:   "an executor secret name that is not a name",
			env:    map[string]string{"EXECUTOR_SECRET_NAME": "My Secret", "EXECUTOR_SECRET_MOUNT_PATH": "/secret"},
			issues: []string{"error EXECUTOR_SECRET_NAME"},
			check: func(t *testing.T, c Config) {
				if c.ExecutorSecret.Name != "" {
					t.Errorf("%+v", c.ExecutorSecret)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, issues := LoadEnv(DefaultConfig(), func(k string) string { return c.env[k] })
			var got []string
			for _, i := range issues {
				got = append(got, i.Level+" "+i.Name)
				if i.Msg == "" {
					t.Errorf("issue %s without a message", i.Name)
				}
			}
			if !reflect.DeepEqual(got, c.issues) {
				t.Errorf("issues %v (%v), want %v", got, issues, c.issues)
			}
			c.check(t, cfg)
		})
	}
}

// TestLoadEnvIssueNamesTheValue: the error says which value was ignored.
func TestLoadEnvIssueNamesTheValue(t *testing.T) {
	_, issues := LoadEnv(DefaultConfig(), func(k string) string {
		if k == "TASK_TTL_SECONDS" {
			return "forever"
		}
		return ""
	})
	if len(issues) != 1 || !strings.Contains(issues[0].String(), `"forever"`) || !strings.HasPrefix(issues[0].String(), "TASK_TTL_SECONDS: ") {
		t.Errorf("issues %v, want one naming TASK_TTL_SECONDS and its value", issues)
	}
}

func TestParsePodTimeout(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"240", 240 * time.Second, true},
		{" 30 ", 30 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"2147483647", 2147483647 * time.Second, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"", 0, false},
		{"4m", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"2147483648", 0, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParsePodTimeout(c.in)
			if (err == nil) != c.ok || got != c.want {
				t.Errorf("ParsePodTimeout(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// TestFromEnv: the pod timeout from POD_TIMEOUT, or from a command's flag in
// its place; each issue logged at its level (behaviour §3.1); a pod timeout
// or backend parameters that do not parse are an error.
func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	flag := func(s string) *string { return &s }
	cases := []struct {
		name    string
		getenv  func(string) string
		flag    *string
		want    time.Duration
		wantErr string
	}{
		{name: "nothing set", getenv: env(), want: DefaultPodTimeout},
		{name: "POD_TIMEOUT", getenv: env("POD_TIMEOUT", " 30 "), want: 30 * time.Second},
		{name: "a blank POD_TIMEOUT is unset", getenv: env("POD_TIMEOUT", " "), want: DefaultPodTimeout},
		{name: "the flag in place of POD_TIMEOUT", getenv: env("POD_TIMEOUT", "soon"), flag: flag("5"), want: 5 * time.Second},
		{name: "a bad POD_TIMEOUT", getenv: env("POD_TIMEOUT", "soon"), wantErr: "pod timeout"},
		{name: "a bad flag", getenv: env("POD_TIMEOUT", "30"), flag: flag(""), wantErr: "pod timeout"},
		{name: "bad backend parameters", getenv: env("BACKEND_PARAMETERS", "gpu: {max: 0, types: {nvidia.com/gpu: {}}}"), wantErr: "BACKEND_PARAMETERS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := FromEnv(c.getenv, zap.NewNop().Sugar(), c.flag)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one about %s", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.PodTimeout != c.want {
				t.Errorf("pod timeout %v, want %v", cfg.PodTimeout, c.want)
			}
		})
	}

	core, logs := observer.New(zapcore.DebugLevel)
	cfg, err := FromEnv(env("TASK_TTL_SECONDS", "forever", "TESK_FTP_USERNAME", "u", "FILER_PARALLELISM", "8"), zap.New(core).Sugar(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TaskTTL != nil || cfg.FilerParallelism != 8 || cfg.FTPUsername != "u" {
		t.Errorf("config %+v: want LoadEnv's reading of the variables", cfg)
	}
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.ContextMap()["variable"].(string))
	}
	if want := []string{"error TASK_TTL_SECONDS", "warn TESK_FTP_USERNAME"}; !reflect.DeepEqual(got, want) {
		t.Errorf("logged %v, want %v", got, want)
	}
}

func wantInt32(t *testing.T, name string, p *int32, want int32) {
	t.Helper()
	if p == nil || *p != want {
		t.Errorf("%s = %v, want %d", name, p, want)
	}
}

func wantNil(t *testing.T, name string, p *int32) {
	t.Helper()
	if p != nil {
		t.Errorf("%s = %d, want unset", name, *p)
	}
}

func wantDuration(t *testing.T, name string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func wantBool(t *testing.T, name string, got, want bool) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func wantNoFileTransfer(t *testing.T, c Config) {
	t.Helper()
	if c.HostBasePath != "" || c.ContainerBasePath != "" || c.TransferPVCName != "" {
		t.Errorf("host %q container %q pvc %q, want file:// transfers off", c.HostBasePath, c.ContainerBasePath, c.TransferPVCName)
	}
}

// The handler checks FILER_PARALLELISM against the filer's own bounds.
func TestFilerParallelismBoundsAreTheFilers(t *testing.T) {
	if defaultFilerParallelism != filer.DefaultParallelism || maxFilerParallelism != filer.MaxParallelism {
		t.Errorf("handler: default %d, max %d; filer: default %d, max %d",
			defaultFilerParallelism, maxFilerParallelism, filer.DefaultParallelism, filer.MaxParallelism)
	}
}

func wantInt(t *testing.T, name string, got, want int) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

// TestSettingsShapeTheJobs: the settings LoadEnv reads reach the jobs
// (behaviour §3, §3.13).
func TestSettingsShapeTheJobs(t *testing.T) {
	noToken := taskfixtures.NoServiceAccountToken
	t.Run("EXECUTOR_SERVICE_ACCOUNT and EXECUTOR_SECURITY_CONTEXT", func(t *testing.T) {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			return map[string]string{"EXECUTOR_SERVICE_ACCOUNT": "tesk-executor", "EXECUTOR_SECURITY_CONTEXT": `{"runAsNonRoot": true, "runAsUser": 1000}`}[k]
		})
		if len(issues) != 0 {
			t.Fatal(issues)
		}
		ex := jobspec.ExecutorJob(testAnchor, taskWith(1), 0, cfg.Config).Spec.Template.Spec
		noToken(t, ex, "tesk-executor")
		want := &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))}
		if !reflect.DeepEqual(ex.Containers[0].SecurityContext, want) {
			t.Errorf("security context %+v, want EXECUTOR_SECURITY_CONTEXT's", ex.Containers[0].SecurityContext)
		}
		noToken(t, jobspec.FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg.Config).Spec.Template.Spec, "tesk-executor")
	})
	t.Run("EXECUTOR_SECURITY_CONTEXT {}: none", func(t *testing.T) {
		cfg, _ := LoadEnv(DefaultConfig(), func(k string) string { return map[string]string{"EXECUTOR_SECURITY_CONTEXT": "{}"}[k] })
		if sc := jobspec.ExecutorJob(testAnchor, taskWith(1), 0, cfg.Config).Spec.Template.Spec.Containers[0].SecurityContext; sc != nil {
			t.Errorf("security context %+v, want none", sc)
		}
	})
	t.Run("behaviour §3: FILER_*SECURITY_CONTEXT {} leaves the security contexts out; FILER_RESOURCES sets the resources", func(t *testing.T) {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			return map[string]string{
				"FILER_POD_SECURITY_CONTEXT": "{}", "FILER_SECURITY_CONTEXT": "{}",
				"FILER_RESOURCES": `{"limits": {"memory": "1Gi"}}`,
			}[k]
		})
		if len(issues) != 0 {
			t.Fatalf("issues %v", issues)
		}
		ps := jobspec.FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg.Config).Spec.Template.Spec
		if ps.SecurityContext != nil || ps.Containers[0].SecurityContext != nil {
			t.Errorf("security contexts %+v %+v, want none", ps.SecurityContext, ps.Containers[0].SecurityContext)
		}
		want := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: quantity("1Gi")}}
		if !reflect.DeepEqual(ps.Containers[0].Resources, want) {
			t.Errorf("resources %+v, want %+v", ps.Containers[0].Resources, want)
		}
	})
}

func hasMount(c corev1.Container, name, at string, readOnly bool) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name && m.MountPath == at && m.ReadOnly == readOnly {
			return true
		}
	}
	return false
}
