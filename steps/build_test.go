package steps

import (
	"path"
	"reflect"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

// The cases cite docs/behaviour.md as decide_test.go does, with its sections
// 2 (options) and 3 (environment variables).

var testAnchor = Anchor{Name: testTask, Namespace: testNS, UID: testUID}

func wantOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	want := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: testTask, UID: testUID}}
	if !reflect.DeepEqual(refs, want) {
		t.Errorf("owner references %+v, want the anchor %+v", refs, want)
	}
}

func TestBuildPVC(t *testing.T) {
	cases := []struct {
		name    string
		diskGB  float64
		deflt   float64
		class   string
		size    string
		classOK func(*string) bool
	}{
		{"behaviour §1.1: the PVC has the task's disk size", 2, 0, "", "2Gi", func(s *string) bool { return s == nil }},
		{"behaviour §1.1: a fractional disk size", 1.5, 0, "", "1536Mi", func(s *string) bool { return s == nil }},
		{"behaviour §1.1: no disk size: 1 GiB", 0, 0, "", "1Gi", func(s *string) bool { return s == nil }},
		{"DEFAULT_DISK_GB sizes a task without disk size", 0, 0.5, "", "512Mi", func(s *string) bool { return s == nil }},
		{"a fraction of a GiB is whole bytes, rounded up (0.1 GiB, the TESK API's default)", 0.1, 0, "", "107374183", func(s *string) bool { return s == nil }},
		{"DEFAULT_DISK_GB leaves the task's own disk size", 3, 0.5, "", "3Gi", func(s *string) bool { return s == nil }},
		{"STORAGE_CLASS_NAME sets the PVC's storage class", 3, 0, "fast", "3Gi", func(s *string) bool { return s != nil && *s == "fast" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.StorageClassName = c.class
			cfg.DefaultDiskGB = c.deflt
			pvc := BuildPVC(testAnchor, taskWith(1, func(tk *taskspec.Task) { tk.Resources.DiskGB = c.diskGB }), cfg)
			if pvc.Name != testTask+"-pvc" || pvc.Namespace != testNS {
				t.Errorf("PVC %s/%s", pvc.Namespace, pvc.Name)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(quantity(c.size)) != 0 || got.MilliValue()%1000 != 0 {
				t.Errorf("size %s, want %s", got.String(), c.size)
			}
			if !c.classOK(pvc.Spec.StorageClassName) {
				t.Errorf("storage class %v", pvc.Spec.StorageClassName)
			}
			if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
				t.Errorf("access modes %v", pvc.Spec.AccessModes)
			}
			if pvc.Labels[taskmeta.LabelTask] != testTask {
				t.Errorf("labels %v", pvc.Labels)
			}
			wantOwner(t, pvc.OwnerReferences)
		})
	}
}

