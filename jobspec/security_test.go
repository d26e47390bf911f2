package jobspec

import (
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
	"github.com/elixir-cloud-aai/tesk-knative/test/taskfixtures"
)

// TestTaskPodsAreHardened: executors and filers run without a
// ServiceAccount token and without the Services' environment; executors as
// EXECUTOR_SERVICE_ACCOUNT with the executors' security context, which a
// task may only tighten (behaviour §3.13).
func TestTaskPodsAreHardened(t *testing.T) {
	noToken := taskfixtures.NoServiceAccountToken
	t.Run("the defaults", func(t *testing.T) {
		ex := ExecutorJob(testAnchor, taskWith(1), 0, DefaultConfig()).Spec.Template.Spec
		noToken(t, ex, "")
		if !reflect.DeepEqual(ex.Containers[0].SecurityContext, DefaultExecutorSecurityContext()) {
			t.Errorf("security context %+v", ex.Containers[0].SecurityContext)
		}
		sc := ex.Containers[0].SecurityContext
		if *sc.AllowPrivilegeEscalation || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc.RunAsUser != nil || sc.RunAsNonRoot != nil {
			t.Errorf("default executor security context %+v: want no escalation, no capabilities, RuntimeDefault, the image's user", sc)
		}
		for _, part := range []string{taskmeta.PartInputsFiler, taskmeta.PartOutputsFiler} {
			noToken(t, FilerJob(testAnchor, part, nil, DefaultConfig()).Spec.Template.Spec, "")
		}
	})
	t.Run("a task's own security context chooses the user and tightens", func(t *testing.T) {
		task := taskWith(1)
		task.Executors[0].Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
			RunAsUser: ptr(int64(0)), ReadOnlyRootFilesystem: ptr(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW", "ALL"}},
		}
		sc := ExecutorJob(testAnchor, task, 0, DefaultConfig()).Spec.Template.Spec.Containers[0].SecurityContext
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
			ps := ExecutorJob(testAnchor, task, 0, cfg).Spec.Template.Spec
			if len(ps.Volumes) != 1 || !hasSecretVolume(ps, "tesk-creds", "tesk-creds", false) || len(ps.Containers[0].VolumeMounts) != 1 || !hasMount(ps.Containers[0], "tesk-creds", "/secret", true) {
				t.Errorf("%s: volumes %+v, mounts %+v", name, ps.Volumes, ps.Containers[0].VolumeMounts)
			}
		}
	})
}

// behaviour §3.13: an executor's pod joins the filers' fsGroup, changed
// only on a root that lacks it; a task's own fsGroup is kept; a task
// without a volume gets none; FILER_POD_SECURITY_CONTEXT without an
// fsGroup gives none.
func TestExecutorsShareTheFilersGroup(t *testing.T) {
	onRoot := corev1.FSGroupChangeOnRootMismatch
	cases := []struct {
		name string
		task *taskspec.Task
		cfg  func(*Config)
		want *corev1.PodSecurityContext
	}{
		{"a task with inputs", taskWith(1, withInput), nil,
			&corev1.PodSecurityContext{FSGroup: i64(defaultFilerUID), FSGroupChangePolicy: &onRoot}},
		{"a task with a volume only", taskWith(1, withVolume), nil,
			&corev1.PodSecurityContext{FSGroup: i64(defaultFilerUID), FSGroupChangePolicy: &onRoot}},
		{"a task without a volume", taskWith(1), nil, nil},
		{"the filer's fsGroup as configured", taskWith(1, withOutput), func(c *Config) {
			c.FilerPodSecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(1000), FSGroup: i64(2000)}
		}, &corev1.PodSecurityContext{FSGroup: i64(2000), FSGroupChangePolicy: &onRoot}},
		{"a filer without an fsGroup", taskWith(1, withOutput), func(c *Config) {
			c.FilerPodSecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(1000)}
		}, nil},
		{"the task's own fsGroup", taskWith(1, withInput, func(t *taskspec.Task) {
			t.Executors[0].Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(5), FSGroup: i64(7)}
		}), nil, &corev1.PodSecurityContext{RunAsUser: i64(5), FSGroup: i64(7)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			got := ExecutorJob(testAnchor, c.task, 0, cfg).Spec.Template.Spec.SecurityContext
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("pod security context %+v, want %+v", got, c.want)
			}
		})
	}
}

