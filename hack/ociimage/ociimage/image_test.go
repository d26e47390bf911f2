package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// serviceImage is a handler image as BuildAll makes it, from a fake
// binary and CA bundle.
func serviceImage(t *testing.T, binary string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	ca, bin := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "handler")
	must(t, os.WriteFile(ca, []byte("certs"), 0o644))
	must(t, os.WriteFile(bin, []byte(binary), 0o755))
	img, err := NewImage(ServiceConfig(Handler),
		LayerSpec{Tree: BaseTree(ca, ""), CreatedBy: "base"},
		LayerSpec{Tree: BinaryTree(Handler, bin), CreatedBy: "COPY /out/handler /handler"})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestServiceImageConfig(t *testing.T) {
	img := serviceImage(t, "program")
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{"/handler"}) || c.Cmd != nil {
		t.Errorf("entrypoint %q cmd %q, want [/handler] and none", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q", c.User)
	}
	if got := PortList(cf); !reflect.DeepEqual(got, []string{"8080/tcp"}) {
		t.Errorf("exposed ports %q", got)
	}
	if !reflect.DeepEqual(c.Env, []string{DefaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}) {
		t.Errorf("env %q", c.Env)
	}
	if c.WorkingDir != "/home/nonroot" {
		t.Errorf("working directory %q", c.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(Epoch) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if len(cf.RootFS.DiffIDs) != 2 || len(cf.History) != 2 || cf.History[1].CreatedBy != "COPY /out/handler /handler" {
		t.Errorf("rootfs %v history %+v, want two layers", cf.RootFS.DiffIDs, cf.History)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(Epoch) {
			t.Errorf("history created %v", h.Created)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types %s, %s", m.MediaType, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s", l.MediaType)
		}
	}

	// The filer exposes nothing; the stand-ins run sh.
	if p := ServiceConfig(Filer).ExposedPorts; p != nil {
		t.Errorf("the filer exposes %q", p)
	}
	if c := StandInConfig(); !reflect.DeepEqual(c.Cmd, []string{"sh"}) || !strings.Contains(c.Labels[StandInLabel], "stand-in") {
		t.Errorf("stand-in config %+v", c)
	}
	if c := PauseConfig(); !reflect.DeepEqual(c.Entrypoint, []string{"/pause"}) {
		t.Errorf("pause config %+v", c)
	}
}

func TestImageFiles(t *testing.T) {
	img := serviceImage(t, "program")
	files := map[string]*tar.Header{}
	var data []byte
	rc := mutate.Extract(img)
	defer rc.Close()
	for _, e := range readTar(t, rc) {
		files[strings.TrimSuffix(e.hdr.Name, "/")] = e.hdr
		if e.hdr.Name == "handler" {
			data = e.data
		}
	}
	if h := files["handler"]; h == nil || h.Mode != 0o755 || string(data) != "program" {
		t.Errorf("/handler: %+v %q", h, data)
	}
	for _, p := range []string{"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "home/nonroot", "tmp"} {
		if files[p] == nil {
			t.Errorf("no /%s in the image", p)
		}
	}
}

func TestImageDigestIsReproducible(t *testing.T) {
	a, b, c := serviceImage(t, "program"), serviceImage(t, "program"), serviceImage(t, "program 2")
	da, _ := a.Digest()
	db, _ := b.Digest()
	dc, _ := c.Digest()
	if da != db {
		t.Errorf("the same inputs give %s and %s", da, db)
	}
	if da == dc {
		t.Errorf("another binary gives the same digest %s", da)
	}
	if _, err := NewImage(Config{}); err == nil {
		t.Error("an image without layers: no error")
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"busybox":                       {"docker.io/library/busybox:latest", "latest"},
		"busybox:1.36":                  {"docker.io/library/busybox:1.36", "1.36"},
		"docker.io/library/alpine:3":    {"docker.io/library/alpine:3", "3"},
		"ghcr.io/x/tesk-knative-filer":  {"ghcr.io/x/tesk-knative-filer:latest", "latest"},
		"localhost:5000/a/b:v1":         {"localhost:5000/a/b:v1", "v1"},
		"registry.k8s.io/pause:3.10.2":  {"registry.k8s.io/pause:3.10.2", "3.10.2"},
		"dev.local/tesk-knative-tes:t1": {"dev.local/tesk-knative-tes:t1", "t1"},
	} {
		got, err := ParseRef(in)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "UPPER/case", "a:b:c", "busybox@sha256:" + strings.Repeat("0", 64), "x y"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q): no error", bad)
		}
	}
}