func TestBuildExecutorJob(t *testing.T) {
	t.Run("behaviour §1.4: name, labels, owner and pod template label as TESK's", func(t *testing.T) {
		task := taskWith(2)
		j := BuildExecutorJob(testAnchor, task, 1, DefaultConfig())
		if j.Name != testTask+"-ex-01" || j.Namespace != testNS {
			t.Errorf("job %s/%s", j.Namespace, j.Name)
		}
		for k, v := range map[string]string{taskmeta.LabelTask: testTask, taskmeta.LabelJobType: "executor", taskmeta.LabelExecutorNo: "1", taskmeta.LabelCreator: "user-1"} {
			if j.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, j.Labels[k], v)
			}
		}
		if j.Spec.Template.Labels[taskmeta.LabelTask] != testTask || j.Spec.Template.Labels[taskmeta.LabelCreator] != "user-1" {
			t.Errorf("pod template labels %v", j.Spec.Template.Labels)
		}
		if j.Annotations[taskmeta.AnnotationTaskName] != "hello" {
			t.Errorf("annotations %v: the TESK API's are kept", j.Annotations)
		}
		wantOwner(t, j.OwnerReferences)
		if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("restart policy %s", j.Spec.Template.Spec.RestartPolicy)
		}
		if task.Executors[1].Name != "api-given-name" || task.Executors[1].Labels[taskmeta.LabelTask] != "" {
			t.Error("building the job changed the task")
		}
	})

	t.Run("behaviour §1.2: requests become limits when there are no limits", func(t *testing.T) {
		task := taskWith(1)
		req := corev1.ResourceList{corev1.ResourceCPU: quantity("1"), corev1.ResourceMemory: quantity("1Gi")}
		task.Executors[0].Spec.Template.Spec.Containers[0].Resources.Requests = req
		c := BuildExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if !reflect.DeepEqual(c.Resources.Limits, req) || !reflect.DeepEqual(c.Resources.Requests, req) {
			t.Errorf("resources %+v, want the requests as limits", c.Resources)
		}
		if len(task.Executors[0].Spec.Template.Spec.Containers[0].Resources.Limits) != 0 {
			t.Error("building the job changed the task's resources")
		}
	})

	t.Run("behaviour §1.2: limits that are set are kept", func(t *testing.T) {
		task := taskWith(1)
		res := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("1"), corev1.ResourceMemory: quantity("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: quantity("2Gi")},
		}
		task.Executors[0].Spec.Template.Spec.Containers[0].Resources = res
		c := BuildExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if !reflect.DeepEqual(c.Resources, res) {
			t.Errorf("resources %+v, want %+v", c.Resources, res)
		}
	})

	t.Run("behaviour §1.2: no requests, no limits", func(t *testing.T) {
		c := BuildExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec.Containers[0]
		if c.Resources.Limits != nil || c.Resources.Requests != nil {
			t.Errorf("resources %+v, want none", c.Resources)
		}
	})

	backoff := []struct {
		name string
		env  *int32
		job  *int32
		want int32
	}{
		{"behaviour §1.17: EXECUTOR_BACKOFF_LIMIT sets the executors' backoffLimit", ptr(int32(2)), nil, 2},
		{"behaviour §1.17: EXECUTOR_BACKOFF_LIMIT overrides the job's own limit", ptr(int32(0)), ptr(int32(4)), 0},
		{"behaviour §1.17: without EXECUTOR_BACKOFF_LIMIT the job's own limit is kept", nil, ptr(int32(3)), 3},
		{"behaviour §1.17: without either, executors aren't retried (backoffLimit 0)", nil, nil, 0},
	}
	for _, c := range backoff {
		t.Run(c.name, func(t *testing.T) {
			task := taskWith(1)
			task.Executors[0].Spec.BackoffLimit = c.job
			cfg := DefaultConfig()
			cfg.ExecutorBackoffLimit = c.env
			j := BuildExecutorJob(testAnchor, task, 0, cfg)
			wantInt32(t, "backoffLimit", j.Spec.BackoffLimit, c.want)
		})
	}

	t.Run("behaviour §1.1: each volume and each input and output directory (a DIRECTORY's own path, a FILE's parent) is a subPath of the PVC at its path", func(t *testing.T) {
		task := taskWith(1, func(tk *taskspec.Task) {
			tk.Volumes = []string{"/scratch", "/data/in"}
			tk.Inputs = []taskspec.Input{
				{URL: "https://e.org/a", Path: "/data/in/a.txt"},
				{URL: "https://e.org/ref/", Path: "/ref/genome", Type: taskspec.TypeDirectory},
			}
			tk.Outputs = []taskspec.Output{
				{URL: "s3://b/o", Path: "/data/out/o.txt"},
				{URL: "s3://b/w/", Path: "/results/*/run-?.txt", PathPrefix: "/results"},
				{URL: "s3://b/d/", Path: "/work/sub/deep/*.bam", PathPrefix: "/work/sub"},
			}
		})
		j := BuildExecutorJob(testAnchor, task, 0, DefaultConfig())
		want := []corev1.VolumeMount{
			{Name: "task-volume", MountPath: "/data/in", SubPath: "data/in"},
			{Name: "task-volume", MountPath: "/data/out", SubPath: "data/out"},
			{Name: "task-volume", MountPath: "/ref/genome", SubPath: "ref/genome"},
			{Name: "task-volume", MountPath: "/results", SubPath: "results"},
			{Name: "task-volume", MountPath: "/scratch", SubPath: "scratch"},
			{Name: "task-volume", MountPath: "/work/sub/deep", SubPath: "work/sub/deep"},
		}
		if got := j.Spec.Template.Spec.Containers[0].VolumeMounts; !reflect.DeepEqual(got, want) {
			t.Errorf("mounts\n%+v\nwant\n%+v", got, want)
		}
		wantVol := []corev1.Volume{{Name: "task-volume", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: testTask + "-pvc"},
		}}}
		if got := j.Spec.Template.Spec.Volumes; !reflect.DeepEqual(got, wantVol) {
			t.Errorf("volumes %+v, want %+v", got, wantVol)
		}
	})

	t.Run("behaviour §1.1: a wildcard output is mounted at the pattern's deepest directory without wildcards", func(t *testing.T) {
		task := taskWith(1, func(tk *taskspec.Task) {
			tk.Outputs = []taskspec.Output{{URL: "s3://b/", Path: "/data/*/out.txt", PathPrefix: "/data"}}
		})
		mounts := BuildExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0].VolumeMounts
		want := []corev1.VolumeMount{{Name: "task-volume", MountPath: "/data", SubPath: "data"}}
		if !reflect.DeepEqual(mounts, want) {
			t.Errorf("mounts %+v, want %+v", mounts, want)
		}
	})

	t.Run("behaviour §1.1: without inputs, outputs or volumes nothing is mounted", func(t *testing.T) {
		ps := BuildExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec
		if len(ps.Volumes) != 0 || len(ps.Containers[0].VolumeMounts) != 0 {
			t.Errorf("volumes %+v, mounts %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
		}
	})
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestBuildFilerJob(t *testing.T) {
	t.Run("behaviour §1.1, §1.3, §1.4: names, labels, owner, image, args and task volume", func(t *testing.T) {
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			cfg := DefaultConfig()
			cfg.FilerName, cfg.FilerVersion = "example.org/filer", "0.11.0"
			j := BuildFilerJob(testAnchor, part, nil, cfg)
			if j.Name != testTask+"-"+part || j.Namespace != testNS {
				t.Errorf("job %s/%s", j.Namespace, j.Name)
			}
			if !reflect.DeepEqual(j.Labels, map[string]string{taskmeta.LabelTask: testTask}) {
				t.Errorf("labels %v: the filer jobs have taskmaster-name and no job-type", j.Labels)
			}
			if j.Spec.Template.Labels[taskmeta.LabelTask] != testTask {
				t.Errorf("pod template labels %v", j.Spec.Template.Labels)
			}
			wantOwner(t, j.OwnerReferences)
			c := j.Spec.Template.Spec.Containers[0]
			if c.Image != "example.org/filer:0.11.0" {
				t.Errorf("image %s", c.Image)
			}
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("pull policy %s", c.ImagePullPolicy)
			}
			mode := map[string]string{taskmeta.PartInputsFiler: "inputs", taskmeta.PartOutputsFiler: "outputs"}[part]
			if want := []string{mode, "--file", path.Join("/jsoninput", taskspec.ConfigMapKey)}; !slices.Equal(c.Args, want) {
				t.Errorf("args %v, want %v", c.Args, want)
			}
			if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restart policy %s", j.Spec.Template.Spec.RestartPolicy)
			}
			if j.Spec.BackoffLimit != nil {
				t.Errorf("backoffLimit %d, want Kubernetes' default", *j.Spec.BackoffLimit)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.Name] = m
			}
			if m := mounts["task-volume"]; m.MountPath != taskspec.FilerTaskDir || m.SubPath != "" {
				t.Errorf("task volume mount %+v, want the whole PVC at %s", m, taskspec.FilerTaskDir)
			}
			if m := mounts["jsoninput"]; m.MountPath != "/jsoninput" || !m.ReadOnly {
				t.Errorf("task JSON mount %+v", m)
			}
			vols := map[string]corev1.Volume{}
			for _, v := range j.Spec.Template.Spec.Volumes {
				vols[v.Name] = v
			}
			if v := vols["task-volume"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != testTask+"-pvc" {
				t.Errorf("task volume %+v", v)
			}
			if v := vols["jsoninput"]; v.ConfigMap == nil || v.ConfigMap.Name != testTask {
				t.Errorf("task JSON volume %+v, want the anchor ConfigMap", v)
			}
		}
	})

	t.Run("Options: --pull-policy-always pulls the filer on every start", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.PullPolicyAlways = true
		if p := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
			t.Errorf("pull policy %s", p)
		}
	})

	t.Run("Options: --debug also debugs the filer", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Debug = true
		c := BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec.Containers[0]
		if c.Args[0] != "--debug" {
			t.Errorf("args %v", c.Args)
		}
		if envOf(c)["DEBUG"].Value != "true" {
			t.Errorf("env %v", c.Env)
		}
	})

	t.Run("behaviour §3: FILER_BACKOFF_LIMIT sets the filer's backoffLimit", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.FilerBackoffLimit = ptr(int32(5))
		j := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg)
		wantInt32(t, "backoffLimit", j.Spec.BackoffLimit, 5)
		*cfg.FilerBackoffLimit = 6
		wantInt32(t, "backoffLimit after the config changed", j.Spec.BackoffLimit, 5)
	})

	t.Run("behaviour §3: FILER_PARALLELISM is passed on when set", func(t *testing.T) {
		cfg := DefaultConfig()
		env := envOf(BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		if v, ok := env["FILER_PARALLELISM"]; ok {
			t.Errorf("unset, the filer still gets FILER_PARALLELISM=%q", v.Value)
		}
		cfg.FilerParallelism = 12
		env = envOf(BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		if env["FILER_PARALLELISM"].Value != "12" {
			t.Errorf("FILER_PARALLELISM = %q, want 12", env["FILER_PARALLELISM"].Value)
		}
	})

	t.Run("behaviour §3: FILER_HTTP_TIMEOUT, TESK_FTP_HOSTS, HOST_BASE_PATH and CONTAINER_BASE_PATH are passed on", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.FilerHTTPTimeout = "30"
		cfg.FTPHosts = "ftp.example.org,ftp2.example.org"
		cfg.HostBasePath, cfg.ContainerBasePath = "/mnt/host", "/transfer"
		cfg.FilerAllowedCIDRs = "10.20.0.0/16"
		env := envOf(BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		for k, v := range map[string]string{
			"FILER_HTTP_TIMEOUT": "30", "TESK_FTP_HOSTS": "ftp.example.org,ftp2.example.org", "FILER_ALLOWED_CIDRS": "10.20.0.0/16",
			"HOST_BASE_PATH": "/mnt/host", "CONTAINER_BASE_PATH": "/transfer",
			"AWS_CONFIG_FILE": "/aws/config", "AWS_SHARED_CREDENTIALS_FILE": "/aws/credentials",
		} {
			if env[k].Value != v {
				t.Errorf("%s = %q, want %q", k, env[k].Value, v)
			}
		}
	})

	t.Run("behaviour §3: unset settings are not passed", func(t *testing.T) {
		env := envOf(BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, DefaultConfig()).Spec.Template.Spec.Containers[0])
		for _, k := range []string{"TESK_FTP_USERNAME", "TESK_FTP_PASSWORD", "TESK_FTP_HOSTS", "HOST_BASE_PATH", "CONTAINER_BASE_PATH", "NETRC", "DEBUG", "FILER_ALLOWED_CIDRS"} {
			if _, ok := env[k]; ok {
				t.Errorf("%s passed: %+v", k, env[k])
			}
		}
		if env["FILER_HTTP_TIMEOUT"].Value != "300" {
			t.Errorf("FILER_HTTP_TIMEOUT %q, want 300", env["FILER_HTTP_TIMEOUT"].Value)
		}
	})

	t.Run("behaviour §3: with TESK_FTP_SECRET_NAME the FTP credentials are references to the secret", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.FTPUsername, cfg.FTPPassword, cfg.FTPSecretName = "alice", "s3cret", "ftp-secret"
		env := envOf(BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		for k, key := range map[string]string{"TESK_FTP_USERNAME": "username", "TESK_FTP_PASSWORD": "password"} {
			e := env[k]
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != "ftp-secret" || e.ValueFrom.SecretKeyRef.Key != key {
				t.Errorf("%s = %+v, want a reference to key %s of ftp-secret", k, e, key)
			}
		}
	})

	t.Run("behaviour §3: without TESK_FTP_SECRET_NAME the FTP credentials are values", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.FTPUsername, cfg.FTPPassword = "alice", "s3cret"
		env := envOf(BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		if env["TESK_FTP_USERNAME"].Value != "alice" || env["TESK_FTP_PASSWORD"].Value != "s3cret" {
			t.Errorf("env %+v", env)
		}
	})

	t.Run("behaviour §3: NETRC_SECRET_NAME is mounted and pointed to", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.NetrcSecretName = "my-netrc"
		ps := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec
		if envOf(ps.Containers[0])["NETRC"].Value != "/netrc/.netrc" {
			t.Errorf("NETRC %+v", envOf(ps.Containers[0])["NETRC"])
		}
		if !hasMount(ps.Containers[0], "netrc", "/netrc", true) || !hasSecretVolume(ps, "netrc", "my-netrc", false) {
			t.Errorf("netrc volume missing: %+v %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
		}
	})

	t.Run("behaviour §3: the secret aws-secret is mounted if it exists", func(t *testing.T) {
		ps := BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, DefaultConfig()).Spec.Template.Spec
		if !hasMount(ps.Containers[0], "aws-secret", "/aws", true) || !hasSecretVolume(ps, "aws-secret", "aws-secret", true) {
			t.Errorf("aws-secret volume missing or not optional: %+v", ps.Volumes)
		}
	})

	t.Run("behaviour §3.12: AWS_SECRET_NAME names the S3 secret mounted in place of aws-secret", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AWSSecretName = "s3-creds"
		ps := BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
		if !hasMount(ps.Containers[0], "aws-secret", "/aws", true) || !hasSecretVolume(ps, "aws-secret", "s3-creds", true) {
			t.Errorf("S3 secret volume: %+v", ps.Volumes)
		}
	})

	t.Run("behaviour §3: TRANSFER_PVC_NAME is mounted, writable, at CONTAINER_BASE_PATH", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.TransferPVCName, cfg.ContainerBasePath, cfg.HostBasePath = "transfer-pvc", "/transfer", "/mnt/host"
		ps := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec
		if !hasMount(ps.Containers[0], "transfer", "/transfer", false) {
			t.Errorf("mounts %+v", ps.Containers[0].VolumeMounts)
		}
		found := false
		for _, v := range ps.Volumes {
			if v.Name == "transfer" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "transfer-pvc" {
				found = true
			}
		}
		if !found {
			t.Errorf("volumes %+v", ps.Volumes)
		}
	})

	t.Run("behaviour §3: the filer's default security contexts", func(t *testing.T) {
		ps := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, DefaultConfig()).Spec.Template.Spec
		if !reflect.DeepEqual(ps.SecurityContext, DefaultFilerPodSecurityContext()) {
			t.Errorf("pod security context %+v", ps.SecurityContext)
		}
		if !reflect.DeepEqual(ps.Containers[0].SecurityContext, DefaultFilerSecurityContext()) {
			t.Errorf("security context %+v", ps.Containers[0].SecurityContext)
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
		ps := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec
		if ps.SecurityContext != nil || ps.Containers[0].SecurityContext != nil {
			t.Errorf("security contexts %+v %+v, want none", ps.SecurityContext, ps.Containers[0].SecurityContext)
		}
		want := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: quantity("1Gi")}}
		if !reflect.DeepEqual(ps.Containers[0].Resources, want) {
			t.Errorf("resources %+v, want %+v", ps.Containers[0].Resources, want)
		}
	})
}

