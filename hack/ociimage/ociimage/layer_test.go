package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

// readTar returns the entries of a tar stream in their order.
func readTar(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{h, b})
	}
}

func tarBytes(t *testing.T, tr *Tree) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := tr.WriteTar(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTreeSortedWithParentsAndFixedMetadata(t *testing.T) {
	host := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(host, []byte("#!binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := NewTree().
		Symlink("/usr/bin/env", "/bin/env").
		HostFile("/bin/prog", host, 0o755).
		Dir("/tmp", 0o1777|os.ModeSticky, 0, 0).
		File("/etc/passwd", []byte("root:x:0:0::/root:/bin/sh\n"), 0o644).
		Dir("/home/nonroot", 0o700, 65532, 65532)
	entries := readTar(t, bytes.NewReader(tarBytes(t, tr)))
	var names []string
	for _, e := range entries {
		names = append(names, e.hdr.Name)
		if !e.hdr.ModTime.Equal(Epoch) {
			t.Errorf("%s: time %v, want %v", e.hdr.Name, e.hdr.ModTime, Epoch)
		}
		if e.hdr.Uname != "" || e.hdr.Gname != "" {
			t.Errorf("%s: owner names %q %q, want none", e.hdr.Name, e.hdr.Uname, e.hdr.Gname)
		}
	}
	want := []string{"bin/", "bin/prog", "etc/", "etc/passwd", "home/", "home/nonroot/", "tmp/", "usr/", "usr/bin/", "usr/bin/env"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	byName := map[string]tarEntry{}
	for _, e := range entries {
		byName[e.hdr.Name] = e
	}
	checks := []struct {
		name     string
		typ      byte
		mode     int64
		uid, gid int
	}{
		{"bin/", tar.TypeDir, 0o755, 0, 0},
		{"bin/prog", tar.TypeReg, 0o755, 0, 0},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"usr/bin/env", tar.TypeSymlink, 0o777, 0, 0},
	}
	for _, c := range checks {
		h := byName[c.name].hdr
		if h.Typeflag != c.typ || h.Mode != c.mode || h.Uid != c.uid || h.Gid != c.gid {
			t.Errorf("%s: type %c mode %o owner %d:%d, want %c %o %d:%d", c.name, h.Typeflag, h.Mode, h.Uid, h.Gid, c.typ, c.mode, c.uid, c.gid)
		}
	}
	if got := string(byName["bin/prog"].data); got != "#!binary" {
		t.Errorf("bin/prog holds %q, want the host file's contents", got)
	}
	if got := byName["usr/bin/env"].hdr.Linkname; got != "/bin/env" {
		t.Errorf("usr/bin/env points at %q", got)
	}
	if got, want := tr.Paths()[0], "/bin"; got != want {
		t.Errorf("Paths()[0] = %q, want %q", got, want)
	}
}

func TestTreeSameContentSameBytes(t *testing.T) {
	a := NewTree().File("/a/x", []byte("1"), 0o644).File("/b", []byte("2"), 0o600).Dir("/c", 0o755, 1, 1)
	b := NewTree().Dir("/c", 0o755, 1, 1).File("/b", []byte("2"), 0o600).File("/a/x", []byte("1"), 0o644)
	if !bytes.Equal(tarBytes(t, a), tarBytes(t, b)) {
		t.Fatal("the same entries added in another order give another tar stream")
	}
	c := NewTree().Dir("/c", 0o755, 1, 1).File("/b", []byte("2"), 0o644).File("/a/x", []byte("1"), 0o644)
	if bytes.Equal(tarBytes(t, a), tarBytes(t, c)) {
		t.Fatal("a different mode gives the same tar stream")
	}
}

func TestTreeErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		name string
		tree *Tree
		want string
	}{
		{"relative path", NewTree().File("etc/passwd", nil, 0o644), "not absolute"},
		{"the root", NewTree().Dir("/", 0o755, 0, 0), "names the root"},
		{"missing host file", NewTree().HostFile("/bin/x", missing, 0o755), "no such file"},
		{"host directory as a file", NewTree().HostFile("/bin/x", t.TempDir(), 0o755), "not a regular file"},
		{"two types", NewTree().Dir("/x", 0o755, 0, 0).File("/x", nil, 0o644), "different types"},
		{"file below a file", NewTree().File("/x", nil, 0o644).File("/x/y", nil, 0o644), "not a directory"},
		{"empty link", NewTree().Symlink("/x", ""), "no target"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := c.tree.WriteTar(&buf)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("WriteTar: %v, want an error with %q", err, c.want)
			}
			if _, err := c.tree.Layer(); err == nil {
				t.Fatal("Layer: no error")
			}
		})
	}
}

func TestHostTree(t *testing.T) {
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "Europe"), 0o700))
	must(t, os.WriteFile(filepath.Join(src, "Europe", "Berlin"), []byte("TZif"), 0o600))
	must(t, os.WriteFile(filepath.Join(src, "tool"), []byte("x"), 0o700))
	must(t, os.Symlink("Europe/Berlin", filepath.Join(src, "CET")))
	entries := readTar(t, bytes.NewReader(tarBytes(t, NewTree().HostTree("/usr/share/zoneinfo", src))))
	got := map[string]string{}
	for _, e := range entries {
		got[e.hdr.Name] = string(e.hdr.Typeflag) + " " + strconv.FormatInt(e.hdr.Mode, 8) + " " + e.hdr.Linkname + string(e.data)
	}
	want := map[string]string{
		"usr/":                             "5 755 ",
		"usr/share/":                       "5 755 ",
		"usr/share/zoneinfo/":              "5 755 ",
		"usr/share/zoneinfo/CET":           "2 777 Europe/Berlin",
		"usr/share/zoneinfo/Europe/":       "5 755 ",
		"usr/share/zoneinfo/Europe/Berlin": "0 644 TZif",
		"usr/share/zoneinfo/tool":          "0 755 x",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
