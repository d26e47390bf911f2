package steps

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/internal/invalid"
	"github.com/elixir-cloud-aai/tesk-knative/jobspec"
	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
	"github.com/elixir-cloud-aai/tesk-knative/tesv1"
)

// teskAPIExecutor is an executor's job as the TESK API writes it with every
// option it has (test/taskfixtures).
var teskAPIExecutor = taskfixtures.TESKAPIExecutor

func admitConfig() Config {
	cfg := DefaultConfig()
	cfg.ExecutorSecret = jobspec.ExecutorSecret{Name: "tesk-creds", MountPath: "/secret"}
	return cfg
}

// forbidden are changes of an admitted executor that the allow-list must
// refuse, each with the field the error must name (behaviour §8.8).
var forbidden = []struct {
	name  string
	field string
	mod   func(j *batchv1.Job)
}{
	{"a privileged container", "containers[0].securityContext.privileged", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
	}},
	{"privilege escalation", "containers[0].securityContext.allowPrivilegeEscalation", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(true)}
	}},
	{"added capabilities", "containers[0].securityContext.capabilities.add", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
	}},
	{"an unconfined seccomp profile", "containers[0].securityContext.seccompProfile", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
	}},
	{"an unmasked /proc", "containers[0].securityContext.procMount", func(j *batchv1.Job) {
		um := corev1.UnmaskedProcMount
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{ProcMount: &um}
	}},
	{"SELinux options", "containers[0].securityContext.seLinuxOptions", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
	}},
	{"an unconfined AppArmor profile", "containers[0].securityContext.appArmorProfile", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
	}},
	{"a Windows host process", "containers[0].securityContext.windowsOptions", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{HostProcess: ptr(true)}}
	}},
	{"a host path", "spec.template.spec.volumes[1]", func(j *batchv1.Job) {
		ps := &j.Spec.Template.Spec
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	}},
	{"a mount of a host path", "containers[0].volumeMounts[1]", func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "root", MountPath: "/host"})
	}},
	{"another secret", "spec.template.spec.volumes[0]", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Volumes[0].Secret.SecretName = "aws-secret"
	}},
	{"another task's anchor", "spec.template.spec.volumes[1]", func(j *batchv1.Job) {
		ps := &j.Spec.Template.Spec
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "other", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "task-00000000"}}}})
	}},
	{"a projected ServiceAccount token", "spec.template.spec.volumes[1]", func(j *batchv1.Job) {
		ps := &j.Spec.Template.Spec
		ps.Volumes = append(ps.Volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
		}}})
	}},
	{"the executor secret mounted writable", "containers[0].volumeMounts[0]", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].VolumeMounts[0].ReadOnly = false
	}},
	{"the host's PID namespace", "spec.template.spec.hostPID", func(j *batchv1.Job) { j.Spec.Template.Spec.HostPID = true }},
	{"the host's network", "spec.template.spec.hostNetwork", func(j *batchv1.Job) { j.Spec.Template.Spec.HostNetwork = true }},
	{"the host's IPC namespace", "spec.template.spec.hostIPC", func(j *batchv1.Job) { j.Spec.Template.Spec.HostIPC = true }},
	{"a user namespace choice", "spec.template.spec.hostUsers", func(j *batchv1.Job) { j.Spec.Template.Spec.HostUsers = ptr(true) }},
	{"a ServiceAccount", "spec.template.spec.serviceAccountName", func(j *batchv1.Job) { j.Spec.Template.Spec.ServiceAccountName = "tesk-handler" }},
	{"a ServiceAccount token", "spec.template.spec.automountServiceAccountToken", func(j *batchv1.Job) {
		j.Spec.Template.Spec.AutomountServiceAccountToken = ptr(true)
	}},
	{"an init container", "spec.template.spec.initContainers", func(j *batchv1.Job) {
		j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "alpine"}}
	}},
	{"an ephemeral container", "spec.template.spec.ephemeralContainers", func(j *batchv1.Job) {
		j.Spec.Template.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "alpine"}}}
	}},
	{"a second container", "spec.template.spec.containers[1]", func(j *batchv1.Job) {
		ps := &j.Spec.Template.Spec
		ps.Containers = append(ps.Containers, corev1.Container{Name: "sidecar", Image: "alpine"})
	}},
	{"a node chosen by name", "spec.template.spec.nodeName", func(j *batchv1.Job) { j.Spec.Template.Spec.NodeName = "control-plane" }},
	{"a node selector", "spec.template.spec.nodeSelector", func(j *batchv1.Job) {
		j.Spec.Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	}},
	{"tolerations", "spec.template.spec.tolerations", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}},
	{"affinity", "spec.template.spec.affinity.podAffinity", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
	}},
	{"a priority class", "spec.template.spec.priorityClassName", func(j *batchv1.Job) { j.Spec.Template.Spec.PriorityClassName = "system-node-critical" }},
	{"a runtime class", "spec.template.spec.runtimeClassName", func(j *batchv1.Job) { j.Spec.Template.Spec.RuntimeClassName = ptr("privileged") }},
	{"a shared process namespace", "spec.template.spec.shareProcessNamespace", func(j *batchv1.Job) { j.Spec.Template.Spec.ShareProcessNamespace = ptr(true) }},
	{"sysctls", "spec.template.spec.securityContext.sysctls", func(j *batchv1.Job) {
		j.Spec.Template.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "0"}}
	}},
	{"a DNS configuration", "spec.template.spec.dnsConfig", func(j *batchv1.Job) {
		j.Spec.Template.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}}
	}},
	{"host aliases", "spec.template.spec.hostAliases", func(j *batchv1.Job) {
		j.Spec.Template.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"kubernetes"}}}
	}},
	{"image pull secrets", "spec.template.spec.imagePullSecrets", func(j *batchv1.Job) {
		j.Spec.Template.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	}},
	{"a restart policy Always", "spec.template.spec.restartPolicy", func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways }},
	{"an environment variable from a secret", "containers[0].env[1].valueFrom", func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "aws-secret"}, Key: "credentials",
		}}})
	}},
	{"an environment variable from a field", "containers[0].env[1].valueFrom", func(j *batchv1.Job) {
		c := &j.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
	}},
	{"environment from a ConfigMap", "containers[0].envFrom", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "tesk-handler-config"}}}}
	}},
	{"a host port", "containers[0].ports", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
	}},
	{"a lifecycle hook the kubelet runs", "containers[0].lifecycle", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Path: "/"}}}
	}},
	{"a probe the kubelet runs", "containers[0].livenessProbe", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.0.0.1", Path: "/"}}}
	}},
	{"resource claims", "containers[0].resources.claims", func(j *batchv1.Job) {
		j.Spec.Template.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}},
	{"another namespace", "metadata.namespace", func(j *batchv1.Job) { j.Namespace = "kube-system" }},
	{"a label of its own", "metadata.labels.app", func(j *batchv1.Job) { j.Labels["app"] = "tesk-handler" }},
	{"an annotation of its own", "metadata.annotations.note", func(j *batchv1.Job) { j.Annotations["note"] = "x" }},
	{"a pod label of its own", "spec.template.metadata.labels.app", func(j *batchv1.Job) {
		j.Spec.Template.Labels = map[string]string{"app.kubernetes.io/name": "tesk-handler", "app": "tesk"}
	}},
	{"pod annotations", "spec.template.metadata.annotations", func(j *batchv1.Job) {
		j.Spec.Template.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/x": "unconfined"}
	}},
	{"finalizers", "metadata.finalizers", func(j *batchv1.Job) { j.Finalizers = []string{"example.org/keep"} }},
	{"owner references", "metadata.ownerReferences", func(j *batchv1.Job) {
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "tesk-handler-config", UID: "x"}}
	}},
	{"a pod selector", "spec.selector", func(j *batchv1.Job) {
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	}},
	{"a manual selector", "spec.manualSelector", func(j *batchv1.Job) { j.Spec.ManualSelector = ptr(true) }},
	{"another manager", "spec.managedBy", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr("example.org/other") }},
	{"a TTL after finishing", "spec.ttlSecondsAfterFinished", func(j *batchv1.Job) { j.Spec.TTLSecondsAfterFinished = ptr(int32(0)) }},
	{"suspended", "spec.suspend", func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }},
	{"more completions", "spec.completions", func(j *batchv1.Job) { j.Spec.Completions = ptr(int32(3)) }},
	{"more parallelism", "spec.parallelism", func(j *batchv1.Job) { j.Spec.Parallelism = ptr(int32(10)) }},
	{"another kind", "kind", func(j *batchv1.Job) { j.Kind = "CronJob" }},
	{"a status", "status", func(j *batchv1.Job) { j.Status.Active = 1 }},
}

