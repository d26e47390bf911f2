package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The images' names, as -only and Options.Only take them.
const (
	Handler = "handler"
	TES     = "tes"
	Filer   = "filer"
	Pause   = "pause"
	Busybox = "busybox"
	Alpine  = "alpine"
	Ubuntu  = "ubuntu"
)

// Names lists every image BuildAll can build, in the order it builds them.
var Names = []string{Handler, TES, Filer, Pause, Busybox, Alpine, Ubuntu}

// The default names of the service images (the Makefile's HANDLER_IMAGE,
// TES_IMAGE and FILER_IMAGE).
const (
	DefaultHandlerImage = "ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest"
	DefaultTESImage     = "ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest"
	DefaultFilerImage   = "ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest"
)

// The pod sandbox image, tagged as the node's components name it.
const (
	// PauseImage is containerd 2.3 and 2.4's default sandbox image
	// (DefaultSandboxImage of its CRI plugin).
	PauseImage = "registry.k8s.io/pause:3.10.2"
	// PauseImageKubernetes is the pause image of Kubernetes 1.35 (kubeadm's
	// and the kubelet's default pod infra image).
	PauseImageKubernetes = "registry.k8s.io/pause:3.10.1"
)

// StandIns are the names each stand-in image is tagged with: the public
// images that the project's tests and examples name. All three are the
// same busybox root file system (BusyboxTree), a local stand-in for the
// tests, not the real distributions.
var StandIns = map[string][]string{
	Busybox: {"docker.io/library/busybox:latest", "docker.io/library/busybox:1.36"},
	Alpine:  {"docker.io/library/alpine:latest", "docker.io/library/alpine:3"},
	Ubuntu:  {"docker.io/library/ubuntu:latest", "docker.io/library/ubuntu:24.04"},
}

// StandInLabel is the label every stand-in image carries to say what it is.
const StandInLabel = "org.opencontainers.image.description"

const standInDescription = "busybox stand-in for local tests of tesk-knative; not the distribution its name says"

// Options says which images BuildAll builds and from what.
type Options struct {
	// RepoRoot is the module's root directory (default ".").
	RepoRoot string
	// OutDir receives one tarball per image, <name>.tar (created if
	// missing; default bin/images under RepoRoot).
	OutDir string
	// Go is the go command (default "go").
	Go string
	// Only lists the images to build (Names; default all).
	Only []string
	// The names of the service images (defaults DefaultHandlerImage,
	// DefaultTESImage, DefaultFilerImage).
	HandlerImage, TESImage, FilerImage string
	// CACertificates is the host's CA bundle for the service images
	// (default HostCACertificates).
	CACertificates string
	// Zoneinfo, if set, is a host time zone database (such as
	// HostZoneinfo) put at /usr/share/zoneinfo in the service images;
	// unset, they have none (Go programs then know only UTC).
	Zoneinfo string
	// BusyboxBinary is the static busybox of the stand-ins (default
	// HostBusybox).
	BusyboxBinary string
	// Version is the programs' version (internal/version), set with
	// -ldflags -X; empty: the programs report version.Dev.
	Version string
	// AlsoTags are more tags of the handler's, the TES API's and the
	// filer's images: each is also named <repository>:<tag>.
	AlsoTags []string
	// Log, if set, receives the go build command line and its output.
	Log io.Writer
}

// Built is one image written by BuildAll.
type Built struct {
	// Name is the image's name in Names.
	Name string
	// Refs are the fully qualified names:tags the tarball carries.
	Refs []string
	// Path is the tarball.
	Path string
	// Digest is the image manifest's digest, the same for the same inputs.
	Digest v1.Hash
	// Size is the tarball's size in bytes.
	Size int64
}

// binaries maps an image to the package its program is built from.
var binaries = map[string]string{
	Handler: "./cmd/handler",
	TES:     "./cmd/tes",
	Filer:   "./cmd/filer",
	Pause:   "./hack/ociimage/ociimage/pause",
}