func TestWriteArchiveReadsBack(t *testing.T) {
	img := serviceImage(t, "program")
	want, _ := img.Digest()
	wantCfg, _ := img.ConfigName()
	wantLayers := layerDigests(t, img)
	dir := t.TempDir()
	path := filepath.Join(dir, "handler.tar")
	refs := []string{"ghcr.io/x/handler:v1", "busybox:1.36", "ghcr.io/x/handler:v1"}
	must(t, WriteArchive(path, img, refs...))

	// As docker save's format: manifest.json, read by go-containerregistry's
	// tarball package (what crane push uses).
	for _, tag := range []string{"ghcr.io/x/handler:v1", "busybox:1.36", "index.docker.io/library/busybox:1.36"} {
		tg, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		back, err := tarball.ImageFromPath(path, &tg)
		if err != nil {
			t.Fatalf("tarball.ImageFromPath(%s): %v", tag, err)
		}
		// manifest.json has no manifest: the tarball package makes a Docker
		// one, so the same config and layers are what must come back.
		if got, _ := back.ConfigName(); got != wantCfg {
			t.Errorf("%s reads back with config %s, want %s", tag, got, wantCfg)
		}
		if got := layerDigests(t, back); !reflect.DeepEqual(got, wantLayers) {
			t.Errorf("%s reads back with layers %v, want %v", tag, got, wantLayers)
		}
		cf, err := back.ConfigFile()
		if err != nil || cf.Config.User != "65532:65532" {
			t.Errorf("%s config: %+v %v", tag, cf, err)
		}
	}
	back, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers %d %v", len(layers), err)
	}
	for _, l := range layers {
		if _, err := l.Uncompressed(); err != nil {
			t.Error(err)
		}
	}

	entries := readTar(t, bytes.NewReader(readFile(t, path)))
	var names []string
	files := map[string][]byte{}
	for _, e := range entries {
		names = append(names, e.hdr.Name)
		files[e.hdr.Name] = e.data
		if !e.hdr.ModTime.Equal(Epoch) || e.hdr.Uid != 0 || e.hdr.Gid != 0 {
			t.Errorf("%s: time %v owner %d:%d", e.hdr.Name, e.hdr.ModTime, e.hdr.Uid, e.hdr.Gid)
		}
	}
	if !sortedStrings(names) {
		t.Errorf("entries not sorted: %q", names)
	}
	var dm tarball.Manifest
	must(t, json.Unmarshal(files["manifest.json"], &dm))
	if len(dm) != 1 || !reflect.DeepEqual(dm[0].RepoTags, []string{"ghcr.io/x/handler:v1", "docker.io/library/busybox:1.36"}) {
		t.Fatalf("manifest.json %+v", dm)
	}
	if dm[0].Config != "blobs/sha256/"+wantCfg.Hex || len(dm[0].Layers) != 2 {
		t.Errorf("manifest.json config %s layers %q", dm[0].Config, dm[0].Layers)
	}
	for _, l := range append([]string{dm[0].Config}, dm[0].Layers...) {
		if _, ok := files[l]; !ok {
			t.Errorf("manifest.json names %s, which the tarball lacks", l)
		}
	}
	if got := string(files["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion": "1.0.0"`) {
		t.Errorf("oci-layout %q", got)
	}

	// As an OCI image layout, untarred.
	unpacked := filepath.Join(dir, "layout")
	for n, b := range files {
		p := filepath.Join(unpacked, filepath.FromSlash(n))
		if strings.HasSuffix(n, "/") {
			must(t, os.MkdirAll(p, 0o755))
			continue
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, b, 0o644))
	}
	idx, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := []map[string]string{
		{AnnotationRefName: "v1", AnnotationImageName: "ghcr.io/x/handler:v1"},
		{AnnotationRefName: "1.36", AnnotationImageName: "docker.io/library/busybox:1.36"},
	}
	if len(im.Manifests) != len(wantAnn) {
		t.Fatalf("index.json has %d manifests, want %d", len(im.Manifests), len(wantAnn))
	}
	for i, d := range im.Manifests {
		if d.Digest != want || d.MediaType != types.OCIManifestSchema1 || !reflect.DeepEqual(d.Annotations, wantAnn[i]) {
			t.Errorf("index.json manifest %d: %+v", i, d)
		}
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH {
			t.Errorf("index.json manifest %d platform %+v", i, d.Platform)
		}
		li, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := li.Digest(); got != want {
			t.Errorf("layout image %s", got)
		}
	}

	// The same image and names give the same bytes.
	again := filepath.Join(dir, "again.tar")
	must(t, WriteArchive(again, serviceImage(t, "program"), refs...))
	if !bytes.Equal(readFile(t, path), readFile(t, again)) {
		t.Error("writing the same image twice gives different tarballs")
	}
}

func TestWriteArchiveBadNamesWriteNothing(t *testing.T) {
	img := serviceImage(t, "program")
	dir := t.TempDir()
	path := filepath.Join(dir, "x.tar")
	for _, refs := range [][]string{nil, {"ok:1", "Not/Valid"}, {"busybox@sha256:" + strings.Repeat("a", 64)}} {
		if err := WriteArchive(path, img, refs...); err == nil {
			t.Errorf("names %q: no error", refs)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("a failed write left %v", ents)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] > s[i] {
			return false
		}
	}
	return true
}

func layerDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Hash
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}
