// Command ociimage builds the project's OCI images as tarballs, without
// Docker or a registry (see hack/ociimage/ociimage):
//
//	go run ./hack/ociimage -out bin/images [-only handler,filer,...]
//	    [-handler-image ref] [-tes-image ref] [-filer-image ref] [-zoneinfo]
//	    [-version v] [-also-tags "t1 t2"]
//
// It prints one line per image: its names, digest, size and tarball.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/elixir-cloud-aai/tesk-knative/hack/ociimage/ociimage"
)

const usage = `usage: go run ./hack/ociimage [flags]

Builds OCI image tarballs without Docker or a registry, one per image, each
in the format docker save writes (an OCI image layout with Docker's
manifest.json), for linux/%s:

  handler  the handler (ENTRYPOINT /handler, USER 65532:65532, EXPOSE 8080)
  tes      the TES API (ENTRYPOINT /tes, USER 65532:65532, EXPOSE 8080)
  filer    the filer (ENTRYPOINT /filer, USER 65532:65532)
           all three on a distroless/static:nonroot equivalent: the host's
           CA certificates, passwd and group with nonroot, no shell
  pause    the pod sandbox image, %s and %s
  busybox, alpine, ubuntu
           LOCAL STAND-INS for the tests, NOT the real distributions: each is
           Debian's busybox-static with its applets in /bin, tagged as the
           public images the tests and examples name:
             %s

Load a tarball with any of:
  docker load -i bin/images/handler.tar
  ctr -n k8s.io images import bin/images/handler.tar
  crane push bin/images/handler.tar <registry>/<name>:<tag>

Flags:
`

func main() {
	out := flag.String("out", "bin/images", "directory for the tarballs (<image>.tar)")
	only := flag.String("only", "", "comma-separated images to build (default all: "+strings.Join(ociimage.Names, ",")+")")
	root := flag.String("root", ".", "the module's root directory")
	goCmd := flag.String("go", envOr("GO", "go"), "the go command")
	handler := flag.String("handler-image", ociimage.DefaultHandlerImage, "name:tag of the handler image")
	tes := flag.String("tes-image", ociimage.DefaultTESImage, "name:tag of the TES API image")
	filer := flag.String("filer-image", ociimage.DefaultFilerImage, "name:tag of the filer image")
	version := flag.String("version", "", "the programs' version (internal/version; default 0.0.0-dev)")
	alsoTags := flag.String("also-tags", "", "more tags of the handler, TES API and filer images, space- or comma-separated")
	zoneinfo := flag.Bool("zoneinfo", false, "put the host's "+ociimage.HostZoneinfo+" into the service images")
	verbose := flag.Bool("v", false, "print the go build command and its output")
	flag.Usage = func() {
		var standIns []string
		for _, n := range []string{ociimage.Busybox, ociimage.Alpine, ociimage.Ubuntu} {
			standIns = append(standIns, strings.Join(ociimage.StandIns[n], " "))
		}
		fmt.Fprintf(flag.CommandLine.Output(), usage, ociimage.Platform().Architecture,
			ociimage.PauseImage, ociimage.PauseImageKubernetes, strings.Join(standIns, "\n             "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "ociimage: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	o := ociimage.Options{RepoRoot: *root, OutDir: *out, Go: *goCmd,
		HandlerImage: *handler, TESImage: *tes, FilerImage: *filer, Version: *version,
		AlsoTags: strings.FieldsFunc(*alsoTags, func(r rune) bool { return r == ',' || r == ' ' })}
	if *only != "" {
		for _, n := range strings.Split(*only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Only = append(o.Only, n)
			}
		}
	}
	if *zoneinfo {
		o.Zoneinfo = ociimage.HostZoneinfo
	}
	if *verbose {
		o.Log = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	built, err := ociimage.BuildAll(ctx, o)
	printBuilt(os.Stdout, built)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func printBuilt(w io.Writer, built []ociimage.Built) {
	for _, b := range built {
		fmt.Fprintf(w, "%s %s %.1fMiB %s\n", strings.Join(b.Refs, ","), b.Digest, float64(b.Size)/(1<<20), b.Path)
	}
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}
