#!/usr/bin/env bash
# Builds the three images: the handler and the TES API (the Knative
# Services) and the filer (the inputs and outputs filer jobs,
# FILER_NAME:FILER_VERSION of the handler).
#
#   IMAGE_BUILDER=ociimage (the default): go run ./hack/ociimage writes one
#     OCI image tarball per image into IMAGE_DIR, no Docker or registry
#     needed; load them with docker load -i, ctr -n k8s.io images import,
#     kind load image-archive, or push them with crane push;
#   IMAGE_BUILDER=ko: ko builds them and pushes them to KO_DOCKER_REPO
#     (gcr.io/distroless/static:nonroot as base, as in the Dockerfile);
#   IMAGE_BUILDER=docker: docker build of the Dockerfile's targets "handler",
#     "tes" and "filer" (local images in a running Docker daemon).
#
# Environment:
#   HANDLER_IMAGE  name:tag of the handler (default ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest)
#   TES_IMAGE      name:tag of the TES API (default ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest)
#   FILER_IMAGE    name:tag of the filer (default ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest)
#   VERSION        the programs' version (internal/version), as make sets it
#                  from git describe (default 0.0.0-dev)
#   IMAGE_ALSO_TAGS more tags of each image, space-separated (default none)
#   IMAGE_BUILDER  ociimage, ko or docker (default ociimage)
#   IMAGE_DIR      where ociimage writes the tarballs (default bin/images)
#   GO, DOCKER, KO the commands (default go, docker, ko)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO="${GO:-go}"
DOCKER="${DOCKER:-docker}"
KO="${KO:-ko}"
HANDLER_IMAGE="${HANDLER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest}"
TES_IMAGE="${TES_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest}"
FILER_IMAGE="${FILER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest}"
VERSION="${VERSION:-0.0.0-dev}"
IMAGE_ALSO_TAGS="${IMAGE_ALSO_TAGS:-}"
IMAGE_BUILDER="${IMAGE_BUILDER:-ociimage}"
ldflags="-X=github.com/elixir-cloud-aai/tesk-knative/internal/version.Version=$VERSION"
IMAGE_DIR="${IMAGE_DIR:-bin/images}"

# split name:tag (a registry port is not a tag)
split() {
	local img="$1" last="${1##*/}"
	if [[ "$last" == *:* ]]; then
		echo "${img%:*} ${last##*:}"
	else
		echo "$img latest"
	fi
}

case "$IMAGE_BUILDER" in
ociimage)
	cd "$root"
	echo "image: go run ./hack/ociimage -out $IMAGE_DIR -only handler,tes,filer -version $VERSION"
	exec "$GO" run ./hack/ociimage -go "$GO" -out "$IMAGE_DIR" -only handler,tes,filer \
		-version "$VERSION" -also-tags "$IMAGE_ALSO_TAGS" \
		-handler-image "$HANDLER_IMAGE" -tes-image "$TES_IMAGE" -filer-image "$FILER_IMAGE"
	;;
ko)
	[[ -n "${KO_DOCKER_REPO:-}" ]] || { echo "image: IMAGE_BUILDER=ko needs KO_DOCKER_REPO, a registry you can push to, e.g. KO_DOCKER_REPO=ghcr.io/<you>" >&2; exit 1; }
	command -v "$KO" >/dev/null || { echo "image: $KO not found: install ko (https://ko.build)" >&2; exit 1; }
	export KO_DEFAULTBASEIMAGE="${KO_DEFAULTBASEIMAGE:-gcr.io/distroless/static:nonroot}"
	cd "$root"
	for pair in "handler $HANDLER_IMAGE" "tes $TES_IMAGE" "filer $FILER_IMAGE"; do
		read -r cmd img <<<"$pair"
		read -r name tag < <(split "$img")
		tags="$tag"
		for t in $IMAGE_ALSO_TAGS; do [[ "$t" == "$tag" ]] || tags="$tags,$t"; done
		echo "image: ko build ./cmd/$cmd -> $name:$tags"
		KO_DOCKER_REPO="$name" GOFLAGS="${GOFLAGS:+$GOFLAGS }-ldflags=$ldflags" "$KO" build --bare --tags "$tags" "./cmd/$cmd"
	done
	;;
docker)
	"$DOCKER" info >/dev/null 2>&1 || { echo "image: IMAGE_BUILDER=docker needs a running Docker daemon ('$DOCKER info' must work)" >&2; exit 1; }
	for pair in "handler $HANDLER_IMAGE" "tes $TES_IMAGE" "filer $FILER_IMAGE"; do
		read -r target img <<<"$pair"
		read -r name tag < <(split "$img")
		tagargs=(-t "$img")
		for t in $IMAGE_ALSO_TAGS; do [[ "$t" == "$tag" ]] || tagargs+=(-t "$name:$t"); done
		echo "image: docker build --target $target ${tagargs[*]} (VERSION $VERSION)"
		"$DOCKER" build --target "$target" --build-arg "VERSION=$VERSION" "${tagargs[@]}" "$root"
	done
	;;
*)
	echo "image: IMAGE_BUILDER=$IMAGE_BUILDER: want ociimage, ko or docker" >&2
	exit 1
	;;
esac