func TestParts(t *testing.T) {
	cases := []struct {
		name string
		task *taskspec.Task
		want []string
	}{
		{"behaviour §1.1-§1.3: inputs, executors, outputs", taskWith(2, withInput, withOutput), fullParts},
		{"behaviour §1.1: executors only, no PVC", taskWith(1), []string{"ex-00"}},
		{"behaviour §1.3: volumes need no filer", taskWith(1, withVolume), []string{taskmeta.PartPVC, "ex-00"}},
		{"behaviour §1.1: inputs without outputs", taskWith(1, withInput), []string{taskmeta.PartPVC, taskmeta.PartInputsFiler, "ex-00"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Parts(c.task); !slices.Equal(got, c.want) {
				t.Errorf("Parts = %v, want %v", got, c.want)
			}
		})
	}
}

func hasMount(c corev1.Container, name, at string, readOnly bool) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == name && m.MountPath == at && m.ReadOnly == readOnly {
			return true
		}
	}
	return false
}

func hasSecretVolume(ps corev1.PodSpec, name, secret string, optional bool) bool {
	for _, v := range ps.Volumes {
		if v.Name == name && v.Secret != nil && v.Secret.SecretName == secret {
			return (v.Secret.Optional != nil && *v.Secret.Optional) == optional
		}
	}
	return false
}

