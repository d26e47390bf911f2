#!/usr/bin/env bash
# Builds the binaries of the local cluster's Services option
# (Options.Services, `cluster up -real -services`) from the Go module proxy:
#
#   kube-proxy             k8s.io/kubernetes v1.35.4 (tools-proxy: the
#                          requirements of tools/ plus kube-proxy's own, so
#                          that the Go build cache of the control plane is
#                          reused)
#   coredns                CoreDNS v1.15.0 with only the plugins the cluster's
#                          DNS uses (tools-services/cmd/coredns)
#   kube-network-policies  sigs.k8s.io/kube-network-policies v0.8.0
#                          (tools-services/cmd/kube-network-policies), its
#                          package patched at build time with
#                          tools-services/kube-network-policies.patch
#
# Everything lands in ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/services/<key>/bin
# where <key> is a hash of the two tool modules, the mains, the patch and the
# Go version (the Go package test/cluster computes the same key). Prints the
# cache directory on the last line of its output.
#
# With --print-dir it only prints the cache directory.
#
# Environment:
#   GO          the go command (default: go)
#   BUILD_P     parallelism passed to go build -p (default: 2)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
BUILD_P="${BUILD_P:-2}"

key="$({
	cat "$here/tools-proxy/go.mod" "$here/tools-proxy/go.sum" \
		"$here/tools-services/go.mod" "$here/tools-services/go.sum" \
		"$here/tools-services/cmd/coredns/main.go" \
		"$here/tools-services/cmd/kube-network-policies/main.go" \
		"$here/tools-services/kube-network-policies.patch"
	"$GO" env GOVERSION
} | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/services/$key"
bins=(kube-proxy coredns kube-network-policies)
if [[ ${1:-} == --print-dir ]]; then
	echo "$cache"
	exit 0
fi

start=$(date +%s)
missing=()
for b in "${bins[@]}"; do
	[[ -x "$cache/bin/$b" ]] || missing+=("$b")
done
if ((${#missing[@]} == 0)); then
	echo "services binaries: reused $cache ($(($(date +%s) - start))s)"
	echo "$cache"
	exit 0
fi

mkdir -p "$cache/bin"
tmp="$(mktemp -d "$cache/build.XXXXXX")"
out="$tmp/out"
mkdir -p "$out"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w")
echo "building services binaries into $cache/bin (go build -p $BUILD_P): ${missing[*]}"

has() {
	local b
	for b in "${missing[@]}"; do [[ $b == "$1" ]] && return 0; done
	return 1
}

if has kube-proxy; then
	t0=$(date +%s)
	(cd "$here/tools-proxy" && "$GO" build "${flags[@]}" -o "$out/" k8s.io/kubernetes/cmd/kube-proxy)
	mv -f "$out/kube-proxy" "$cache/bin/kube-proxy"
	echo "  kube-proxy: $(($(date +%s) - t0))s"
fi

if has coredns; then
	t0=$(date +%s)
	(cd "$here/tools-services" && "$GO" build "${flags[@]}" -o "$out/" ./cmd/coredns)
	mv -f "$out/coredns" "$cache/bin/coredns"
	echo "  coredns: $(($(date +%s) - t0))s"
fi

if has kube-network-policies; then
	t0=$(date +%s)
	# Upstream's module from the proxy, copied and patched; built through a
	# copy of go.mod that replaces the module with the patched copy.
	GO="$GO" "$here/patchmod.sh" "$here/tools-services" sigs.k8s.io/kube-network-policies "$here/tools-services/kube-network-policies.patch" "$tmp" "$tmp/go.mod"
	(cd "$here/tools-services" && "$GO" build "${flags[@]}" -modfile "$tmp/go.mod" -o "$out/" ./cmd/kube-network-policies)
	mv -f "$out/kube-network-policies" "$cache/bin/kube-network-policies"
	echo "  kube-network-policies: $(($(date +%s) - t0))s"
fi

echo "services binaries: ready in $(($(date +%s) - start))s"
echo "$cache"
