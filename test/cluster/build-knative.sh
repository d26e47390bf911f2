#!/usr/bin/env bash
# Builds Knative Eventing and Serving (v0.50.0, Knative 1.23) from the Go
# module proxy for the local cluster's Knative option: the commands that
# config/knative needs, and the YAML of the modules' config/ folders that
# deploys them (knative.go resolves their ko:// references to images made
# from these binaries).
#
# Everything lands in ${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/knative/<key>:
#   bin/eventing/<command>, bin/serving/<command>
#   config/eventing/{core,mt-channel-broker,in-memory-channel}, config/serving/core
# where <key> is a hash of tools-platform (go.mod, go.sum, tools.go), this
# script and the Go version (the Go package test/cluster computes the same key). Prints the
# cache directory on the last line of its output.
#
# Environment:
#   GO          the go command (default: go)
#   BUILD_P     parallelism passed to go build -p (default: 2)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
BUILD_P="${BUILD_P:-2}"
mod="$here/tools-platform"

key="$({
	cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go" "$here/build-knative.sh"
	"$GO" env GOVERSION
} | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tesk-knative/knative/$key"

eventing=(controller webhook mtchannel_broker broker/ingress broker/filter in_memory/channel_controller in_memory/channel_dispatcher apiserver_receive_adapter mtping event_display auth_proxy)
serving=(controller webhook activator autoscaler queue)

complete() {
	local c
	for c in "${eventing[@]}"; do [[ -x "$cache/bin/eventing/${c##*/}" ]] || return 1; done
	for c in "${serving[@]}"; do [[ -x "$cache/bin/serving/${c##*/}" ]] || return 1; done
	[[ -f "$cache/config/.complete" ]]
}

start=$(date +%s)
if complete; then
	echo "knative: reused $cache ($(($(date +%s) - start))s)"
	echo "$cache"
	exit 0
fi

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
flags=(-p "$BUILD_P" -trimpath -buildvcs=false -ldflags "-s -w")
pkgs() {
	local repo=$1
	shift
	local c
	for c in "$@"; do echo "knative.dev/$repo/cmd/$c"; done
}
echo "building Knative Eventing and Serving into $cache/bin (go build -p $BUILD_P)"
for repo in eventing serving; do
	t0=$(date +%s)
	mkdir -p "$tmp/$repo"
	if [[ $repo == eventing ]]; then list=("${eventing[@]}"); else list=("${serving[@]}"); fi
	# shellcheck disable=SC2046
	(cd "$mod" && "$GO" build "${flags[@]}" -o "$tmp/$repo/" $(pkgs "$repo" "${list[@]}"))
	echo "  $repo (${#list[@]} commands): $(($(date +%s) - t0))s"
done
mkdir -p "$cache/bin"
rm -rf "$cache/bin/eventing" "$cache/bin/serving"
mv "$tmp/eventing" "$tmp/serving" "$cache/bin/"

echo "extracting the Knative YAML into $cache/config"
rm -rf "$cache/config"
dir() { (cd "$mod" && "$GO" list -m -f '{{.Dir}}' "$1"); }
e="$(dir knative.dev/eventing)"
s="$(dir knative.dev/serving)"
mkdir -p "$cache/config/eventing" "$cache/config/serving"
cp -r "$e/config/core" "$cache/config/eventing/core"
cp -r "$e/config/brokers/mt-channel-broker" "$cache/config/eventing/mt-channel-broker"
cp -r "$e/config/channels/in-memory-channel" "$cache/config/eventing/in-memory-channel"
cp -r "$s/config/core" "$cache/config/serving/core"
chmod -R u+w "$cache/config"
# Serving's repository links these files from knative.dev/networking and
# knative.dev/caching into config/core; a module zip holds no links, so they
# are taken from those modules, at the versions Serving requires.
n="$(dir knative.dev/networking)"
c="$(dir knative.dev/caching)"
for f in certificate domain-claim ingress serverlessservice; do
	cp "$n/config/$f.yaml" "$cache/config/serving/core/300-resources/$f.yaml"
done
cp "$c/config/image.yaml" "$cache/config/serving/core/300-resources/image.yaml"
cp "$n/config/config-network.yaml" "$cache/config/serving/core/configmaps/network.yaml"
chmod -R u+w "$cache/config"
touch "$cache/config/.complete"
echo "knative: built in $(($(date +%s) - start))s"
echo "$cache"
