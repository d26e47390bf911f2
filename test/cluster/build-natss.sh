#!/usr/bin/env bash
# Builds the NATS JetStream channel of Knative Eventing
# (knative.dev/eventing-natss v0.48.1, built against Eventing v0.50.0) and the
# NATS server (v2.12.15) from the Go module proxy for the local cluster's NATS
# option: the channel's controller, dispatcher and webhook, the server, and
# the YAML of the channel's config/ folders (natss.go resolves their ko://
# references to images made from these binaries). eventing-natss is patched
# first with tools-natss/eventing-natss.patch (patchmod.sh): its dispatcher
# sends each delivery with the Subscription's OIDC token, as Eventing's
# in-memory channel does, and may create ServiceAccount tokens.
#
# Everything lands in ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/natss/<key>:
#   bin/controller, bin/dispatcher, bin/webhook, bin/nats-server
#   config/jetstream, config/webhook
# where <key> is a hash of tools-natss (go.mod, go.sum, tools.go, the
# patch), this script and the Go version (the Go package test/cluster
# computes the same key, NatsCacheDir). Prints the cache directory on the
# last line of its output; with --print-dir it only prints it.
#
# Environment:
#   GO          the go command (default: go)
#   BUILD_P     parallelism passed to go build -p (default: 2)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
BUILD_P="${BUILD_P:-2}"
mod="$here/tools-natss"

key="$({
	cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$mod/eventing-natss.patch" "$here/build-natss.sh"
	"$GO" env GOVERSION
} | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/natss/$key"
if [[ ${1:-} == --print-dir ]]; then
	echo "$cache"
	exit 0
fi

commands=(controller dispatcher webhook nats-server)

complete() {
	local c
	for c in "${commands[@]}"; do [[ -x "$cache/bin/$c" ]] || return 1; done
	[[ -f "$cache/config/.complete" ]]
}

start=$(date +%s)
if complete; then
	echo "natss: reused $cache ($(($(date +%s) - start))s)"
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w")
# Upstream's module from the proxy, copied and patched; built through a
# copy of go.mod that replaces the module with the patched copy.
GO="$GO" "$here/patchmod.sh" "$mod" knative.dev/eventing-natss "$mod/eventing-natss.patch" "$tmp" "$tmp/go.mod"
echo "building the NATS JetStream channel (patched) and the NATS server into $cache/bin (go build -p $BUILD_P)"
(cd "$mod" && "$GO" build "${flags[@]}" -modfile "$tmp/go.mod" -o "$tmp/bin/" \
	knative.dev/eventing-natss/cmd/jetstream/controller \
	knative.dev/eventing-natss/cmd/jetstream/dispatcher \
	knative.dev/eventing-natss/cmd/webhook \
	github.com/nats-io/nats-server/v2)
rm -rf "$cache/bin"
mv "$tmp/bin" "$cache/bin"

echo "extracting the channel's YAML into $cache/config"
rm -rf "$cache/config"
n="$tmp/eventing-natss"
mkdir -p "$cache/config"
cp -r "$n/config/jetstream" "$n/config/webhook" "$cache/config/"
find "$cache/config" -type f ! -name '*.yaml' -delete
chmod -R u+w "$cache/config"
touch "$cache/config/.complete"
echo "natss: built in $(($(date +%s) - start))s"
echo "$cache"
