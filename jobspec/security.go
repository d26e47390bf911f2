package jobspec

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// What a task's pods may do: the executors' and the filers' identity and
// security contexts (behaviour §3.8, §3.13).

// taskPodIdentity runs a task's pod as the task pods' ServiceAccount,
// without its token (nothing in a task talks to the API server), and
// without the environment variables of the namespace's Services.
func taskPodIdentity(ps *corev1.PodSpec, cfg Config) {
	no := false
	ps.ServiceAccountName = cfg.ExecutorServiceAccount
	ps.AutomountServiceAccountToken = &no
	ps.EnableServiceLinks = &no
}

// ExecutorSecurity is an executor container's security context: the
// operator's (EXECUTOR_SECURITY_CONTEXT, or the default) with what the
// task's own asks for on top, which steps.Admit allows only where it
// chooses the user or takes rights away: the user, the group, non-root, a
// read-only root file system, capabilities dropped (added to those
// dropped), and privilege escalation, privileged mode and the seccomp
// profile only where the operator's leaves them unset.
func ExecutorSecurity(base, task *corev1.SecurityContext) *corev1.SecurityContext {
	if base == nil {
		return task.DeepCopy()
	}
	sc := base.DeepCopy()
	if task == nil {
		return sc
	}
	if task.RunAsUser != nil {
		sc.RunAsUser = task.RunAsUser
	}
	if task.RunAsGroup != nil {
		sc.RunAsGroup = task.RunAsGroup
	}
	if task.RunAsNonRoot != nil && *task.RunAsNonRoot {
		sc.RunAsNonRoot = task.RunAsNonRoot
	}
	if task.ReadOnlyRootFilesystem != nil && *task.ReadOnlyRootFilesystem {
		sc.ReadOnlyRootFilesystem = task.ReadOnlyRootFilesystem
	}
	if c := task.Capabilities; c != nil && len(c.Drop) > 0 {
		if sc.Capabilities == nil {
			sc.Capabilities = &corev1.Capabilities{}
		}
		for _, d := range c.Drop {
			if !slices.Contains(sc.Capabilities.Drop, d) {
				sc.Capabilities.Drop = append(sc.Capabilities.Drop, d)
			}
		}
	}
	if sc.AllowPrivilegeEscalation == nil {
		sc.AllowPrivilegeEscalation = task.AllowPrivilegeEscalation
	}
	if sc.Privileged == nil {
		sc.Privileged = task.Privileged
	}
	if sc.SeccompProfile == nil {
		sc.SeccompProfile = task.SeccompProfile
	}
	if sc.ProcMount == nil {
		sc.ProcMount = task.ProcMount
	}
	if sc.AppArmorProfile == nil {
		sc.AppArmorProfile = task.AppArmorProfile
	}
	return sc
}

// shareTaskVolume puts an executor's pod in the filer pods' fsGroup
// (FILER_POD_SECURITY_CONTEXT's, 65532 by default), so that on storage
// that applies a pod's fsGroup, where the task volume's root and the
// directories the kubelet creates for the executors' mounts are
// group-writable for it, the executors can write whatever user their
// image runs as. The inputs filer makes what it creates writable by all
// (filer.SharedDirMode); on storage that ignores fsGroup (hostPath, a
// local-path provisioner) the kubelet creates the mounts' directories with
// the mode of the volume's root. A task whose pod chose its own fsGroup
// keeps it (behaviour §3.13).
func shareTaskVolume(ps *corev1.PodSpec, cfg Config) {
	f := cfg.FilerPodSecurityContext
	if f == nil || f.FSGroup == nil {
		return
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{}
	}
	if ps.SecurityContext.FSGroup != nil {
		return
	}
	g := *f.FSGroup
	onRootMismatch := corev1.FSGroupChangeOnRootMismatch
	ps.SecurityContext.FSGroup = &g
	ps.SecurityContext.FSGroupChangePolicy = &onRootMismatch
}

