package steps

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/elixir-cloud-aai/tesk-knative/taskmeta"
	"github.com/elixir-cloud-aai/tesk-knative/taskspec"
)

func i64(v int64) *int64 { return &v }

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
			got := BuildExecutorJob(testAnchor, c.task, 0, cfg).Spec.Template.Spec.SecurityContext
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("pod security context %+v, want %+v", got, c.want)
			}
		})
	}
}

// behaviour §3.13: the outputs filer reads what executors of any user
// wrote: as root with DAC_OVERRIDE alone while executors may run as root,
// as the executors' user when the operator confines them to one; the
// inputs filer keeps the filer's contexts.
func TestOutputsFilerReadsWhatExecutorsWrote(t *testing.T) {
	task := taskWith(1, withInput, withOutput)
	def := DefaultConfig()
	in := BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, task, def).Spec.Template.Spec
	if !reflect.DeepEqual(in.SecurityContext, DefaultFilerPodSecurityContext()) || !reflect.DeepEqual(in.Containers[0].SecurityContext, DefaultFilerSecurityContext()) {
		t.Errorf("inputs filer %+v %+v, want the filer's defaults", in.SecurityContext, in.Containers[0].SecurityContext)
	}

	out := BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, task, def).Spec.Template.Spec
	wantPod := DefaultFilerPodSecurityContext()
	wantPod.RunAsUser, wantPod.RunAsNonRoot = i64(0), nil
	wantCtr := DefaultFilerSecurityContext()
	wantCtr.Capabilities.Add = []corev1.Capability{"DAC_OVERRIDE"}
	if !reflect.DeepEqual(out.SecurityContext, wantPod) {
		t.Errorf("outputs filer pod %+v, want %+v", out.SecurityContext, wantPod)
	}
	if !reflect.DeepEqual(out.Containers[0].SecurityContext, wantCtr) {
		t.Errorf("outputs filer container %+v, want %+v", out.Containers[0].SecurityContext, wantCtr)
	}
	if def.FilerPodSecurityContext.RunAsUser == nil || *def.FilerPodSecurityContext.RunAsUser != defaultFilerUID {
		t.Errorf("building the outputs filer changed the configuration: %+v", def.FilerPodSecurityContext)
	}

	yes := true
	confined := DefaultConfig()
	confined.ExecutorSecurityContext = &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(1234), RunAsGroup: i64(1235)}
	out = BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, task, confined).Spec.Template.Spec
	wantPod = DefaultFilerPodSecurityContext()
	wantPod.RunAsUser, wantPod.RunAsGroup = i64(1234), i64(1235)
	if !reflect.DeepEqual(out.SecurityContext, wantPod) || !reflect.DeepEqual(out.Containers[0].SecurityContext, DefaultFilerSecurityContext()) {
		t.Errorf("outputs filer with confined executors %+v %+v", out.SecurityContext, out.Containers[0].SecurityContext)
	}

	images := DefaultConfig()
	images.ExecutorSecurityContext = &corev1.SecurityContext{RunAsNonRoot: &yes}
	out = BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, task, images).Spec.Template.Spec
	if !reflect.DeepEqual(out.SecurityContext, DefaultFilerPodSecurityContext()) || !reflect.DeepEqual(out.Containers[0].SecurityContext, DefaultFilerSecurityContext()) {
		t.Errorf("outputs filer with non-root images %+v %+v", out.SecurityContext, out.Containers[0].SecurityContext)
	}

	none := DefaultConfig()
	none.FilerPodSecurityContext, none.FilerSecurityContext = nil, nil
	out = BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, task, none).Spec.Template.Spec
	if sc := out.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("outputs filer without filer contexts: pod %+v, want user 0", sc)
	}
	if c := out.Containers[0].SecurityContext; c == nil || !reflect.DeepEqual(c.Capabilities, &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"DAC_OVERRIDE"}}) {
		t.Errorf("outputs filer without filer contexts: container %+v", c)
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
			"executor":      BuildExecutorJob(testAnchor, task, 0, cfg).Spec.Template,
			"inputs filer":  BuildFilerJob(testAnchor, taskmeta.PartInputsFiler, task, cfg).Spec.Template,
			"outputs filer": BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, task, cfg).Spec.Template,
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
	// The check can fail: root with DAC_OVERRIDE is not restricted.
	p := BuildFilerJob(testAnchor, taskmeta.PartOutputsFiler, taskWith(1, withOutput), DefaultConfig()).Spec.Template
	allowed := true
	for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &p.ObjectMeta, &p.Spec) {
		allowed = allowed && r.Allowed
	}
	if allowed {
		t.Error("the default outputs filer passes restricted, which refuses root and added capabilities")
	}
}
