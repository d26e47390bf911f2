#!/usr/bin/env bash
# A kind cluster with Knative Serving (Kourier as ingress) and Knative Eventing
# (in-memory channel, multi-tenant channel-based Broker), to deploy TESK on
# Knative on a machine with Docker:
#
#   make kind-up        # this script
#   make kind-deploy    # build the images, load them into kind, deploy
#   make kind-down      # delete the cluster
#
# The Knative releases are the ones config/knative runs on in make
# test-knative: Serving 1.23 (knative.dev/serving v0.50.0) and Eventing 1.23
# (knative.dev/eventing v0.50.0). make validate-manifests also holds the
# manifests to the CRDs of Serving 1.24 (v0.51.0).
#
# Environment:
#   KIND_CLUSTER              cluster name (default tesk)
#   KNATIVE_SERVING_VERSION   default 1.23.0
#   KNATIVE_EVENTING_VERSION  default 1.23.0
#   KOURIER_VERSION           default: KNATIVE_SERVING_VERSION
#   KIND_HTTP_PORT            host port of the Kourier ingress on 127.0.0.1 (default 31080)
#   KIND, KUBECTL             the commands (default kind, kubectl)
set -euo pipefail

CLUSTER="${KIND_CLUSTER:-tesk}"
SERVING="${KNATIVE_SERVING_VERSION:-1.23.0}"
EVENTING="${KNATIVE_EVENTING_VERSION:-1.23.0}"
KOURIER="${KOURIER_VERSION:-$SERVING}"
HTTP_PORT="${KIND_HTTP_PORT:-31080}"
KIND="${KIND:-kind}"
KUBECTL="${KUBECTL:-kubectl}"
releases="https://github.com/knative"

die() { echo "kind-up: $*" >&2; exit 1; }
step() { echo "kind-up: $*"; }

command -v docker >/dev/null || die "docker not found: kind needs Docker (https://docs.docker.com/get-docker/)"
docker info >/dev/null 2>&1 || die "the Docker daemon does not answer ('docker info'): start it"
command -v "$KIND" >/dev/null || die "kind not found: go install sigs.k8s.io/kind@latest (https://kind.sigs.k8s.io)"
command -v "$KUBECTL" >/dev/null || die "kubectl not found (https://kubernetes.io/docs/tasks/tools/)"

if "$KIND" get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
	step "cluster $CLUSTER exists; installing Knative into it"
else
	step "creating kind cluster $CLUSTER (Kourier on 127.0.0.1:$HTTP_PORT)"
	"$KIND" create cluster --name "$CLUSTER" --wait 180s --config - <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    extraPortMappings:
      - containerPort: 31080
        hostPort: $HTTP_PORT
        listenAddress: 127.0.0.1
KIND
fi

k() { "$KUBECTL" --context "kind-$CLUSTER" "$@"; }
available() { k wait deployment --all --for=condition=Available --timeout=300s -n "$1"; }

step "Knative Serving $SERVING"
k apply -f "$releases/serving/releases/download/knative-v$SERVING/serving-crds.yaml"
k wait crd --all --for=condition=Established --timeout=120s
k apply -f "$releases/serving/releases/download/knative-v$SERVING/serving-core.yaml"
available knative-serving

step "Kourier $KOURIER (NodePort 31080)"
k apply -f "$releases/net-kourier/releases/download/knative-v$KOURIER/kourier.yaml"
available kourier-system
k -n kourier-system patch service kourier -p '{"spec":{"type":"NodePort","ports":[{"port":80,"nodePort":31080}]}}'
k -n knative-serving patch configmap config-network --type merge \
	-p '{"data":{"ingress-class":"kourier.ingress.networking.knative.dev"}}'
# Services get http://<name>.<namespace>.127.0.0.1.sslip.io:<port>; the TESK
# handler itself is cluster-local (see config/knative/service.yaml).
k -n knative-serving patch configmap config-domain --type merge -p '{"data":{"127.0.0.1.sslip.io":""}}'

step "Knative Eventing $EVENTING"
k apply -f "$releases/eventing/releases/download/knative-v$EVENTING/eventing-crds.yaml"
k wait crd --all --for=condition=Established --timeout=120s
k apply -f "$releases/eventing/releases/download/knative-v$EVENTING/eventing-core.yaml"
k apply -f "$releases/eventing/releases/download/knative-v$EVENTING/in-memory-channel.yaml"
k apply -f "$releases/eventing/releases/download/knative-v$EVENTING/mt-channel-broker.yaml"
available knative-eventing
# config/knative's defaults need Eventing's authentication-oidc: the Triggers
# send the handler a token for its audience, and EventPolicies name each
# sender the Broker takes.
k -n knative-eventing patch configmap config-features --type merge -p '{"data":{"authentication-oidc":"enabled"}}'

step "ready: kubectl context kind-$CLUSTER; next: make kind-deploy"
