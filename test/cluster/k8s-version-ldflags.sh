#!/usr/bin/env bash
# Prints the linker flags that stamp a Kubernetes version (e.g. v1.35.4)
# into k8s.io/component-base/version, as Kubernetes' release builds do, so
# that the binaries built here report it (GET /version, kubelet --version)
# rather than v0.0.0-master. Used by build.sh and build-node.sh.
set -euo pipefail
v="${1:?usage: k8s-version-ldflags.sh vMAJOR.MINOR.PATCH}"
[[ "$v" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || { echo "k8s-version-ldflags.sh: $v is not vMAJOR.MINOR.PATCH" >&2; exit 1; }
pkg=k8s.io/component-base/version
echo "-X $pkg.gitVersion=$v -X $pkg.gitMajor=${BASH_REMATCH[1]} -X $pkg.gitMinor=${BASH_REMATCH[2]} -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