// TestTaskPodsAreHardened: executors and filers run without a
// ServiceAccount token and without the Services' environment; executors as
// EXECUTOR_SERVICE_ACCOUNT with the executors' security context, which a
// task may only tighten (behaviour §3.13).
func TestTaskPodsAreHardened(t *testing.T) {
	noToken := func(t *testing.T, ps corev1.PodSpec, sa string) {
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
	t.Run("the defaults", func(t *testing.T) {
		ex := BuildExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec
		noToken(t, ex, "")
		if !reflect.DeepEqual(ex.Containers[0].SecurityContext, DefaultExecutorSecurityContext()) {
			t.Errorf("security context %+v", ex.Containers[0].SecurityContext)
		}
		sc := ex.Containers[0].SecurityContext
		if *sc.AllowPrivilegeEscalation || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc.RunAsUser != nil || sc.RunAsNonRoot != nil {
			t.Errorf("default executor security context %+v: want no escalation, no capabilities, RuntimeDefault, the image's user", sc)
		}
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			noToken(t, BuildFilerJob(testAnchor, part, nil, DefaultConfig()).Spec.Template.Spec, "")
		}
	})
	t.Run("EXECUTOR_SERVICE_ACCOUNT and EXECUTOR_SECURITY_CONTEXT", func(t *testing.T) {
		cfg, issues := LoadEnv(DefaultConfig(), func(k string) string {
			return map[string]string{"EXECUTOR_SERVICE_ACCOUNT": "tesk-executor", "EXECUTOR_SECURITY_CONTEXT": `{"runAsNonRoot": true, "runAsUser": 1000}`}[k]
		})
		if len(issues) != 0 {
			t.Fatal(issues)
		}
		ex := BuildExecutorJob(testAnchor, taskWith(1), 0, cfg).Spec.Template.Spec
		noToken(t, ex, "tesk-executor")
		want := &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))}
		if !reflect.DeepEqual(ex.Containers[0].SecurityContext, want) {
			t.Errorf("security context %+v, want EXECUTOR_SECURITY_CONTEXT's", ex.Containers[0].SecurityContext)
		}
		noToken(t, BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec, "tesk-executor")
	})
	t.Run("EXECUTOR_SECURITY_CONTEXT {}: none", func(t *testing.T) {
		cfg, _ := LoadEnv(DefaultConfig(), func(k string) string { return map[string]string{"EXECUTOR_SECURITY_CONTEXT": "{}"}[k] })
		if sc := BuildExecutorJob(testAnchor, taskWith(1), 0, cfg).Spec.Template.Spec.Containers[0].SecurityContext; sc != nil {
			t.Errorf("security context %+v, want none", sc)
		}
	})
	t.Run("a task's own security context chooses the user and tightens", func(t *testing.T) {
		task := taskWith(1)
		task.Executors[0].Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			RunAsUser: ptr(int64(0)), ReadOnlyRootFilesystem: ptr(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "ALL"}},
		}
		sc := BuildExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0].SecurityContext
		want := DefaultExecutorSecurityContext()
		want.RunAsUser, want.ReadOnlyRootFilesystem = ptr(int64(0)), ptr(true)
		want.Capabilities.Drop = []corev1.Capability{"ALL", "NET_RAW"}
		if !reflect.DeepEqual(sc, want) {
			t.Errorf("security context %+v, want %+v", sc, want)
		}
	})
	t.Run("the executor secret: mounted read-only, once", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.ExecutorSecret = ExecutorSecret{Name: "tesk-creds", MountPath: "/secret"}
		for name, task := range map[string]*taskspec.Task{
			"added (the TES API's job)":      taskWith(1),
			"kept (the TESK API's, with it)": {Executors: []batchv1.Job{teskAPIExecutor()}},
		} {
			ps := BuildExecutorJob(testAnchor, task, 0, cfg).Spec.Template.Spec
			if len(ps.Volumes) != 1 || !hasSecretVolume(ps, "tesk-creds", "tesk-creds", false) || len(ps.Containers[0].VolumeMounts) != 1 || !hasMount(ps.Containers[0], "tesk-creds", "/secret", true) {
				t.Errorf("%s: volumes %+v, mounts %+v", name, ps.Volumes, ps.Containers[0].VolumeMounts)
			}
		}
	})
}

