# syntax=docker/dockerfile:1
#
# The three images of TESK on Knative, from one build:
#
#   docker build --target handler -t <registry>/tesk-knative-handler:<tag> .
#       the handler's Knative Service (config/knative/service.yaml);
#   docker build --target tes -t <registry>/tesk-knative-tes:<tag> .
#       the TES API's Knative Service (config/knative/tes.yaml);
#   docker build --target filer -t <registry>/tesk-knative-filer:<tag> .
#       the inputs and outputs filer jobs: the handler runs it as
#       FILER_NAME:FILER_VERSION (config/knative/config.yaml), passing only
#       arguments, so its entrypoint is the filer.
#
# Static binaries (CGO off) on distroless/static, which has CA certificates
# and time zones, no shell, and runs as the nonroot user 65532 (the filer's
# default runAsUser).
#
# VERSION (a build ARG; make image IMAGE_BUILDER=docker passes the build's
# git describe) is the version the programs report:
#   docker build --build-arg VERSION=v0.3.0 --target handler ...
#
# make image does not need this file: by default it builds the same three
# images as OCI tarballs without Docker (hack/ociimage, into bin/images; the
# base is made from the host's CA certificates, without time zones unless
# -zoneinfo). make image IMAGE_BUILDER=docker builds these targets instead.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=0.0.0-dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X github.com/elixir-cloud-aai/tesk-knative/internal/version.Version=${VERSION}" \
    -o /out/ ./cmd/handler ./cmd/tes ./cmd/filer

FROM gcr.io/distroless/static:nonroot AS filer
COPY --from=build /out/filer /filer
USER 65532:65532
ENTRYPOINT ["/filer"]

FROM gcr.io/distroless/static:nonroot AS tes
COPY --from=build /out/tes /tes
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/tes"]

# The default target (last).
FROM gcr.io/distroless/static:nonroot AS handler
COPY --from=build /out/handler /handler
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/handler"]
