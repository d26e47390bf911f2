package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the time of every file in every layer and of every image's
// creation: a fixed time, so that the same inputs give the same digests.
var Epoch = time.Unix(0, 0).UTC()

// Tree is the content of one layer: directories, files and symbolic links
// by their absolute path in the image. Parent directories that are not
// added explicitly are created as root-owned 0755 directories. Entries are
// written sorted by path with Epoch as their time, so a Tree's tar stream
// depends only on what was added, never on the order of the calls or on
// the host's file times and owners.
type Tree struct {
	entries map[string]*entry
	err     error
}

type entry struct {
	hdr  tar.Header
	data []byte // contents of a regular file given in memory
	src  string // or the host file to copy them from
}

// NewTree returns an empty layer.
func NewTree() *Tree { return &Tree{entries: map[string]*entry{}} }

// clean turns an absolute image path into a tar entry name ("etc/passwd").
func (t *Tree) clean(p string) (string, bool) {
	if !path.IsAbs(p) {
		t.fail(fmt.Errorf("ociimage: path %q is not absolute", p))
		return "", false
	}
	c := strings.TrimPrefix(path.Clean(p), "/")
	if c == "" {
		t.fail(fmt.Errorf("ociimage: path %q names the root", p))
		return "", false
	}
	return c, true
}

func (t *Tree) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

func (t *Tree) put(name string, e *entry) {
	if old, ok := t.entries[name]; ok && old.hdr.Typeflag != e.hdr.Typeflag {
		t.fail(fmt.Errorf("ociimage: /%s added twice with different types", name))
		return
	}
	e.hdr.Name = name
	e.hdr.ModTime = Epoch
	e.hdr.Format = tar.FormatPAX
	t.entries[name] = e
}

// Dir adds a directory; mode may carry fs.ModeSticky (as /tmp's 1777).
func (t *Tree) Dir(p string, mode fs.FileMode, uid, gid int) *Tree {
	if name, ok := t.clean(p); ok {
		t.put(name, &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: tarMode(mode), Uid: uid, Gid: gid}})
	}
	return t
}

// File adds a regular file with the given contents, owned by root.
func (t *Tree) File(p string, data []byte, mode fs.FileMode) *Tree {
	if name, ok := t.clean(p); ok {
		t.put(name, &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: tarMode(mode), Size: int64(len(data))}, data: data})
	}
	return t
}

// HostFile adds a regular file whose contents are read from the host file
// src (following symbolic links) when the layer is written; owned by root.
func (t *Tree) HostFile(p, src string, mode fs.FileMode) *Tree {
	fi, err := os.Stat(src)
	switch {
	case err != nil:
		t.fail(fmt.Errorf("ociimage: %s for %s: %w", src, p, err))
		return t
	case !fi.Mode().IsRegular():
		t.fail(fmt.Errorf("ociimage: %s for %s is not a regular file", src, p))
		return t
	}
	if name, ok := t.clean(p); ok {
		t.put(name, &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: tarMode(mode), Size: fi.Size()}, src: src})
	}
	return t
}

// Symlink adds a symbolic link to target.
func (t *Tree) Symlink(p, target string) *Tree {
	if target == "" {
		t.fail(fmt.Errorf("ociimage: symbolic link %s has no target", p))
		return t
	}
	if name, ok := t.clean(p); ok {
		t.put(name, &entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}})
	}
	return t
}

// HostTree adds the host directory src and everything under it at p:
// directories 0755, files 0644 (0755 if executable by their owner on the
// host), symbolic links as they are, all owned by root. Other kinds of files
// are an error.
func (t *Tree) HostTree(p, src string) *Tree {
	err := filepath.WalkDir(src, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, hp)
		if err != nil {
			return err
		}
		ip := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			t.Dir(ip, 0o755, 0, 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(hp)
			if err != nil {
				return err
			}
			t.Symlink(ip, target)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if fi.Mode()&0o100 != 0 {
				mode = 0o755
			}
			t.HostFile(ip, hp, mode)
		default:
			return fmt.Errorf("ociimage: %s is neither a file, a directory nor a symbolic link", hp)
		}
		return nil
	})
	if err != nil {
		t.fail(err)
	}
	return t
}

// Paths returns the absolute paths of the tree, implied parents included,
// sorted.
func (t *Tree) Paths() []string {
	names := t.names()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "/" + n
	}
	return out
}

// names returns every entry name with the parents that were not added,
// sorted so that a directory precedes its contents.
func (t *Tree) names() []string {
	seen := map[string]bool{}
	for n := range t.entries {
		for d := n; d != "."; d = path.Dir(d) {
			seen[d] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WriteTar writes the tree as an uncompressed tar stream.
func (t *Tree) WriteTar(w io.Writer) error {
	if t.err != nil {
		return t.err
	}
	tw := tar.NewWriter(w)
	for _, n := range t.names() {
		e, ok := t.entries[n]
		if !ok {
			e = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX}}
		} else if e.hdr.Typeflag != tar.TypeDir {
			// A file below another file or link cannot be unpacked.
			for d := path.Dir(n); d != "."; d = path.Dir(d) {
				if p, ok := t.entries[d]; ok && p.hdr.Typeflag != tar.TypeDir {
					return fmt.Errorf("ociimage: /%s is below /%s, which is not a directory", n, d)
				}
			}
		}
		hdr := e.hdr
		hdr.Name = n
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name = n + "/"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("ociimage: /%s: %w", n, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if err := e.copyTo(tw); err != nil {
			return fmt.Errorf("ociimage: /%s: %w", n, err)
		}
	}
	return tw.Close()
}

func (e *entry) copyTo(w io.Writer) error {
	if e.src == "" {
		_, err := w.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.hdr.Size+1))
	if err == nil && n != e.hdr.Size {
		err = fmt.Errorf("%s changed size while the layer was written (%d bytes, want %d)", e.src, n, e.hdr.Size)
	}
	return err
}

// Layer returns the tree as an OCI layer (gzip-compressed tar). The tar
// stream is made once and kept in memory, and so is its compressed form.
func (t *Tree) Layer() (v1.Layer, error) {
	var buf bytes.Buffer
	if err := t.WriteTar(&buf); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching)
}

// tarMode turns permission bits and the sticky, setuid and setgid flags into
// a tar header's mode.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	return mode
}
