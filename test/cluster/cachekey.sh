#!/usr/bin/env bash
# Prints the cache key of the control plane binaries: a hash of the pinned tool
# modules, the etcd entry point, the Knative serving pin and the Go version.
# The Go package test/cluster computes the same key (see cachekey.go).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
{
	cat "$here/tools/go.mod" "$here/tools/go.sum" "$here/tools/cmd/etcd/main.go" \
		"$here/tools-kwok/go.mod" "$here/tools-kwok/go.sum" "$here/tools-kwok/easycel.patch" \
		"$here/tools-knative/go.mod" "$here/tools-knative/go.sum" \
		"$here/tools-knative/cmd/apiserver_receive_adapter/main.go" \
		"$here/k8s-version-ldflags.sh"
	echo "knative.dev/serving@v0.51.0"
	"$GO" env GOVERSION
} | sha256sum | cut -c1-16
