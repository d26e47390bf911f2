package ociimage

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations of index.json's descriptors, as docker save and containerd's
// export write them.
const (
	// AnnotationRefName holds the tag (docker save writes the tag alone).
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationImageName holds the full name, which containerd's import
	// (ctr images import) names the image by.
	AnnotationImageName = "io.containerd.image.name"
)

// Ref is an image name with a tag, parsed.
type Ref struct {
	// Full is the fully qualified name:tag, e.g.
	// docker.io/library/busybox:latest.
	Full string
	// Tag is the tag alone.
	Tag string
}

// ParseRef parses an image reference with a tag (the tag defaults to
// latest, Docker Hub's names are expanded as Docker and containerd expand
// them). A digest reference is an error: a tarball names its images by tag.
func ParseRef(s string) (Ref, error) {
	if strings.Contains(s, "@") {
		return Ref{}, fmt.Errorf("ociimage: image %q: give a name with a tag, not a digest", s)
	}
	t, err := name.NewTag(s)
	if err != nil {
		return Ref{}, fmt.Errorf("ociimage: image %q: %w", s, err)
	}
	reg := t.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return Ref{Full: reg + "/" + t.Context().RepositoryStr() + ":" + t.TagStr(), Tag: t.TagStr()}, nil
}

// WriteArchive writes img to the file path as one tarball named by refs
// (at least one; each name:tag), in the format docker save writes since
// Docker 25: an OCI image layout (oci-layout, index.json with one
// descriptor per name carrying AnnotationRefName and AnnotationImageName,
// blobs/sha256/...) that also holds Docker's manifest.json with RepoTags
// pointing at the same blobs. docker load, containerd's import and
// crane push accept it, and so do go-containerregistry's tarball and
// layout packages. Entries are sorted, with Epoch as their time and root
// as their owner, so the same image and names give the same bytes. The
// file is written under a temporary name and renamed into place: a failed
// write leaves no partial tarball.
func WriteArchive(path string, img v1.Image, refs ...string) error {
	if len(refs) == 0 {
		return errors.New("ociimage: an archive needs at least one image name")
	}
	parsed := make([]Ref, 0, len(refs))
	seen := map[string]bool{}
	for _, r := range refs {
		p, err := ParseRef(r)
		if err != nil {
			return err
		}
		if seen[p.Full] {
			continue
		}
		seen[p.Full] = true
		parsed = append(parsed, p)
	}

	tmp, err := os.MkdirTemp(filepath.Dir(path), ".ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.WriteImage(img); err != nil {
		return fmt.Errorf("ociimage: write the layout: %w", err)
	}
	desc, err := manifestDescriptor(img)
	if err != nil {
		return err
	}
	for _, r := range parsed {
		d := desc
		d.Annotations = map[string]string{AnnotationRefName: r.Tag, AnnotationImageName: r.Full}
		if err := lp.AppendDescriptor(d); err != nil {
			return fmt.Errorf("ociimage: write the layout: %w", err)
		}
	}
	m, err := dockerManifest(img, parsed)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), m, 0o644); err != nil {
		return err
	}

	f, err := os.CreateTemp(tmp, "archive-")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tarDir(f, dir); err != nil {
		return fmt.Errorf("ociimage: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// manifestDescriptor is the index.json entry of img: media type, digest,
// size and platform.
func manifestDescriptor(img v1.Image) (v1.Descriptor, error) {
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	n, err := img.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	p := Platform()
	return v1.Descriptor{MediaType: mt, Digest: d, Size: n, Platform: &p}, nil
}

// dockerManifest is manifest.json: one entry, the config and layers by their
// paths in the layout.
func dockerManifest(img v1.Image, refs []Ref) ([]byte, error) {
	cfg, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	d := tarball.Descriptor{Config: blobPath(cfg)}
	for _, r := range refs {
		d.RepoTags = append(d.RepoTags, r.Full)
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return nil, err
		}
		d.Layers = append(d.Layers, blobPath(h))
	}
	return json.Marshal(tarball.Manifest{d})
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// tarDir writes the files under dir as a tar stream, sorted, directories
// 0755 and files 0644, owned by root, all at Epoch.
func tarDir(w io.Writer, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s is neither a file nor a directory", p)
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: n, ModTime: Epoch, Format: tar.FormatPAX}
		if fi.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, n+"/", 0o755
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.IsDir() {
			continue
		}
		if err := copyFile(tw, filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
