//go:build integration

package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// builtImages builds every image once for the tests of this file.
func builtImages(t *testing.T) map[string]Built {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	built, err := BuildAll(context.Background(), Options{RepoRoot: root, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]Built{}
	for _, b := range built {
		m[b.Name] = b
	}
	for _, n := range Names {
		if _, ok := m[n]; !ok {
			t.Fatalf("BuildAll built no %s image", n)
		}
	}
	return m
}

type fsEntry struct {
	hdr  *tar.Header
	data []byte
}

// files reads a tarball back with go-containerregistry and returns its
// flattened file system and config.
func files(t *testing.T, b Built) (map[string]fsEntry, *v1.ConfigFile) {
	t.Helper()
	img, err := tarball.ImageFromPath(b.Path, nil)
	if err != nil {
		t.Fatalf("%s: %v", b.Path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	m := map[string]fsEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, cf
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		m["/"+strings.TrimSuffix(h.Name, "/")] = fsEntry{h, data}
	}
}

func TestBuiltImages(t *testing.T) {
	imgs := builtImages(t)
	hostCA, err := os.ReadFile(HostCACertificates)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{Handler, TES, Filer} {
		t.Run(n, func(t *testing.T) {
			fs, cf := files(t, imgs[n])
			bin := fs["/"+n]
			if bin.hdr == nil || bin.hdr.Mode != 0o755 {
				t.Fatalf("/%s: %+v", n, bin.hdr)
			}
			if err := StaticELF(bin.data); err != nil {
				t.Errorf("/%s: %v", n, err)
			}
			if !bytes.Equal(fs[CACertificates].data, hostCA) {
				t.Errorf("%s is not the host's CA bundle (%d bytes)", CACertificates, len(fs[CACertificates].data))
			}
			if !strings.Contains(string(fs["/etc/passwd"].data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd:\n%s", fs["/etc/passwd"].data)
			}
			if h := fs["/home/nonroot"].hdr; h == nil || h.Uid != NonrootUID {
				t.Errorf("/home/nonroot: %+v", h)
			}
			if h := fs["/tmp"].hdr; h == nil || h.Mode != 0o1777 {
				t.Errorf("/tmp: %+v", h)
			}
			for _, sh := range []string{"/bin/sh", "/bin/busybox", "/usr/bin/sh"} {
				if _, ok := fs[sh]; ok {
					t.Errorf("the image has %s", sh)
				}
			}
			c := cf.Config
			if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/" + n}) {
				t.Errorf("user %q entrypoint %q", c.User, c.Entrypoint)
			}
			wantPorts := []string{"8080/tcp"}
			if n == Filer {
				wantPorts = nil
			}
			if got := PortList(cf); !reflect.DeepEqual(got, wantPorts) {
				t.Errorf("exposed ports %q, want %q", got, wantPorts)
			}
		})
	}
	t.Run(Pause, func(t *testing.T) {
		fs, cf := files(t, imgs[Pause])
		if err := StaticELF(fs["/pause"].data); err != nil {
			t.Errorf("/pause: %v", err)
		}
		if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/pause"}) {
			t.Errorf("entrypoint %q", cf.Config.Entrypoint)
		}
		if !reflect.DeepEqual(imgs[Pause].Refs, []string{PauseImage, PauseImageKubernetes}) {
			t.Errorf("pause names %q", imgs[Pause].Refs)
		}
	})
	for _, n := range []string{Busybox, Alpine, Ubuntu} {
		t.Run(n, func(t *testing.T) {
			fs, cf := files(t, imgs[n])
			if err := StaticELF(fs["/bin/busybox"].data); err != nil {
				t.Fatalf("/bin/busybox: %v", err)
			}
			applets, err := BusyboxApplets(HostBusybox)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range append(applets, "sh", "cat", "tr", "echo", "true", "false", "sleep", "sha256sum", "md5sum", "wc", "ls", "env") {
				if a == "busybox" {
					continue
				}
				h := fs["/bin/"+a].hdr
				if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
					t.Errorf("/bin/%s: %+v, want a link to busybox", a, h)
				}
			}
			if !reflect.DeepEqual(cf.Config.Cmd, []string{"sh"}) || cf.Config.Labels[StandInLabel] == "" {
				t.Errorf("config %+v", cf.Config)
			}
			if !reflect.DeepEqual(imgs[n].Refs, StandIns[n]) {
				t.Errorf("names %q, want %q", imgs[n].Refs, StandIns[n])
			}
		})
	}

	// The same sources give the same digests.
	again, err := BuildAll(context.Background(), Options{RepoRoot: "../../..", OutDir: t.TempDir(), Only: []string{Handler, Busybox}})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range again {
		if b.Digest != imgs[b.Name].Digest {
			t.Errorf("%s: built again with digest %s, first %s", b.Name, b.Digest, imgs[b.Name].Digest)
		}
		if !bytes.Equal(readFile(t, b.Path), readFile(t, imgs[b.Name].Path)) {
			t.Errorf("%s: built again, another tarball", b.Name)
		}
	}

	t.Run("crane push", func(t *testing.T) { cranePush(t, imgs[Filer]) })
	t.Run("runc", func(t *testing.T) { runcRun(t, imgs[Busybox], imgs[Pause]) })
}