func TestAdmitRefusesEachForbiddenField(t *testing.T) {
	cfg := admitConfig()
	for _, c := range forbidden {
		t.Run(c.name, func(t *testing.T) {
			j := teskAPIExecutor()
			c.mod(&j)
			task := &taskspec.Task{Executors: []batchv1.Job{teskAPIExecutor(), j}}
			err := Admit(task, testNS, cfg)
			var refused *RefusedFieldError
			if !errors.As(err, &refused) {
				t.Fatalf("admitted, or %v", err)
			}
			if refused.Executor != 1 || !strings.Contains(refused.Field, c.field) {
				t.Errorf("refused executors[%d] %s, want executors[1] %s", refused.Executor, refused.Field, c.field)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "executors[1]: ") || !strings.Contains(msg, "is not allowed in an executor") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

func TestAdmitAcceptsWhatTheConvertersWrite(t *testing.T) {
	cases := []struct {
		name string
		job  func() batchv1.Job
		cfg  Config
	}{
		{"the TESK API's executor with its secret and security context", teskAPIExecutor, admitConfig()},
		{"the fixtures' executor", func() batchv1.Job { return executorSpec(0, "alpine") }, DefaultConfig()},
		{"a security context that takes rights away", func() batchv1.Job {
			j := executorSpec(0, "alpine")
			j.Spec.Template.Spec.Containers[0].SecurityContext = jobspec.DefaultFilerSecurityContext()
			j.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = ptr(int64(0))
			j.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptr(false)
			j.Spec.Template.Spec.Containers[0].SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
			return j
		}, DefaultConfig()},
		{"a backoff limit, one completion, the job's namespace", func() batchv1.Job {
			j := executorSpec(0, "alpine")
			j.Namespace = testNS
			j.Spec.BackoffLimit, j.Spec.Completions, j.Spec.Parallelism = ptr(int32(2)), ptr(int32(1)), ptr(int32(1))
			return j
		}, DefaultConfig()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			task := &taskspec.Task{Executors: []batchv1.Job{c.job()}}
			if err := Admit(task, testNS, c.cfg); err != nil {
				t.Fatal(err)
			}
			// And as JSON, as the anchor holds it.
			raw, _ := json.Marshal(task)
			decoded, err := taskspec.Decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := Admit(decoded, testNS, c.cfg); err != nil {
				t.Fatalf("after a JSON round trip: %v", err)
			}
		})
	}
	t.Run("EXECUTOR_POD_ANNOTATIONS: the keys and prefixes named, no other", func(t *testing.T) {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			return map[string]string{"EXECUTOR_POD_ANNOTATIONS": " cluster-autoscaler.kubernetes.io/safe-to-evict, fate.tesk.test/ ,"}[k]
		})
		if len(issues) > 0 {
			t.Fatal(issues)
		}
		j := executorSpec(0, "alpine")
		j.Spec.Template.Annotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "fate.tesk.test/delay": "1s", "fate.tesk.test/result": "fail"}
		if err := Admit(&taskspec.Task{Executors: []batchv1.Job{j}}, testNS, cfg); err != nil {
			t.Errorf("allowed annotations refused: %v", err)
		}
		j.Spec.Template.Annotations["container.apparmor.security.beta.kubernetes.io/x"] = "unconfined"
		err := Admit(&taskspec.Task{Executors: []batchv1.Job{j}}, testNS, cfg)
		if err == nil || !strings.Contains(err.Error(), "spec.template.metadata.annotations.container.apparmor") || !strings.Contains(err.Error(), "EXECUTOR_POD_ANNOTATIONS") {
			t.Errorf("another annotation: %v, want a refusal naming it and EXECUTOR_POD_ANNOTATIONS", err)
		}
		if _, issues := LoadEnv(DefaultConfig(), func(k string) string { return map[string]string{"EXECUTOR_POD_ANNOTATIONS": "bad key!,ok/"}[k] }); len(issues) != 1 || issues[0].Name != "EXECUTOR_POD_ANNOTATIONS" {
			t.Errorf("issues %v, want one for the bad key", issues)
		}
	})
	t.Run("the executor secret without EXECUTOR_SECRET_NAME", func(t *testing.T) {
		err := Admit(&taskspec.Task{Executors: []batchv1.Job{teskAPIExecutor()}}, testNS, DefaultConfig())
		if err == nil || !strings.Contains(err.Error(), "EXECUTOR_SECRET_NAME is unset") {
			t.Errorf("%v, want a refusal naming EXECUTOR_SECRET_NAME", err)
		}
	})
}