// withAlsoTags is ref and ref's repository with each of o.AlsoTags.
func (o Options) withAlsoTags(ref string) []string {
	refs := []string{ref}
	p, err := ParseRef(ref)
	if err != nil {
		return refs // BuildAll refuses it
	}
	for _, t := range o.AlsoTags {
		if r := strings.TrimSuffix(p.Full, ":"+p.Tag) + ":" + t; t != "" && t != p.Tag && !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	return refs
}

func (o *Options) defaults() error {
	if o.RepoRoot == "" {
		o.RepoRoot = "."
	}
	if o.OutDir == "" {
		o.OutDir = filepath.Join(o.RepoRoot, "bin", "images")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if len(o.Only) == 0 {
		o.Only = Names
	}
	for _, n := range o.Only {
		if !slices.Contains(Names, n) {
			return fmt.Errorf("ociimage: no image %q (the images: %s)", n, strings.Join(Names, ", "))
		}
	}
	if err := checkVersion(o.Version); err != nil {
		return err
	}
	set := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	set(&o.HandlerImage, DefaultHandlerImage)
	set(&o.TESImage, DefaultTESImage)
	set(&o.FilerImage, DefaultFilerImage)
	set(&o.CACertificates, HostCACertificates)
	set(&o.BusyboxBinary, HostBusybox)
	return nil
}

// Refs returns the names the image name is tagged with under o.
func (o Options) Refs(image string) []string {
	switch image {
	case Handler:
		return o.withAlsoTags(o.HandlerImage)
	case TES:
		return o.withAlsoTags(o.TESImage)
	case Filer:
		return o.withAlsoTags(o.FilerImage)
	case Pause:
		return []string{PauseImage, PauseImageKubernetes}
	}
	return StandIns[image]
}

// BuildAll builds the images of o.Only into o.OutDir: the programs with a
// single go build (static, -trimpath -ldflags="-s -w", as the Dockerfile
// builds them, for linux and this architecture), then one tarball per
// image (WriteArchive). It checks every name and host file before it
// builds anything; on error, tarballs already written stay, none is left
// half written.
func BuildAll(ctx context.Context, o Options) ([]Built, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range o.Only {
		want[n] = true
	}
	for _, n := range Names {
		if !want[n] {
			continue
		}
		for _, r := range o.Refs(n) {
			if _, err := ParseRef(r); err != nil {
				return nil, fmt.Errorf("%s image: %w", n, err)
			}
		}
	}
	service := want[Handler] || want[TES] || want[Filer]
	if service {
		if err := regularFile(o.CACertificates, "install Debian's ca-certificates: apt-get install ca-certificates"); err != nil {
			return nil, err
		}
		if o.Zoneinfo != "" {
			if fi, err := os.Stat(o.Zoneinfo); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("ociimage: time zone database %s is not a directory (install Debian's tzdata, or build without it)", o.Zoneinfo)
			}
		}
	}
	var applets []string
	if want[Busybox] || want[Alpine] || want[Ubuntu] {
		var err error
		if applets, err = BusyboxApplets(o.BusyboxBinary); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}

	var pkgs []string
	for _, n := range Names {
		if want[n] && binaries[n] != "" {
			pkgs = append(pkgs, binaries[n])
		}
	}
	binDir := ""
	if len(pkgs) > 0 {
		var err error
		binDir, err = os.MkdirTemp("", "ociimage-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(binDir)
		if err := GoBuildVersion(ctx, o.Go, o.RepoRoot, binDir, o.Version, o.Log, pkgs...); err != nil {
			return nil, err
		}
	}

	var base *Tree
	if service {
		base = BaseTree(o.CACertificates, o.Zoneinfo)
	}
	var built []Built
	for _, n := range Names {
		if !want[n] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return built, err
		}
		img, err := imageFor(n, base, binDir, o.BusyboxBinary, applets)
		if err != nil {
			return built, fmt.Errorf("%s image: %w", n, err)
		}
		b, err := write(img, n, filepath.Join(o.OutDir, n+".tar"), o.Refs(n))
		if err != nil {
			return built, fmt.Errorf("%s image: %w", n, err)
		}
		built = append(built, b)
	}
	return built, nil
}

func regularFile(p, hint string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("ociimage: %w (%s)", err, hint)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("ociimage: %s is not a regular file (%s)", p, hint)
	}
	return nil
}

