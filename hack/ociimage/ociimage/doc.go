// Package ociimage assembles the project's OCI images without Docker or a
// registry, with go-containerregistry, and writes each as one tarball that
// docker load, containerd's import (ctr -n k8s.io images import) and
// crane push accept (WriteArchive).
//
// The images (BuildAll, Names):
//
//   - handler, tes and filer: the programs of ./cmd/handler, ./cmd/tes and
//     ./cmd/filer, built as the Dockerfile builds them (one go build,
//     CGO_ENABLED=0, -trimpath -ldflags="-s -w", the version set by Options.Version) at /handler, /tes and
//     /filer, as ENTRYPOINT, USER 65532:65532, EXPOSE 8080 for the handler
//     and the TES API, on a base layer equivalent to distroless/static:nonroot
//     (BaseTree): the host's CA certificates, /etc/passwd and /etc/group with
//     root and nonroot (65532), /home/nonroot, /tmp (1777), no shell; the
//     time zone database only if asked for (Options.Zoneinfo).
//   - pause: the pod sandbox image, ./hack/ociimage/ociimage/pause, tagged
//     PauseImage and PauseImageKubernetes.
//   - busybox, alpine and ubuntu: local stand-ins for the tests, NOT the
//     real distributions. Each is Debian's busybox-static with a symbolic
//     link in /bin for every applet (BusyboxTree), tagged with the public
//     names the tests and examples use (StandIns), so that a node without
//     network access can run their commands (sh, cat, tr, echo, true, ...).
//     Programs that need a real Alpine or Ubuntu (apk, apt, bash, glibc)
//     do not run in them.
//
// Every image is for linux and the architecture of the running program, and
// is reproducible: files and images carry a fixed time (Epoch), tar entries
// are sorted with fixed owners and modes, so the same inputs give the same
// digests and the same tarball bytes.
package ociimage
