package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopRealNode takes down what the real node leaves behind once the kubelet
// and containerd have stopped: the processes in its cgroups (containers and
// pause), containerd's shims, every mount under its directory (volumes,
// secrets, network namespaces, overlay snapshots), its cgroups and its
// bridge. It is safe on a half-started node.
func stopRealNode(n *RealNode) error {
	if n == nil {
		return nil
	}
	var errs []error
	if err := stopServices(n); err != nil {
		errs = append(errs, fmt.Errorf("services: %w", err))
	}
	killShims(n.ContainerdSocket)
	if n.CgroupRoot != "" {
		if err := removeCgroups(n.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Dir != "" {
		if err := unmountUnder(n.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if n.Bridge != "" {
		if out, err := exec.Command("ip", "link", "delete", n.Bridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("ip link delete %s: %v: %s", n.Bridge, err, strings.TrimSpace(string(out))))
		}
	}
	return errors.Join(errs...)
}

// killShims kills the runc shims of the containerd listening on socket (they
// run in sessions of their own and outlive containerd).
func killShims(socket string) {
	if socket == "" {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != binShim {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == socket {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// removeCgroups kills every process under root in every hierarchy, then
// removes its cgroups, deepest first.
func removeCgroups(root string) error {
	h, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range h.dirs() {
		top := filepath.Join(d, root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var cgroups []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			cgroups = cgroups[:0]
			alive := 0
			_ = filepath.WalkDir(top, func(p string, de os.DirEntry, err error) error {
				if err != nil || !de.IsDir() {
					return nil
				}
				cgroups = append(cgroups, p)
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						alive++
					}
				}
				return nil
			})
			if alive == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		sort.Slice(cgroups, func(i, j int) bool { return len(cgroups[i]) > len(cgroups[j]) })
		for _, p := range cgroups {
			var err error
			for i := 0; i < 50; i++ {
				if err = syscall.Rmdir(p); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	dir = filepath.Clean(dir)
	var errs []error
	for round := 0; round < 5; round++ {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

func mountsUnder(dir string) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