// behaviour §3.13: the outputs filer reads what executors of any user
// wrote: as root with exactly DAC_OVERRIDE, SETUID and SETGID (all others
// dropped, whatever FILER_SECURITY_CONTEXT says) while executors may run
// as root, writing the transfer volume through writers of the filer's own
// user (FILER_WRITE_AS, FILER_WRITE_GROUPS); as the executors' user when
// the operator confines them to one; the inputs filer keeps the filer's
// contexts. A root outputs filer passes Pod Security baseline.
func TestOutputsFilerSecurity(t *testing.T) {
	yes, no := true, false
	rootPod := func() *corev1.PodSecurityContext {
		p := DefaultFilerPodSecurityContext()
		p.RunAsUser, p.RunAsNonRoot = i64(0), nil
		return p
	}
	exact := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_OVERRIDE", "SETGID", "SETUID"}}
	rootCtr := func() *corev1.SecurityContext {
		c := DefaultFilerSecurityContext()
		c.Capabilities = exact
		return c
	}
	writeAs := func(as, groups string) map[string]string {
		env := map[string]string{"FILER_WRITE_AS": as}
		if groups != "" {
			env["FILER_WRITE_GROUPS"] = groups
		}
		return env
	}
	confined := &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(1234), RunAsGroup: i64(1235)}
	cases := []struct {
		name    string
		part    string
		cfg     func(*Config)
		wantPod *corev1.PodSecurityContext
		wantCtr *corev1.SecurityContext
		wantEnv map[string]string // FILER_WRITE_*; nil: none
	}{
		{"inputs filer: the filer's contexts", taskmeta.PartInputsFiler, nil,
			DefaultFilerPodSecurityContext(), DefaultFilerSecurityContext(), nil},
		{"the defaults: root, three capabilities, writes as 65532", taskmeta.PartOutputsFiler, nil,
			rootPod(), rootCtr(), writeAs("65532:65532", "65532")},
		{"FILER_SECURITY_CONTEXT adds a capability without dropping ALL", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerSecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
		}, rootPod(), rootCtr(), writeAs("65532:65532", "65532")},
		{"FILER_SECURITY_CONTEXT drops some, adds others, privileged", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerSecurityContext = &corev1.SecurityContext{Privileged: &yes, AllowPrivilegeEscalation: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}, Add: []corev1.Capability{"SYS_ADMIN", "CHOWN"}}}
		}, rootPod(), &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: exact}, writeAs("65532:65532", "65532")},
		{"FILER_SECURITY_CONTEXT without capabilities", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerSecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: &yes}
		}, rootPod(), &corev1.SecurityContext{ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no, Capabilities: exact}, writeAs("65532:65532", "65532")},
		{"no filer contexts: the image's user", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerPodSecurityContext, c.FilerSecurityContext = nil, nil
		}, &corev1.PodSecurityContext{RunAsUser: i64(0)}, &corev1.SecurityContext{AllowPrivilegeEscalation: &no, Capabilities: exact}, writeAs("65532:65532", "")},
		{"the filer's own user, group, fsGroup and supplemental groups", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerPodSecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(1000), RunAsGroup: i64(2000), FSGroup: i64(3000), SupplementalGroups: []int64{4000, 3000}}
		}, &corev1.PodSecurityContext{RunAsUser: i64(0), RunAsGroup: i64(2000), FSGroup: i64(3000), SupplementalGroups: []int64{4000, 3000}},
			rootCtr(), writeAs("1000:2000", "3000,4000")},
		{"the filer container's user over the pod's", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerSecurityContext.RunAsUser, c.FilerSecurityContext.RunAsGroup = i64(1001), i64(2001)
		}, rootPod(), func() *corev1.SecurityContext { c := rootCtr(); c.RunAsGroup = i64(2001); return c }(), writeAs("1001:2001", "65532")},
		{"a filer configured as root writes as 65532", taskmeta.PartOutputsFiler, func(c *Config) {
			c.FilerPodSecurityContext = &corev1.PodSecurityContext{RunAsUser: i64(0), RunAsGroup: i64(0)}
		}, &corev1.PodSecurityContext{RunAsUser: i64(0), RunAsGroup: i64(0)}, rootCtr(), writeAs("65532:0", "")},
		{"executors confined to a user: that user, no capability", taskmeta.PartOutputsFiler, func(c *Config) {
			c.ExecutorSecurityContext = confined
		}, func() *corev1.PodSecurityContext {
			p := DefaultFilerPodSecurityContext()
			p.RunAsUser, p.RunAsGroup = i64(1234), i64(1235)
			return p
		}(), DefaultFilerSecurityContext(), nil},
		{"non-root images: the filer's contexts", taskmeta.PartOutputsFiler, func(c *Config) {
			c.ExecutorSecurityContext = &corev1.SecurityContext{RunAsNonRoot: &yes}
		}, DefaultFilerPodSecurityContext(), DefaultFilerSecurityContext(), nil},
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			before := cfg.FilerSecurityContext.DeepCopy()
			beforePod := cfg.FilerPodSecurityContext.DeepCopy()
			tmpl := FilerJob(testAnchor, c.part, taskWith(1, withInput, withOutput), cfg).Spec.Template
			ps := tmpl.Spec
			if !reflect.DeepEqual(ps.SecurityContext, c.wantPod) {
				t.Errorf("pod %+v\nwant %+v", ps.SecurityContext, c.wantPod)
			}
			if got := ps.Containers[0].SecurityContext; !reflect.DeepEqual(got, c.wantCtr) {
				t.Errorf("container %+v\nwant %+v", got, c.wantCtr)
			}
			var env map[string]string
			for _, e := range ps.Containers[0].Env {
				if strings.HasPrefix(e.Name, "FILER_WRITE_") {
					if env == nil {
						env = map[string]string{}
					}
					env[e.Name] = e.Value
				}
			}
			if !reflect.DeepEqual(env, c.wantEnv) {
				t.Errorf("env %v, want %v", env, c.wantEnv)
			}
			if !reflect.DeepEqual(cfg.FilerSecurityContext, before) || !reflect.DeepEqual(cfg.FilerPodSecurityContext, beforePod) {
				t.Error("building the filer changed the configuration")
			}
			if c.part == taskmeta.PartOutputsFiler && c.wantEnv != nil {
				lv := psaapi.LevelVersion{Level: psaapi.LevelBaseline, Version: psaapi.LatestVersion()}
				for _, r := range eval.EvaluatePod(lv, &tmpl.ObjectMeta, &tmpl.Spec) {
					if !r.Allowed {
						t.Errorf("baseline refuses the root outputs filer: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
					}
				}
			}
		})
	}
}

