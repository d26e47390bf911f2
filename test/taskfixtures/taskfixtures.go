// Package taskfixtures holds the tasks the tests of the engine, of its
// runner and of the job builders share: executors' jobs as the TESK API
// writes them, and tasks made of them (taskfixtures.go); a task's anchor,
// jobs and pods as the cluster shows them (objects.go); the backend
// parameters' placement and what it makes of the pods (backendparams.go).
// Tests only.
package taskfixtures

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// ExecutorSpec is an executor's job as the TESK API converts it.
func ExecutorSpec(i int, image string) batchv1.Job {
	return batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "api-given-name",
			Labels:      map[string]string{"job-type": "executor", "executor-no": "99", "creator-user-id": "user-1"},
			Annotations: map[string]string{"tes-task-name": "hello"},
		},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"creator-user-id": "user-1"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    "task-1234abcd-ex-" + string(rune('0'+i)),
						Image:   image,
						Command: []string{"sh", "-c", "echo hello"},
					}},
				},
			},
		},
	}
}

// TaskWith returns a task with n executors, changed by mods.
func TaskWith(n int, mods ...func(*taskspec.Task)) *taskspec.Task {
	t := &taskspec.Task{Resources: taskspec.Resources{DiskGB: 2}}
	for i := 0; i < n; i++ {
		t.Executors = append(t.Executors, ExecutorSpec(i, "alpine:3"))
	}
	for _, m := range mods {
		m(t)
	}
	return t
}

// WithInput adds an https input file.
func WithInput(t *taskspec.Task) {
	t.Inputs = append(t.Inputs, taskspec.Input{URL: "https://example.org/in.txt", Path: "/data/in/in.txt", Type: taskspec.TypeFile})
}

// WithOutput adds an S3 output file.
func WithOutput(t *taskspec.Task) {
	t.Outputs = append(t.Outputs, taskspec.Output{URL: "s3://bucket/out.txt", Path: "/data/out/out.txt", Type: taskspec.TypeFile})
}

// WithVolume adds the volume /scratch.
func WithVolume(t *taskspec.Task) { t.Volumes = append(t.Volumes, "/scratch") }

// TESKAPIExecutor is an executor's job as the TESK API writes it with every
// option it has: the pod template named after the job, the executor
// secret, the pod security context from its ConfigMap, requests and limits,
// environment values, a working directory.
func TESKAPIExecutor() batchv1.Job {
	uid, gid := int64(1000), int64(1000)
	yes := true
	return batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "task-1234abcd-ex-00",
			Labels:      map[string]string{"job-type": "executor", "taskmaster-name": "task-1234abcd", "executor-no": "0", "creator-user-id": "alice"},
			Annotations: map[string]string{"tes-task-name": "align"},
		},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "task-1234abcd-ex-00"},
			Spec: corev1.PodSpec{
				RestartPolicy:   corev1.RestartPolicyNever,
				SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &gid, RunAsNonRoot: &yes},
				Containers: []corev1.Container{{
					Name:       "task-1234abcd-ex-00",
					Image:      "quay.io/biocontainers/bwa:0.7.17",
					Command:    []string{"/bin/sh", "-c", "bwa index /data/ref.fa > /data/out.txt"},
					Env:        []corev1.EnvVar{{Name: "THREADS", Value: "4"}},
					WorkingDir: "/data",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: "tesk-creds", MountPath: "/secret", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "tesk-creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tesk-creds"}}}},
			},
		}},
	}
}

// NoServiceAccountToken checks that a task's pod runs without a
// ServiceAccount token and without the Services' environment, as the
// ServiceAccount sa ("": the namespace's default).
func NoServiceAccountToken(t *testing.T, ps corev1.PodSpec, sa string) {
	t.Helper()
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v, want false", ps.AutomountServiceAccountToken)
	}
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		t.Errorf("enableServiceLinks %v, want false", ps.EnableServiceLinks)
	}
	if ps.ServiceAccountName != sa {
		t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, sa)
	}
}

// ForbiddenExecutorChanges are changes of an admitted executor that the allow-list must
// refuse, each with the field the error must name (behaviour §8.8).
var ForbiddenExecutorChanges = []struct {
	Name  string
	Field string
	Mod   func(j *batchv1.Job)
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

func ptr[T any](v T) *T { return &v }
