package ociimage

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
)

// The user the service images run as, as in distroless/static:nonroot.
const (
	NonrootUID  = 65532
	NonrootHome = "/home/nonroot"
)

// Host files the images are made from.
const (
	// HostCACertificates is the CA bundle of Debian's ca-certificates.
	HostCACertificates = "/etc/ssl/certs/ca-certificates.crt"
	// HostZoneinfo is the time zone database of Debian's tzdata.
	HostZoneinfo = "/usr/share/zoneinfo"
	// HostBusybox is Debian's busybox-static.
	HostBusybox = "/bin/busybox"
)

// CACertificates is where the base puts the CA bundle, and SSL_CERT_FILE.
const CACertificates = "/etc/ssl/certs/ca-certificates.crt"

const (
	basePasswd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	baseGroup = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"tty:x:5:\n" +
		"staff:x:50:\n" +
		"nonroot:x:65532:\n"
	nsswitch = "hosts: files dns\n"
)

// BaseTree is the layer the handler, TES API and filer images start from,
// what distroless/static:nonroot gives: the CA bundle at CACertificates
// (copied from caCerts, the host's bundle), /etc/passwd and /etc/group with
// root, nobody and nonroot (65532), /etc/nsswitch.conf, /root (0700),
// /home/nonroot owned by 65532, /tmp with mode 1777, and, if zoneinfo is
// not empty, that host directory as /usr/share/zoneinfo. No shell, no
// other programs.
func BaseTree(caCerts, zoneinfo string) *Tree {
	t := NewTree().
		Dir("/etc", 0o755, 0, 0).
		File("/etc/passwd", []byte(basePasswd), 0o644).
		File("/etc/group", []byte(baseGroup), 0o644).
		File("/etc/nsswitch.conf", []byte(nsswitch), 0o644).
		Dir("/etc/ssl/certs", 0o755, 0, 0).
		HostFile(CACertificates, caCerts, 0o644).
		Dir("/root", 0o700, 0, 0).
		Dir("/home", 0o755, 0, 0).
		Dir(NonrootHome, 0o700, NonrootUID, NonrootUID).
		Dir("/tmp", 0o1777|os.ModeSticky, 0, 0).
		Dir("/var", 0o755, 0, 0)
	if zoneinfo != "" {
		t.HostTree("/usr/share/zoneinfo", zoneinfo)
	}
	return t
}

// BinaryTree is the layer with one program at /name (mode 0755).
func BinaryTree(name, bin string) *Tree {
	return NewTree().HostFile("/"+name, bin, 0o755)
}

const (
	busyboxPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/home:/bin/false\n"
	busyboxGroup = "root:x:0:\n" +
		"nogroup:x:65534:\n"
)

// BusyboxTree is the root file system of the stand-in images: busybox (a
// static binary, copied from bin) at /bin/busybox with a symbolic link in
// /bin for each of its applets, /etc/passwd (root, nobody), /etc/group,
// /root, /tmp (1777) and /usr/bin/env for "#!/usr/bin/env" scripts.
func BusyboxTree(bin string, applets []string) (*Tree, error) {
	if len(applets) == 0 {
		return nil, fmt.Errorf("ociimage: no busybox applets")
	}
	t := NewTree().
		Dir("/bin", 0o755, 0, 0).
		HostFile("/bin/busybox", bin, 0o755).
		Dir("/etc", 0o755, 0, 0).
		File("/etc/passwd", []byte(busyboxPasswd), 0o644).
		File("/etc/group", []byte(busyboxGroup), 0o644).
		File("/etc/nsswitch.conf", []byte(nsswitch), 0o644).
		Dir("/root", 0o700, 0, 0).
		Dir("/tmp", 0o1777|os.ModeSticky, 0, 0).
		Dir("/home", 0o755, 0, 0).
		Dir("/usr/bin", 0o755, 0, 0).
		Dir("/var", 0o755, 0, 0).
		Symlink("/usr/bin/env", "/bin/env")
	for _, a := range applets {
		if a == "busybox" {
			continue
		}
		if a == "" || strings.ContainsAny(a, "/ \t\n") || a == "." || a == ".." {
			return nil, fmt.Errorf("ociimage: %q is not an applet name", a)
		}
		t.Symlink(path.Join("/bin", a), "busybox")
	}
	return t, nil
}

// BusyboxApplets returns the applets the busybox binary bin provides
// (busybox --list), sorted. bin must be a static executable: it is run on
// the host and then copied into images that have no libraries.
func BusyboxApplets(bin string) ([]string, error) {
	if err := CheckStatic(bin); err != nil {
		return nil, fmt.Errorf("%w (install Debian's busybox-static: apt-get install busybox-static)", err)
	}
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s --list: %w", bin, err)
	}
	var applets []string
	for _, f := range strings.Fields(string(out)) {
		applets = append(applets, f)
	}
	sort.Strings(applets)
	if len(applets) == 0 {
		return nil, fmt.Errorf("ociimage: %s --list printed no applets", bin)
	}
	return applets, nil
}

// CheckStatic returns an error unless file is an ELF executable without an
// interpreter (a statically linked program).
func CheckStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("ociimage: %s is not an ELF executable: %w", file, err)
	}
	defer f.Close()
	if err := staticELF(f); err != nil {
		return fmt.Errorf("ociimage: %s is %w", file, err)
	}
	return nil
}

// StaticELF returns an error unless data is an ELF executable without an
// interpreter.
func StaticELF(data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	return staticELF(f)
}

func staticELF(f *elf.File) error {
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("an ELF file of type %v, not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (interpreter in its program headers)")
		}
	}
	return nil
}
