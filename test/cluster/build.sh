#!/usr/bin/env bash
# Builds the local control plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok and the Knative
# ApiServerSource receive adapter) from the Go module proxy, and extracts the
# Knative CRDs.
#
# Everything lands in ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/cluster/<key>
# where <key> is a hash of the pinned tool modules and the Go version, so a
# fresh clone elsewhere reuses a previous build. Prints the cache directory on
# the last line of its output.
#
# Environment:
#   GO          the go command (default: go)
#   BUILD_P     parallelism passed to go build -p (default: 2)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
BUILD_P="${BUILD_P:-2}"

key="$("$here/cachekey.sh")"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/cluster/$key"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok apiserver_receive_adapter)

complete() {
	local b
	for b in "${bins[@]}"; do
		[[ -x "$cache/bin/$b" ]] || return 1
	done
	[[ -f "$cache/crds/.complete" && -f "$cache/kwok-crds/.complete" ]]
}

start=$(date +%s)
if complete; then
	echo "cluster binaries: reused $cache ($(($(date +%s) - start))s)"
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
export CGO_ENABLED=0
flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w")
# The Kubernetes binaries report the version they are (the API server's
# /version, which Knative's components check), as a release build does.
k8s_version="$(cd "$here/tools" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)"
k8s_flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w $("$here/k8s-version-ldflags.sh" "$k8s_version")")

missing=0
for b in "${bins[@]}"; do
	[[ -x "$cache/bin/$b" ]] || missing=1
done
if ((missing)); then
	tmp="$(mktemp -d "$cache/build.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	echo "building control plane binaries into $cache/bin (go build -p $BUILD_P)"
	t0=$(date +%s)
	(cd "$here/tools" && "$GO" build "${k8s_flags[@]}" -o "$tmp/" \
		./cmd/etcd \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubectl)
	echo "  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl: $(($(date +%s) - t0))s"
	t0=$(date +%s)
	(cd "$here/tools-knative" && "$GO" build "${flags[@]}" -o "$tmp/" ./cmd/apiserver_receive_adapter)
	echo "  apiserver_receive_adapter: $(($(date +%s) - t0))s"
	t0=$(date +%s)
	# kwok through a copy of go.mod that replaces easycel with a copy of it
	# patched with tools-kwok/easycel.patch (its type caches made safe for
	# kwok's concurrent controllers).
	GO="$GO" "$here/patchmod.sh" "$here/tools-kwok" github.com/wzshiming/easycel "$here/tools-kwok/easycel.patch" "$tmp" "$tmp/kwok.mod"
	(cd "$here/tools-kwok" && "$GO" build "${flags[@]}" -modfile "$tmp/kwok.mod" -o "$tmp/" sigs.k8s.io/kwok/cmd/kwok)
	echo "  kwok: $(($(date +%s) - t0))s"
	mkdir -p "$cache/bin"
	for b in "${bins[@]}"; do
		mv -f "$tmp/$b" "$cache/bin/$b"
	done
fi

if [[ ! -f "$cache/crds/.complete" ]]; then
	echo "extracting Knative CRDs into $cache/crds"
	rm -rf "$cache/crds"
	mkdir -p "$cache/crds"
	# Module versions are pinned in tools-knative/go.mod (eventing) and here (serving).
	serving="knative.dev/serving@v0.51.0"
	eventing="knative.dev/eventing@$(cd "$here/tools-knative" && "$GO" list -m -f '{{.Version}}' knative.dev/eventing)"
	for mod in "$serving" "$eventing"; do
		dir="$(cd "$here/tools-knative" && "$GO" mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		[[ -d "$dir/config/core" ]] || { echo "no config/core in $mod ($dir)" >&2; exit 1; }
		name="${mod%@*}"
		name="${name##*/}"
		# CRDs are the documents of kind CustomResourceDefinition under config/core.
		while IFS= read -r f; do
			if grep -q '^kind: CustomResourceDefinition' "$f"; then
				cp "$f" "$cache/crds/$name-$(basename "$f")"
			fi
		done < <(find "$dir/config/core" -name '*.yaml' | sort)
	done
	touch "$cache/crds/.complete"
fi

if [[ ! -f "$cache/kwok-crds/.complete" ]]; then
	echo "extracting kwok CRDs into $cache/kwok-crds"
	rm -rf "$cache/kwok-crds"
	mkdir -p "$cache/kwok-crds"
	kwok="sigs.k8s.io/kwok@$(cd "$here/tools-kwok" && "$GO" list -m -f '{{.Version}}' sigs.k8s.io/kwok)"
	dir="$(cd "$here/tools-kwok" && "$GO" mod download -json "$kwok" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	for kind in logs clusterlogs; do
		cp "$dir/kustomize/crd/bases/kwok.x-k8s.io_$kind.yaml" "$cache/kwok-crds/"
	done
	touch "$cache/kwok-crds/.complete"
fi

echo "cluster binaries: ready in $(($(date +%s) - start))s"
echo "$cache"
