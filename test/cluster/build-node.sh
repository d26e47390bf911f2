#!/usr/bin/env bash
# Builds the real node's binaries from the Go module proxy: the kubelet
# (k8s.io/kubernetes, tools-node), containerd, its runc shim and ctr
# (github.com/containerd/containerd/v2, tools-containerd) and the node's image
# registry and volume provisioner (tools-containerd/cmd/registry and
# cmd/provisioner: go-containerregistry, sig-storage-lib-external-provisioner).
# runc and the CNI plugins come from Debian (node-deps.sh).
#
# Everything lands in ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/node/<key>/bin
# where <key> is a hash of the two tool modules, the registry's and the
# provisioner's sources and the Go version (the Go package test/cluster computes the same key). Prints the
# cache directory on the last line of its output.
#
# Environment:
#   GO          the go command (default: go)
#   BUILD_P     parallelism passed to go build -p (default: 2)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
BUILD_P="${BUILD_P:-2}"

key="$({
	cat "$here/tools-node/go.mod" "$here/tools-node/go.sum" \
		"$here/tools-containerd/go.mod" "$here/tools-containerd/go.sum" \
		"$here/tools-containerd/cmd/registry/main.go" "$here/tools-containerd/cmd/provisioner/main.go" \
		"$here/k8s-version-ldflags.sh"
	"$GO" env GOVERSION
} | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/node/$key"
bins=(kubelet containerd containerd-shim-runc-v2 ctr registry provisioner)

start=$(date +%s)
missing=0
for b in "${bins[@]}"; do
	[[ -x "$cache/bin/$b" ]] || missing=1
done
if ((missing == 0)); then
	echo "node binaries: reused $cache ($(($(date +%s) - start))s)"
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w")
echo "building node binaries into $cache/bin (go build -p $BUILD_P)"
t0=$(date +%s)
k8s_version="$(cd "$here/tools-node" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)"
(cd "$here/tools-node" && "$GO" build -p "$BUILD_P" -trimpath -buildvcs=false \
	-ldflags "-s -w $("$here/k8s-version-ldflags.sh" "$k8s_version")" -o "$tmp/" k8s.io/kubernetes/cmd/kubelet)
echo "  kubelet: $(($(date +%s) - t0))s"
t0=$(date +%s)
# Static, without cgo: the btrfs and devmapper snapshotters need cgo and are
# left out; the node uses overlayfs.
(cd "$here/tools-containerd" && "$GO" build "${flags[@]}" -tags "no_btrfs no_devmapper no_zfs" -o "$tmp/" \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr \
	./cmd/registry ./cmd/provisioner)
echo "  containerd, containerd-shim-runc-v2, ctr, registry, provisioner: $(($(date +%s) - t0))s"
mkdir -p "$cache/bin"
for b in "${bins[@]}"; do
	mv -f "$tmp/$b" "$cache/bin/$b"
done
echo "node binaries: ready in $(($(date +%s) - start))s"
echo "$cache"
