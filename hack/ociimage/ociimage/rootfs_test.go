package ociimage

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func entriesByName(t *testing.T, tr *Tree) map[string]tarEntry {
	t.Helper()
	m := map[string]tarEntry{}
	for _, e := range readTar(t, bytes.NewReader(tarBytes(t, tr))) {
		m[strings.TrimSuffix(e.hdr.Name, "/")] = e
	}
	return m
}

func TestBaseTreeIsDistrolessNonroot(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	must(t, os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	m := entriesByName(t, BaseTree(ca, ""))
	if got := string(m["etc/ssl/certs/ca-certificates.crt"].data); got != "-----BEGIN CERTIFICATE-----\n" {
		t.Errorf("the CA bundle holds %q, want the host's", got)
	}
	passwd := string(m["etc/passwd"].data)
	for _, line := range []string{"root:x:0:0:", "nonroot:x:65532:65532:nonroot:/home/nonroot:"} {
		if !strings.Contains(passwd, "\n"+line) && !strings.HasPrefix(passwd, line) {
			t.Errorf("/etc/passwd has no %q:\n%s", line, passwd)
		}
	}
	group := string(m["etc/group"].data)
	for _, line := range []string{"root:x:0:", "nonroot:x:65532:"} {
		if !strings.Contains(group, line) {
			t.Errorf("/etc/group has no %q:\n%s", line, group)
		}
	}
	if h := m["home/nonroot"].hdr; h == nil || h.Typeflag != tar.TypeDir || h.Uid != NonrootUID || h.Gid != NonrootUID {
		t.Errorf("/home/nonroot: %+v, want a directory owned by 65532:65532", h)
	}
	if h := m["tmp"].hdr; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	if h := m["root"].hdr; h == nil || h.Mode != 0o700 {
		t.Errorf("/root: %+v, want mode 700", h)
	}
	for name, e := range m {
		if strings.HasPrefix(name, "bin") || strings.HasPrefix(name, "usr") || strings.HasPrefix(name, "sbin") {
			t.Errorf("the base has %s; it must have no shell nor programs", name)
		}
		if e.hdr.Typeflag == tar.TypeReg && e.hdr.Mode&0o111 != 0 {
			t.Errorf("the base has the executable file %s", name)
		}
	}

	zi := t.TempDir()
	must(t, os.WriteFile(filepath.Join(zi, "UTC"), []byte("TZif2"), 0o644))
	if got := string(entriesByName(t, BaseTree(ca, zi))["usr/share/zoneinfo/UTC"].data); got != "TZif2" {
		t.Errorf("with a time zone database, /usr/share/zoneinfo/UTC holds %q", got)
	}
	if _, err := BaseTree(filepath.Join(t.TempDir(), "none"), "").Layer(); err == nil {
		t.Error("a missing CA bundle gives no error")
	}
}

func TestBusyboxTree(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "busybox")
	must(t, os.WriteFile(bin, []byte("ELF"), 0o755))
	tr, err := BusyboxTree(bin, []string{"sh", "cat", "busybox", "[", "[["})
	if err != nil {
		t.Fatal(err)
	}
	m := entriesByName(t, tr)
	if h := m["bin/busybox"].hdr; h == nil || h.Typeflag != tar.TypeReg || h.Mode != 0o755 {
		t.Fatalf("/bin/busybox: %+v", h)
	}
	for _, a := range []string{"sh", "cat", "[", "[["} {
		h := m["bin/"+a].hdr
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("/bin/%s: %+v, want a link to busybox", a, h)
		}
	}
	if h := m["usr/bin/env"].hdr; h == nil || h.Linkname != "/bin/env" {
		t.Errorf("/usr/bin/env: %+v", h)
	}
	passwd := string(m["etc/passwd"].data)
	if !strings.HasPrefix(passwd, "root:x:0:0:") || !strings.Contains(passwd, "\nnobody:x:65534:65534:") {
		t.Errorf("/etc/passwd:\n%s", passwd)
	}
	if h := m["tmp"].hdr; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
	if _, ok := m["root"]; !ok {
		t.Error("no /root")
	}

	for _, bad := range [][]string{nil, {"sh", "../etc/x"}, {""}, {"a b"}} {
		if _, err := BusyboxTree(bin, bad); err == nil {
			t.Errorf("applets %q: no error", bad)
		}
	}
}

func TestCheckStatic(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "script")
	must(t, os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755))
	if err := CheckStatic(notELF); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script: %v", err)
	}
	_, err := BusyboxApplets(notELF)
	if err == nil || !strings.Contains(err.Error(), "apt-get install busybox-static") {
		t.Errorf("BusyboxApplets of a script: %v, want the install hint", err)
	}
	if err := StaticELF([]byte("nope")); err == nil {
		t.Error("StaticELF of text: no error")
	}
}
