package jobspec

import (
	"path"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func TestFilerJob(t *testing.T) {
	t.Run("behaviour §1.1, §1.3, §1.4: names, labels, owner, image, args and task volume", func(t *testing.T) {
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			cfg := DefaultConfig()
			cfg.FilerName, cfg.FilerVersion = "example.org/filer", "0.11.0"
			j := FilerJob(testAnchor, part, nil, cfg)
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
		if p := FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
			t.Errorf("pull policy %s", p)
		}
	})

	t.Run("Options: --debug also debugs the filer", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Debug = true
		c := FilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec.Containers[0]
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
		j := FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg)
		wantInt32(t, "backoffLimit", j.Spec.BackoffLimit, 5)
		*cfg.FilerBackoffLimit = 6
		wantInt32(t, "backoffLimit after the config changed", j.Spec.BackoffLimit, 5)
	})

	t.Run("behaviour §3: FILER_PARALLELISM is passed on when set", func(t *testing.T) {
		cfg := DefaultConfig()
		env := envOf(FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		if v, ok := env["FILER_PARALLELISM"]; ok {
			t.Errorf("unset, the filer still gets FILER_PARALLELISM=%q", v.Value)
		}
		cfg.FilerParallelism = 12
		env = envOf(FilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
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
		env := envOf(FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
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
		env := envOf(FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, DefaultConfig()).Spec.Template.Spec.Containers[0])
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
		env := envOf(FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
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
		env := envOf(FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec.Containers[0])
		if env["TESK_FTP_USERNAME"].Value != "alice" || env["TESK_FTP_PASSWORD"].Value != "s3cret" {
			t.Errorf("env %+v", env)
		}
	})

	t.Run("behaviour §3: NETRC_SECRET_NAME is mounted and pointed to", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.NetrcSecretName = "my-netrc"
		ps := FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec
		if envOf(ps.Containers[0])["NETRC"].Value != "/netrc/.netrc" {
			t.Errorf("NETRC %+v", envOf(ps.Containers[0])["NETRC"])
		}
		if !hasMount(ps.Containers[0], "netrc", "/netrc", true) || !hasSecretVolume(ps, "netrc", "my-netrc", false) {
			t.Errorf("netrc volume missing: %+v %+v", ps.Volumes, ps.Containers[0].VolumeMounts)
		}
	})

	t.Run("behaviour §3: the secret aws-secret is mounted if it exists", func(t *testing.T) {
		ps := FilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, DefaultConfig()).Spec.Template.Spec
		if !hasMount(ps.Containers[0], "aws-secret", "/aws", true) || !hasSecretVolume(ps, "aws-secret", "aws-secret", true) {
			t.Errorf("aws-secret volume missing or not optional: %+v", ps.Volumes)
		}
	})

	t.Run("behaviour §3.12: AWS_SECRET_NAME names the S3 secret mounted in place of aws-secret", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.AWSSecretName = "s3-creds"
		ps := FilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
		if !hasMount(ps.Containers[0], "aws-secret", "/aws", true) || !hasSecretVolume(ps, "aws-secret", "s3-creds", true) {
			t.Errorf("S3 secret volume: %+v", ps.Volumes)
		}
	})

	t.Run("behaviour §3: TRANSFER_PVC_NAME is mounted, writable, at CONTAINER_BASE_PATH", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.TransferPVCName, cfg.ContainerBasePath, cfg.HostBasePath = "transfer-pvc", "/transfer", "/mnt/host"
		ps := FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, cfg).Spec.Template.Spec
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
		ps := FilerJob(testAnchor, taskmeta.PartInputsFiler, nil, DefaultConfig()).Spec.Template.Spec
		if !reflect.DeepEqual(ps.SecurityContext, DefaultFilerPodSecurityContext()) {
			t.Errorf("pod security context %+v", ps.SecurityContext)
		}
		if !reflect.DeepEqual(ps.Containers[0].SecurityContext, DefaultFilerSecurityContext()) {
			t.Errorf("security context %+v", ps.Containers[0].SecurityContext)
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
	ps := FilerJob(alice, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
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

	ps = FilerJob(testAnchor, taskmeta.PartOutputsFiler, nil, cfg).Spec.Template.Spec
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
			ps := FilerJob(a, part, nil, cfg).Spec.Template.Spec
			if got := hasMount(ps.Containers[0], "transfer", "/transfer", false); got != want {
				t.Errorf("creator %q, %s: transfer volume mounted %v, want %v", anchor, part, got, want)
			}
		}
	}
}