// TestRefusedTasksCreateNothing: a task whose executor asks for a forbidden
// field ends SYSTEM_ERROR with the field in system_logs, whether the JSON
// came in the event or from the anchor, and no PVC or job is created
// (behaviour §8.8).
func TestRefusedTasksCreateNothing(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range forbidden {
		j := teskAPIExecutor()
		c.mod(&j)
		spec := &taskspec.Task{Executors: []batchv1.Job{j}, Inputs: []taskspec.Input{{Path: "/data/in.txt", Content: "x"}}}
		raw, _ := json.Marshal(spec)
		check := func(t *testing.T, api *fakeAPI, err error) {
			t.Helper()
			if !invalid.Is(err) {
				t.Errorf("error %v, want bad input", err)
			}
			a := api.anchor()
			if a.Annotations[taskmeta.AnnotationState] != tesv1.StateSystemError || !strings.Contains(a.Annotations[taskmeta.AnnotationReason], c.field) {
				t.Errorf("anchor %v, want SYSTEM_ERROR naming %s", a.Annotations, c.field)
			}
			if a.Labels[taskmeta.LabelState] != tesv1.StateSystemError {
				t.Errorf("labels %v, want the final state's", a.Labels)
			}
			if n := api.count("create", "jobs", "") + api.count("create", "persistentvolumeclaims", ""); n != 0 {
				t.Errorf("%d objects created", n)
			}
		}
		t.Run("event: "+c.name, func(t *testing.T) {
			api := newFakeAPI(t)
			_, err := testRunner(api, admitConfig()).Submit(ctx, testNS, testTask, raw, "ev-1")
			check(t, api, err)
		})
		t.Run("anchor: "+c.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: anchorWith(nil), BinaryData: map[string][]byte{taskspec.ConfigMapKey: taskspec.Gzip(raw)}}
			api := newFakeAPI(t, cm)
			_, err := testRunner(api, admitConfig()).Submit(ctx, testNS, testTask, nil, "ev-1")
			check(t, api, err)
		})
	}
}