// TestUserCredentials: with FILER_USER_SECRET_PREFIX, the filer of a task
// whose creator is known gets that user's secret, and none of the shared
// credentials; a task without a creator keeps the shared ones (behaviour
// §3.14).
func TestUserCredentials(t *testing.T) {
	cfg := DefaultConfig()
	cfg.UserSecretPrefix = "tesk-user-"
	cfg.NetrcSecretName = "shared-netrc"
	cfg.FTPSecretName = "shared-ftp"
	alice := testAnchor
	alice.Creator = "alice@example.org"
	secret := UserSecretName("tesk-user-", "alice@example.org")
	if secret != "tesk-user-7a64adf28737ea90719c" || len(secret) != len("tesk-user-")+20 {
		// printf %s alice@example.org | sha256sum | cut -c1-20
		t.Errorf("UserSecretName = %q", secret)
	}
	ps := BuildFilerJob(alice, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
	env := envOf(ps.Containers[0])
	if !hasSecretVolume(ps, "aws-secret", secret, true) || !hasMount(ps.Containers[0], "aws-secret", "/tesk/user", true) {
		t.Errorf("volumes %+v mounts %+v, want the user's secret at /tesk/user", ps.Volumes, ps.Containers[0].VolumeMounts)
	}
	if env["TESK_USER_CREDENTIALS"].Value != "/tesk/user" || env["AWS_CONFIG_FILE"].Value != "/tesk/user/config" || env["AWS_SHARED_CREDENTIALS_FILE"].Value != "/tesk/user/credentials" {
		t.Errorf("env %+v", env)
	}
	for _, v := range ps.Volumes {
		if v.Secret != nil && (v.Secret.SecretName == "aws-secret" || v.Secret.SecretName == "shared-netrc") {
			t.Errorf("a shared secret is mounted: %+v", v)
		}
	}
	for _, name := range []string{"NETRC", "TESK_FTP_USERNAME", "TESK_FTP_PASSWORD"} {
		if _, ok := env[name]; ok {
			t.Errorf("%s is set from the shared credentials", name)
		}
	}

	ps = BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
	if !hasSecretVolume(ps, "aws-secret", "aws-secret", true) || !hasSecretVolume(ps, "netrc", "shared-netrc", false) || envOf(ps.Containers[0])["TESK_FTP_USERNAME"].ValueFrom == nil {
		t.Errorf("a task without a creator: volumes %+v", ps.Volumes)
	}

	// The transfer volume is one for all users: a user's task does not
	// get it, a task without a creator does.
	cfg.TransferPVCName, cfg.HostBasePath, cfg.ContainerBasePath = "transfer-pvc", "/transfer", "/transfer"
	for anchor, want := range map[string]bool{"alice": false, "": true} {
		a := testAnchor
		a.Creator = anchor
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			ps := BuildFilerJob(a, part, nil, cfg).Spec.Template.Spec
			if got := hasMount(ps.Containers[0], "transfer", "/transfer", false); got != want {
				t.Errorf("creator %q, %s: transfer volume mounted %v, want %v", anchor, part, got, want)
			}
		}
	}
}
