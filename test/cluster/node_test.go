package cluster

import (
	"reflect"
	"testing"
)

// The hierarchies of a hybrid cgroup v1 machine (v2 under unified), read
// from its mountinfo.
func TestParseCgroupMounts(t *testing.T) {
	mountinfo := `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
25 24 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
29 25 0:27 / /sys/fs/cgroup/net_cls,net_prio rw,relatime - cgroup cgroup rw,net_cls,net_prio
30 25 0:28 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
31 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
32 30 0:30 / /tmp/with\040space rw - tmpfs tmpfs rw`
	h := parseCgroupMounts(mountinfo)
	want := map[string]string{
		"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "memory": "/sys/fs/cgroup/memory",
		"net_cls": "/sys/fs/cgroup/net_cls,net_prio", "net_prio": "/sys/fs/cgroup/net_cls,net_prio",
		"systemd": "/sys/fs/cgroup/systemd",
	}
	if !reflect.DeepEqual(h.v1, want) {
		t.Errorf("v1 %v, want %v", h.v1, want)
	}
	if h.v2 != "/sys/fs/cgroup/unified" {
		t.Errorf("v2 %q", h.v2)
	}
	dirs := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/net_cls,net_prio", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified"}
	if got := h.dirs(); !reflect.DeepEqual(got, dirs) {
		t.Errorf("dirs %v, want %v", got, dirs)
	}
	if h := parseCgroupMounts("31 25 0:29 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw"); len(h.v1) != 0 || h.v2 != "/sys/fs/cgroup" {
		t.Errorf("pure v2: %+v", h)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/plain`:          "/tmp/plain",
		`/tmp/with\040space`:  "/tmp/with space",
		`/tmp/tab\011and\134`: "/tmp/tab\tand\\",
		`/tmp/trailing\04`:    `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every registry's image is asked of the node's mirror under its
// repository path, as containerd asks a mirror for it.
func TestMirrorRef(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                                "127.0.0.1:5000/library/busybox:latest",
		"docker.io/library/alpine:3":             "127.0.0.1:5000/library/alpine:3",
		"registry.k8s.io/pause:3.10.2":           "127.0.0.1:5000/pause:3.10.2",
		"ghcr.io/elixir-cloud-aai/tesk-filer:v1": "127.0.0.1:5000/elixir-cloud-aai/tesk-filer:v1",
		"tesk-filer:dev":                         "127.0.0.1:5000/library/tesk-filer:dev",
		"quay.io/x/y@sha256:" + sixtyFourHex:     "127.0.0.1:5000/x/y@sha256:" + sixtyFourHex,
	} {
		got, err := MirrorRef(in, "127.0.0.1:5000")
		if err != nil {
			t.Errorf("MirrorRef(%q): %v", in, err)
			continue
		}
		if got.String() != want {
			t.Errorf("MirrorRef(%q) = %s, want %s", in, got, want)
		}
	}
	if _, err := MirrorRef("UPPER/case", "127.0.0.1:5000"); err == nil {
		t.Error("an invalid reference was accepted")
	}
}

const sixtyFourHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Feature gates for the kubelet: read as its --feature-gates flag takes
// them, written into its configuration beside the node's own, which they
// may turn off.
func TestKubeletFeatureGates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]bool
		wantErr bool
	}{
		{"", map[string]bool{}, false},
		{"EventedPLEG=true", map[string]bool{"EventedPLEG": true}, false},
		{" EventedPLEG=true, PodLogsQuerySplitStreams=false ,", map[string]bool{"EventedPLEG": true, "PodLogsQuerySplitStreams": false}, false},
		{"EventedPLEG", nil, true},
		{"EventedPLEG=yes", nil, true},
		{"=true", nil, true},
	} {
		got, err := ParseFeatureGates(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && !reflect.DeepEqual(got, tc.want)) {
			t.Errorf("ParseFeatureGates(%q) = %v, %v; want %v (error %t)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if got, want := kubeletGates(nil), "  PodLogsQuerySplitStreams: true\n"; got != want {
		t.Errorf("kubeletGates(nil) = %q, want %q", got, want)
	}
	if got, want := kubeletGates(map[string]bool{"PodLogsQuerySplitStreams": false, "EventedPLEG": true}),
		"  EventedPLEG: true\n  PodLogsQuerySplitStreams: false\n"; got != want {
		t.Errorf("kubeletGates = %q, want %q", got, want)
	}
}
