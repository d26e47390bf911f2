#!/usr/bin/env bash
# Deploys config/knative with the images that `make image` built: the
# handler's and the TES API's images replace the ko:// references of their
# Services, and the filer image sets FILER_NAME and FILER_VERSION in the
# handler's ConfigMap.
#
#   KO_DOCKER_REPO set and ko installed: ko resolves the handler's ko://
#     reference itself (building and pushing the handler to KO_DOCKER_REPO);
#   otherwise: kubectl kustomize, with HANDLER_IMAGE and TES_IMAGE in place
#   of them.
#
# Environment:
#   HANDLER_IMAGE  the handler's image (default ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest)
#   TES_IMAGE      the TES API's image (default ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest)
#   FILER_IMAGE    the filer's image, name:tag (default ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest)
#   OIDC_ISSUER    the TES API's token issuer (https://... or http://...), set
#                  in tesk-tes-config; empty: the manifests' value (an empty
#                  issuer: the TES API is not ready until one is set)
#   EVENT_DISPLAY_IMAGE  the dead-letter sink's image (default Eventing's
#                  event_display on gcr.io, as dead-letters.yaml names it)
#   KUBECTL, KO    the commands (default kubectl, ko)
#   KUBE_CONTEXT   the kubectl context to deploy to (default: the current one)
#   KO_DOCKER_REPO see above
#   PRINT_ONLY=1   print the manifests instead of applying them
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KUBECTL="${KUBECTL:-kubectl}"
KO="${KO:-ko}"
HANDLER_IMAGE="${HANDLER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-handler:latest}"
TES_IMAGE="${TES_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-tes:latest}"
FILER_IMAGE="${FILER_IMAGE:-ghcr.io/elixir-cloud-aai/tesk-knative-filer:latest}"
ko_ref="ko://github.com/elixir-cloud-aai/tesk-knative/cmd/handler"
ko_tes_ref="ko://github.com/elixir-cloud-aai/tesk-knative/cmd/tes"
event_display_ref="gcr.io/knative-releases/knative.dev/eventing/cmd/event_display"
EVENT_DISPLAY_IMAGE="${EVENT_DISPLAY_IMAGE:-$event_display_ref}"
OIDC_ISSUER="${OIDC_ISSUER:-}"

die() { echo "deploy: $*" >&2; exit 1; }

# The handler joins FILER_NAME and FILER_VERSION with ':', so the filer
# image needs a tag, not a digest.
case "$FILER_IMAGE" in
*@*) die "FILER_IMAGE=$FILER_IMAGE: give the filer image by tag (name:tag), not by digest" ;;
esac
filer_name="$FILER_IMAGE"
filer_tag="latest"
last="${FILER_IMAGE##*/}"
if [[ "$last" == *:* ]]; then
	filer_tag="${last##*:}"
	filer_name="${FILER_IMAGE%:*}"
fi
for v in "$HANDLER_IMAGE" "$TES_IMAGE" "$filer_name" "$filer_tag" "$EVENT_DISPLAY_IMAGE"; do
	[[ "$v" =~ ^[A-Za-z0-9._/:@-]+$ ]] || die "not an image reference: $v"
done
if [[ -n "$OIDC_ISSUER" && ! "$OIDC_ISSUER" =~ ^https?://[A-Za-z0-9._:/%~-]+$ ]]; then
	die "OIDC_ISSUER=$OIDC_ISSUER: give the issuer's URL, https://host[:port][/path]"
fi

command -v "$KUBECTL" >/dev/null || die "$KUBECTL not found: install kubectl (https://kubernetes.io/docs/tasks/tools/)"
k() {
	if [[ -n "${KUBE_CONTEXT:-}" ]]; then
		"$KUBECTL" --context "$KUBE_CONTEXT" "$@"
	else
		"$KUBECTL" "$@"
	fi
}

render() {
	if [[ -n "${KO_DOCKER_REPO:-}" ]] && command -v "$KO" >/dev/null; then
		echo "deploy: ko resolve -k config/knative (handler built and pushed to $KO_DOCKER_REPO)" >&2
		KO_DEFAULTBASEIMAGE="${KO_DEFAULTBASEIMAGE:-gcr.io/distroless/static:nonroot}" \
			"$KO" resolve -k "$root/config/knative"
	else
		k kustomize "$root/config/knative" | sed -e "s|$ko_ref|$HANDLER_IMAGE|g" -e "s|$ko_tes_ref|$TES_IMAGE|g"
	fi
}

issuer_edit=()
if [[ -n "$OIDC_ISSUER" ]]; then
	issuer_edit=(-e "s|^([[:space:]]+OIDC_ISSUER:).*$|\1 \"$OIDC_ISSUER\"|")
fi
manifests="$(render | sed -E \
	-e "s|^([[:space:]]+FILER_NAME:).*$|\1 \"$filer_name\"|" \
	-e "s|^([[:space:]]+FILER_VERSION:).*$|\1 \"$filer_tag\"|" \
	-e "s|$event_display_ref|$EVENT_DISPLAY_IMAGE|g" \
	"${issuer_edit[@]}")"
if grep -q "ko://" <<<"$manifests"; then
	die "a ko:// reference is left in the manifests"
fi

if [[ "${PRINT_ONLY:-}" == 1 ]]; then
	printf '%s\n' "$manifests"
	exit 0
fi
echo "deploy: handler and TES API $( [[ -n "${KO_DOCKER_REPO:-}" ]] && command -v "$KO" >/dev/null && echo "(ko)" || echo "$HANDLER_IMAGE $TES_IMAGE"), filer $filer_name:$filer_tag" >&2
printf '%s\n' "$manifests" | k apply -f -