// cranePush pushes a tarball as crane push does (crane.Load, crane.Push) to
// go-containerregistry's registry and pulls it back.
func cranePush(t *testing.T, b Built) {
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/tesk/filer:test"
	img, err := crane.Load(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := crane.Push(img, ref); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	local, err := tarball.ImageFromPath(b.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	pc, _ := pulled.ConfigName()
	lc, _ := local.ConfigName()
	if pc != lc {
		t.Errorf("pulled config %s, pushed %s", pc, lc)
	}
	if got, want := layerDigests(t, pulled), layerDigests(t, local); !reflect.DeepEqual(got, want) {
		t.Errorf("pulled layers %v, pushed %v", got, want)
	}
}

// runcRun runs the busybox stand-in's shell and the pause image with runc.
func runcRun(t *testing.T, busybox, pause Built) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc is not installed: apt-get install runc (this test runs images with it)")
	}
	state := t.TempDir()
	bundle := unpack(t, busybox, []string{"sh", "-c", "echo ok; echo abc | sha256sum; ls /bin | wc -l"})
	out, err := exec.Command(runc, "--root", state, "run", "--bundle", bundle, fmt.Sprintf("ociimage-sh-%d", os.Getpid())).CombinedOutput()
	if err != nil {
		t.Fatalf("runc run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != "ok" || !strings.HasPrefix(lines[1], "edeaaff3f1774ad2888673770c6d64097e391bc362d7d6fb34982ddf0efd18cb") {
		t.Fatalf("sh in the busybox stand-in printed %q", out)
	}
	t.Logf("busybox stand-in: %q", lines)

	// pause as the container's first process: runs until SIGTERM, exits 0.
	bundle = unpack(t, pause, nil)
	id := fmt.Sprintf("ociimage-pause-%d", os.Getpid())
	cmd := exec.Command(runc, "--root", state, "run", "--bundle", bundle, id)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := exec.Command(runc, "--root", state, "state", id).Output()
		var s struct{ Status string }
		if json.Unmarshal(st, &s) == nil && s.Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the pause container is not running after 30 s: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("pause ended before SIGTERM: %v\n%s", err, logs.String())
	case <-time.After(500 * time.Millisecond):
	}
	if out, err := exec.Command(runc, "--root", state, "kill", id, "TERM").CombinedOutput(); err != nil {
		t.Fatalf("runc kill: %v\n%s", err, out)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("pause after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = exec.Command(runc, "--root", state, "kill", id, "KILL").Run()
		t.Fatalf("pause still runs 30 s after SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "Shutting down, got signal: terminated") {
		t.Errorf("pause printed %q", logs.String())
	}
}

// unpack writes an image's root file system and a runc config (from runc
// spec; args nil keeps the image's entrypoint) into a new bundle.
func unpack(t *testing.T, b Built, args []string) string {
	t.Helper()
	bundle := t.TempDir()
	rootfs := filepath.Join(bundle, "rootfs")
	img, err := tarball.ImageFromPath(b.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(rootfs, filepath.FromSlash(h.Name))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		switch h.Typeflag {
		case tar.TypeDir:
			must(t, os.MkdirAll(p, os.FileMode(h.Mode).Perm()))
		case tar.TypeSymlink:
			must(t, os.Symlink(h.Linkname, p))
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			must(t, err)
			_, err = io.Copy(f, tr)
			must(t, err)
			must(t, f.Close())
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if args == nil {
		args = append(cf.Config.Entrypoint, cf.Config.Cmd...)
	}
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	var spec map[string]any
	must(t, json.Unmarshal(readFile(t, filepath.Join(bundle, "config.json")), &spec))
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = args
	proc["env"] = cf.Config.Env
	spec["root"] = map[string]any{"path": "rootfs", "readonly": true}
	cfg, err := json.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o644))
	return bundle
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