// TestEventsAreNotTrustedByDefault: without TRUST_EVENTS an event that
// carries the task JSON is refused and creates nothing, not even the
// anchor, while the same task from its anchor runs; and a task.cancelled
// cancels only a task whose anchor is labelled cancelled (behaviour §5.2).
func TestEventsAreNotTrustedByDefault(t *testing.T) {
	ctx := testCtx(t)
	raw, _ := json.Marshal(taskWith(1))
	api := newFakeAPI(t)
	r := testRunner(api, DefaultConfig())
	r.Config.TrustEvents = false
	_, err := r.Submit(ctx, testNS, testTask, raw, "ev-1")
	if !invalid.Is(err) || !strings.Contains(err.Error(), "TRUST_EVENTS") {
		t.Fatalf("error %v, want bad input naming TRUST_EVENTS", err)
	}
	if n := len(api.Actions()); n != 0 {
		t.Errorf("%d requests made, want none", n)
	}

	api = newFakeAPI(t, anchorObject(taskWith(1), anchorWith(nil)))
	r = testRunner(api, DefaultConfig())
	r.Config.TrustEvents = false
	if _, err := r.Submit(ctx, testNS, testTask, nil, "ev-1"); err != nil {
		t.Fatal(err)
	}
	if api.job("ex-00") == nil {
		t.Error("the task from its anchor did not start")
	}

	// A cancel of a running task that nobody labelled: refused, nothing
	// written; once labelled (as the TES API does), it is cancelled.
	p := progressOf(fullParts[:2], "ev-1", ago(time.Minute), fullParts[:2]...)
	api = newFakeAPI(t, anchorObject(taskWith(2, withInput, withOutput), anchorWith(&p)))
	r = testRunner(api, DefaultConfig())
	r.Config.TrustEvents = false
	_, err = r.Cancel(ctx, testNS, testTask, "ev-2")
	if !invalid.Is(err) || !strings.Contains(err.Error(), "TRUST_EVENTS") {
		t.Fatalf("error %v, want bad input naming TRUST_EVENTS", err)
	}
	if n := api.count("patch", "configmaps", ""); n != 0 {
		t.Errorf("%d patches of the anchor", n)
	}
	a := api.anchor()
	a.Labels[taskmeta.LabelStatus] = taskmeta.StatusCancelled
	if _, err := api.CoreV1().ConfigMaps(testNS).Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Cancel(ctx, testNS, testTask, "ev-3"); err != nil || (res.State != tesv1.StateCanceling && res.State != tesv1.StateCanceled) {
		t.Errorf("labelled: %+v %v, want the task cancelled", res, err)
	}
}