// ServiceConfig is the config of the handler's, the TES API's and the
// filer's images: ENTRYPOINT /<name>, USER 65532:65532, EXPOSE 8080 for
// the two services, distroless's PATH, SSL_CERT_FILE and working directory.
func ServiceConfig(name string) Config {
	c := Config{
		Entrypoint: []string{"/" + name},
		User:       fmt.Sprintf("%d:%d", NonrootUID, NonrootUID),
		Env:        []string{DefaultPath, "SSL_CERT_FILE=" + CACertificates},
		WorkingDir: NonrootHome,
	}
	if name == Handler || name == TES {
		c.ExposedPorts = []string{"8080/tcp"}
	}
	return c
}

// PauseConfig is the pause image's config, as Kubernetes' own: ENTRYPOINT
// /pause, USER 65535:65535.
func PauseConfig() Config {
	return Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
}

// StandInConfig is the stand-ins' config: CMD sh, PATH, the StandInLabel.
func StandInConfig() Config {
	return Config{Cmd: []string{"sh"}, Env: []string{DefaultPath}, Labels: map[string]string{StandInLabel: standInDescription}}
}

func imageFor(n string, base *Tree, binDir, busybox string, applets []string) (v1.Image, error) {
	switch n {
	case Handler, TES, Filer:
		bin := BinaryTree(n, filepath.Join(binDir, n))
		return NewImage(ServiceConfig(n),
			LayerSpec{Tree: base, CreatedBy: "distroless/static:nonroot equivalent: CA certificates, passwd, group, /home/nonroot, /tmp"},
			LayerSpec{Tree: bin, CreatedBy: fmt.Sprintf("COPY /out/%s /%s", n, n)})
	case Pause:
		return NewImage(PauseConfig(), LayerSpec{Tree: BinaryTree("pause", filepath.Join(binDir, "pause")), CreatedBy: "COPY /out/pause /pause"})
	default:
		t, err := BusyboxTree(busybox, applets)
		if err != nil {
			return nil, err
		}
		return NewImage(StandInConfig(), LayerSpec{Tree: t, CreatedBy: "busybox-static with its applets in /bin"})
	}
}

func write(img v1.Image, n, path string, refs []string) (Built, error) {
	if err := WriteArchive(path, img, refs...); err != nil {
		return Built{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Built{}, err
	}
	b := Built{Name: n, Path: path, Digest: d, Size: fi.Size()}
	for _, r := range refs {
		p, _ := ParseRef(r)
		b.Refs = append(b.Refs, p.Full)
	}
	return b, nil
}

// GoBuild builds pkgs (relative to the module root dir) into outDir with
// one go build: CGO_ENABLED=0, GOOS=linux, GOARCH of this program,
// -trimpath -ldflags="-s -w" and no VCS stamp, so that the same sources and
// toolchain give the same binaries.
func GoBuild(ctx context.Context, goCmd, dir, outDir string, log io.Writer, pkgs ...string) error {
	return GoBuildVersion(ctx, goCmd, dir, outDir, "", log, pkgs...)
}

// checkVersion refuses a version that -ldflags cannot carry as one word.
func checkVersion(v string) error {
	if strings.ContainsAny(v, " \t\n'\"") {
		return fmt.Errorf("ociimage: version %q has a space or a quote", v)
	}
	return nil
}

// VersionVariable is the variable of the programs' version (internal/version).
const VersionVariable = "github.com/elixir-cloud-aai/tesk-knative/internal/version.Version"

// GoBuildVersion is GoBuild with the programs' version set to version
// (-X VersionVariable; empty: not set).
func GoBuildVersion(ctx context.Context, goCmd, dir, outDir, version string, log io.Writer, pkgs ...string) error {
	if err := checkVersion(version); err != nil {
		return err
	}
	ldflags := "-s -w"
	if version != "" {
		ldflags += " -X " + VersionVariable + "=" + version
	}
	args := append([]string{"build", "-trimpath", "-ldflags=" + ldflags, "-o", outDir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH,
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if log != nil {
		fmt.Fprintf(log, "%s %s\n", goCmd, strings.Join(args, " "))
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, log), io.MultiWriter(&out, log)
	}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ociimage: go build %s: %w\n%s", strings.Join(pkgs, " "), err, out.Bytes())
	}
	if log != nil {
		fmt.Fprintf(log, "go build: %.1fs\n", time.Since(start).Seconds())
	}
	return nil
}