// Every pod of a task passes the Pod Security level config/knative's
// namespace enforces: baseline with the defaults, restricted with the
// executors confined to a non-root user (the chart's tasksPodSecurity:
// restricted), checked with Kubernetes' own Pod Security evaluator.
func TestTaskPodsMeetPodSecurity(t *testing.T) {
	yes, no := true, false
	restrictedExecutors := &corev1.SecurityContext{
		RunAsNonRoot: &yes, RunAsUser: i64(1000), AllowPrivilegeEscalation: &no,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		level     psaapi.Level
		executors *corev1.SecurityContext
	}{
		{psaapi.LevelBaseline, DefaultExecutorSecurityContext()},
		{psaapi.LevelRestricted, restrictedExecutors},
	} {
		cfg := DefaultConfig()
		cfg.ExecutorSecurityContext = c.executors
		task := taskWith(1, withInput, withOutput, withVolume)
		pods := map[string]corev1.PodTemplateSpec{
			"executor":      ExecutorJob(testAnchor, task, 0, cfg).Spec.Template,
			"inputs filer":  FilerJob(testAnchor, taskmeta.PartInputsFiler, task, cfg).Spec.Template,
			"outputs filer": FilerJob(testAnchor, taskmeta.PartOutputsFiler, task, cfg).Spec.Template,
		}
		for name, p := range pods {
			lv := psaapi.LevelVersion{Level: c.level, Version: psaapi.LatestVersion()}
			for _, r := range eval.EvaluatePod(lv, &p.ObjectMeta, &p.Spec) {
				if !r.Allowed {
					t.Errorf("%s under %s: %s: %s", name, c.level, r.ForbiddenReason, r.ForbiddenDetail)
				}
			}
		}
	}
	// The check can fail: root with capabilities is not restricted.
	p := FilerJob(testAnchor, taskmeta.PartOutputsFiler, taskWith(1, withOutput), DefaultConfig()).Spec.Template
	allowed := true
	for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &p.ObjectMeta, &p.Spec) {
		allowed = allowed && r.Allowed
	}
	if allowed {
		t.Error("the default outputs filer passes restricted, which refuses root and added capabilities")
	}
}