// OutputsFilerSecurity is the outputs filer's pod and container security
// context. It must read whatever the executors wrote, as whatever user
// and with whatever mode (a file of mode 0600, a directory of 0700):
//   - Executors may run as root (the operator's executor context does not
//     set runAsNonRoot): the outputs filer runs as user 0, its group and
//     fsGroup the filer's, with the filer's container context, never
//     privileged nor escalating, whose capabilities are replaced by
//     exactly DAC_OVERRIDE, SETUID and SETGID (every other dropped; Pod
//     Security baseline admits them): it reads files of any owner and
//     mode, and writes the file:// transfer volume only through file
//     writers it starts as the filer's own user (FileWriter), which have
//     no capability.
//   - Executors are confined to a non-root user (runAsNonRoot and
//     runAsUser in the operator's executor context): the outputs filer
//     runs as that user (and group), without capabilities, which Pod
//     Security restricted admits; it reads what that user wrote.
//   - Otherwise (non-root images choose their user): the filer's contexts
//     as configured; it reads what the fsGroup or every user may read.
//
// The inputs filer keeps the filer's contexts (behaviour §3.13).
func OutputsFilerSecurity(cfg Config) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	pod, ctr := cfg.FilerPodSecurityContext.DeepCopy(), cfg.FilerSecurityContext.DeepCopy()
	ex := cfg.ExecutorSecurityContext
	switch {
	case outputsFilerIsRoot(cfg):
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		root, no := int64(0), false
		pod.RunAsUser, pod.RunAsNonRoot = &root, nil
		if ctr == nil {
			ctr = &corev1.SecurityContext{}
		}
		ctr.RunAsUser, ctr.RunAsNonRoot = nil, nil
		ctr.Privileged, ctr.AllowPrivilegeEscalation = nil, &no
		ctr.Capabilities = &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  slices.Clone(outputsFilerCapabilities),
		}
	case ex.RunAsUser != nil:
		if pod == nil {
			pod = &corev1.PodSecurityContext{}
		}
		uid := *ex.RunAsUser
		pod.RunAsUser = &uid
		if ex.RunAsGroup != nil {
			gid := *ex.RunAsGroup
			pod.RunAsGroup = &gid
		}
		if ctr != nil {
			ctr.RunAsUser, ctr.RunAsGroup = nil, nil
		}
	}
	return pod, ctr
}

// outputsFilerCapabilities are the root outputs filer's capabilities, and
// all of them: DAC_OVERRIDE to read what executors of any user wrote,
// SETUID and SETGID to start its file writers as the filer's user.
var outputsFilerCapabilities = []corev1.Capability{"DAC_OVERRIDE", "SETGID", "SETUID"}

// outputsFilerIsRoot reports whether the outputs filer runs as root: while
// the operator's executor context lets executors run as root.
func outputsFilerIsRoot(cfg Config) bool {
	ex := cfg.ExecutorSecurityContext
	return ex == nil || ex.RunAsNonRoot == nil || !*ex.RunAsNonRoot
}

// FileWriter is the user, group and supplementary groups a root outputs
// filer writes the file:// transfer volume as: the filer's own, as its
// configured contexts run the inputs filer (the container's runAsUser and
// runAsGroup over the pod's; the pod's fsGroup and supplementalGroups),
// and the filer image's user and group 65532 where they set none. A filer
// configured as root writes as 65532 too: root would keep the outputs
// filer's capabilities.
func FileWriter(cfg Config) (uid, gid int64, groups []int64) {
	uid, gid = defaultFilerUID, defaultFilerUID
	if p := cfg.FilerPodSecurityContext; p != nil {
		if p.RunAsUser != nil {
			uid = *p.RunAsUser
		}
		if p.RunAsGroup != nil {
			gid = *p.RunAsGroup
		}
		if p.FSGroup != nil {
			groups = append(groups, *p.FSGroup)
		}
		for _, g := range p.SupplementalGroups {
			if !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	if c := cfg.FilerSecurityContext; c != nil {
		if c.RunAsUser != nil {
			uid = *c.RunAsUser
		}
		if c.RunAsGroup != nil {
			gid = *c.RunAsGroup
		}
	}
	if uid == 0 {
		uid = defaultFilerUID
	}
	return uid, gid, groups
}

// fileWriterEnv tells a root outputs filer whom to write the transfer
// volume as (filer.OptionsFromEnv: FILER_WRITE_AS, FILER_WRITE_GROUPS);
// nothing for a filer that is not root.
func fileWriterEnv(cfg Config) []corev1.EnvVar {
	if !outputsFilerIsRoot(cfg) {
		return nil
	}
	uid, gid, groups := FileWriter(cfg)
	env := []corev1.EnvVar{{Name: "FILER_WRITE_AS", Value: strconv.FormatInt(uid, 10) + ":" + strconv.FormatInt(gid, 10)}}
	if len(groups) > 0 {
		gs := make([]string, len(groups))
		for i, g := range groups {
			gs[i] = strconv.FormatInt(g, 10)
		}
		env = append(env, corev1.EnvVar{Name: "FILER_WRITE_GROUPS", Value: strings.Join(gs, ",")})
	}
	return env
}
