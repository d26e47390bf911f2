#!/usr/bin/env bash
# Builds the three images: the handler and the TES API (the Knative
# Services) and the filer (the inputs and outputs filer jobs,
# FILER_NAME:FILER_VERSION of the handler).
#
#   KO_DOCKER_REPO set and ko installed: ko builds them and pushes them
#     (gcr.io/distroless/static:nonroot as base, as in the Dockerfile);
#   otherwise, with a running Docker daemon: docker build of the Dockerfile's
#     targets "handler", "tes" and "filer" (local images; push them yourself, or
#     load them into kind: make kind-deploy).
#
# Environment:
#   HANDLER_IMAGE  name:tag of the handler (default ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest)
#   TES_IMAGE      name:tag of the TES API (default ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest)
#   FILER_IMAGE    name:tag of the filer (default ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest)
#   DOCKER, KO     the commands (default docker, ko)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOCKER="${DOCKER:-docker}"
KO="${KO:-ko}"
HANDLER_IMAGE="${HANDLER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest}"
TES_IMAGE="${TES_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest}"
FILER_IMAGE="${FILER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest}"

# split name:tag (a registry port is not a tag)
split() {
	local img="$1" last="${1##*/}"
	if [[ "$last" == *:* ]]; then
		echo "${img%:*} ${last##*:}"
	else
		echo "$img latest"
	fi
}

if [[ -n "${KO_DOCKER_REPO:-}" ]] && command -v "$KO" >/dev/null; then
	export KO_DEFAULTBASEIMAGE="${KO_DEFAULTBASEIMAGE:-gcr.io/distroless/static:nonroot}"
	cd "$root"
	for pair in "handler $HANDLER_IMAGE" "tes $TES_IMAGE" "filer $FILER_IMAGE"; do
		read -r cmd img <<<"$pair"
		read -r name tag < <(split "$img")
		echo "image: ko build ./cmd/$cmd -> $name:$tag"
		KO_DOCKER_REPO="$name" "$KO" build --bare --tags "$tag" "./cmd/$cmd"
	done
	exit 0
fi

if command -v "$DOCKER" >/dev/null && "$DOCKER" info >/dev/null 2>&1; then
	echo "image: docker build --target handler -t $HANDLER_IMAGE"
	"$DOCKER" build --target handler -t "$HANDLER_IMAGE" "$root"
	echo "image: docker build --target tes -t $TES_IMAGE"
	"$DOCKER" build --target tes -t "$TES_IMAGE" "$root"
	echo "image: docker build --target filer -t $FILER_IMAGE"
	"$DOCKER" build --target filer -t "$FILER_IMAGE" "$root"
	exit 0
fi

cat >&2 <<MSG
image: nothing to build the images with.
  - Docker: install it and start its daemon ('$DOCKER info' must work), or
  - ko (https://ko.build): install it and set KO_DOCKER_REPO to a registry
    you can push to, e.g. KO_DOCKER_REPO=ghcr.io/<you>.
Without either, build the binaries with 'make build' and run the handler
outside the cluster ('make dev').
MSG
exit 1
