# TESK on Knative: build, test and run locally.
SHELL := /bin/bash
GO ?= go

# Test timeouts: the whole suite runs well within CI's 90 minutes.
TEST_TIMEOUT ?= 40m

# Build tags of the tests that need more than Go: integration (real FTP, S3
# and HTTP servers on loopback, runc), e2e (the local cluster, a browser).
TEST_TAGS ?= integration,e2e

# The build's version, from git: the tag (v0.3.0), or a description of a
# later commit (v0.3.0-4-gabc1234, -dirty with local changes); 0.0.0-dev
# outside git. The programs report it (internal/version), the images are
# tagged with it and make chart packages the chart as it.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
endif
LDFLAGS := -X github.com/elixir-cloud-aai/tesk-knative/internal/version.Version=$(VERSION)

.PHONY: all build test test-unit e2e dev demo bench vet version
all: build

# The programs: static (CGO_ENABLED=0), without this machine's paths.
GOBUILDFLAGS := -trimpath
build:
	CGO_ENABLED=0 $(GO) build $(GOBUILDFLAGS) -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# The make targets' own Go programs (the local cluster's command, the demo,
# the benches) are built as build builds the programs, so that they reuse
# the packages it compiled: with other flags every dependency they share
# (client-go and the rest) is compiled a second time.
GORUN = CGO_ENABLED=0 $(GO) run $(GOBUILDFLAGS)

version:
	@echo $(VERSION)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TEST_TAGS) ./...
	$(GO) vet -tags knative ./test/knative/...
	cd test/helm && $(GO) vet ./...

# The whole suite: unit tests, filer tests against real servers, the local
# control plane's own tests, the end-to-end tests (the dashboard's in
# headless Chromium among them) and the manifest checks (TEST_TAGS: the tests
# that need servers or runc carry the build tag integration, those that need a
# cluster or a browser e2e), and last the tests on real Knative
# (test-knative) and the Broker on the NATS JetStream channel
# (test-knative-nats). It builds (or reuses from the cache) and installs
# everything it needs first.
test: cluster-bins node-deps filer-deps image-deps browser-deps vet test-helm
	$(GO) test -tags $(TEST_TAGS) -count=1 -p 2 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory test-knative
	$(MAKE) --no-print-directory test-knative-nats

# The tests on real Knative (test/knative, build tag knative): a local
# cluster of their own with Knative Eventing and Serving on the real node,
# config/knative deployed by hack/deploy.sh, TES tasks through the Broker,
# the Triggers, the ApiServerSource's adapter and a handler that scales
# from zero. TESK_KNATIVE_CLUSTER=<dir> runs them on a cluster started with
# make cluster-up KNATIVE=1 CLUSTER_DIR=<dir> instead, and leaves it up.
# The packages are named: test/knative/natss starts a cluster of its own
# (make test-knative-nats).
KNATIVE_TEST_PKGS = ./test/knative/ ./test/knative/cmd/...
.PHONY: test-knative
test-knative: cluster-bins node-deps image-deps
	$(GO) test -tags knative -count=1 -timeout $(TEST_TIMEOUT) -v $(KNATIVE_TEST_PKGS)

# A Broker on the NATS JetStream channel (test/knative/natss): a local
# cluster of its own with Knative and NATS (cluster-up KNATIVE=1 NATS=1's)
# and two fake nodes, config/knative deployed, Eventing's
# authentication-oidc on (the channel's dispatcher, as build-natss.sh
# patches it, sends each delivery with the Subscription's token), the
# channel's dispatcher pods deleted while events are sent, every event the
# Broker accepted delivered; the same experiment on the in-memory channel:
# synchronous (the chart's default), every event it accepted delivered;
# asynchronous, what it loses is recorded; and config/knative's Broker on
# JetStream, 50 tasks whose pods the fake nodes play, the channel's
# dispatcher, the Broker's ingress and filter and a handler pod deleted
# twice while they run and the sweep held: every task COMPLETE, no Job
# created twice; then the sweep restored, 20 tasks more while the
# ApiServerSource's adapter is deleted twice: every task COMPLETE, no Job
# created twice (TestDurableOnJetStream).
.PHONY: test-knative-nats
# TestDurableOnJetStream runs apart (make test-knative-durable), not in
# make test: with the sweep held, a send of the ApiServerSource's adapter
# that fails while the channel's receiver or the Broker's ingress restarts
# is not sent again (Eventing v0.50.0's adapter does not retry), so the
# test passes or not by when the pods die (2 passes, then 5 of 50 tasks
# stuck on 2026-12-08).
test-knative-nats: cluster-bins natss-bins node-deps image-deps
	$(GO) test -tags knative -count=1 -timeout $(TEST_TIMEOUT) -v -skip TestDurableOnJetStream ./test/knative/natss/

.PHONY: test-knative-durable
test-knative-durable: cluster-bins natss-bins node-deps image-deps
	$(GO) test -tags knative -count=1 -timeout $(TEST_TIMEOUT) -v -run TestDurableOnJetStream ./test/knative/natss/

# Only the unit tests (plain go test ./...): the pure logic, the decoders and
# the layer that talks to the API server on a fake clientset; nothing built,
# no servers.
test-unit:
	$(GO) test -count=1 ./...

# Every fuzz target for FUZZTIME each (a duration, or executions as 1000000x).
FUZZTIME ?= 5s
.PHONY: fuzz
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./hack/fuzz.sh

# The dashboard's browser tests drive Debian's chromium (headless).
.PHONY: browser-deps
browser-deps:
	./test/browser-deps.sh

# Only the end-to-end tests of the task flow and timers (and the dashboard's
# in a browser).
e2e: cluster-bins browser-deps filer-deps
	$(GO) test -tags e2e -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/...

# The handler on :8080 with the Role of config/knative, fed by the
# ApiServerSource adapter, on the local cluster (started if it is not up), in
# the foreground until interrupted.
dev: up-bins build $(NODE_DEPS)
	@$(GORUN) ./test/cluster/cmd/cluster status -dir $(CLUSTER_DIR) >/dev/null 2>&1 || $(MAKE) --no-print-directory cluster-up
	$(GORUN) ./test/dev -dir $(CLUSTER_DIR)

# The demo: the local cluster, the handler, the TES API and the adapter, one
# example task (examples/tes-task.json, through the TES API) followed from
# submission to COMPLETE; the cluster is stopped afterwards. KNATIVE=1:
# config/knative on real Knative
# (test/knative/cmd/demo), the task followed hop by hop through the Broker
# and the handler's pods from zero.
DEMO_CMD = $(if $(KNATIVE),./test/knative/cmd/demo,./test/dev -demo)
demo: up-bins build $(NODE_DEPS) $(if $(KNATIVE),image-deps)
	@$(GORUN) ./test/cluster/cmd/cluster status -dir $(CLUSTER_DIR) >/dev/null 2>&1 || $(MAKE) --no-print-directory cluster-up
	@status=0; $(GORUN) $(DEMO_CMD) -dir $(CLUSTER_DIR) || status=$$?; $(MAKE) --no-print-directory cluster-down; exit $$status

# Figures: step latency, handler time, API requests per step, sweep cost over
# 1,000 and 10,000 tasks, events per second, what the users' shares cost a
# step and a sweep over 10,000 tasks of 100 users (-only shares alone), cold
# start, and the polling baseline's; the run ends with its summary as BENCHMARKS.md shows it.
# BENCH_DOCS=1 also writes that summary into BENCHMARKS.md and the figures
# README.md quotes from it into README.md (the blocks of make bench).
BENCH_DOCS ?=
bench: control-plane-bins build
	$(GORUN) ./test/bench $(if $(BENCH_DOCS),-summary BENCHMARKS.md -readme README.md)

# What one task keeps in etcd, by kind of object (test/bench -only etcd):
# tasks of four shapes (small, the largest inline content, the longest
# command, several executors) created through bin/tes beside bin/handler
# and the adapter on a local cluster of its own, each run to COMPLETE on
# kwok's pods, their keys read from etcd while they run and once they
# ended; it prints its section of BENCHMARKS.md (a few minutes).
.PHONY: bench-etcd
bench-etcd: control-plane-bins build
	$(GORUN) ./test/bench -only etcd

# Figures of config/knative on real Knative (test/knative/cmd/bench, in one
# run): a task's first Job with the handler at zero and up, the step gap
# through the Broker beside direct delivery, failed deliveries, the memory of
# Knative's pods (BENCHMARKS.md). Starts the cluster with KNATIVE=1 if none
# is up (its API server writing the handler's requests to an audit log),
# and stops it afterwards. COLD: the cold starts (and as many warm ones) to
# time, each after the handler is back at zero, each split to the
# millisecond by the handler pod's milestones (COLD=20: 20 minutes in the
# run BENCHMARKS.md records of 2026-12-07 at fd56f4e;
# KUBELET_FEATURE_GATES sets the real node's kubelet's gates). SCALE: then
# this many tasks of three executors at once, into the handler as Knative
# scales it (0: none; BENCHMARKS.md records SCALE=250 and SCALE=1000 with
# SHARE=30: 16 and 99 minutes here), SHARE of them at once (the
# user's share, QUOTA_TASKS_PER_USER: what the real node's 110 pods and 2
# cores take; 0: all at once). PODS=kwok: the tasks' pods are played by
# four kwok nodes of the same cluster while Knative, the handler and the
# TES API stay on the real node, so that the run measures the control
# path, not the node's pod starts (use SHARE=0). PATHS: the event paths the
# scale run goes through, one after the other, side by side (imc,
# imc-async, jetstream; jetstream starts the cluster with NATS=1).
# BENCHMARKS.md records PODS=kwok COLD=0 SCALE=200 SHARE=0
# PATHS=imc,imc-async,jetstream of 2026-12-08 at f7fb6cd (14 minutes here).
COLD ?= 5
SCALE ?= 0
SHARE ?= 30
PODS ?= real
PATHS ?= imc
ifeq ($(filter $(PODS),real kwok),)
$(error PODS=$(PODS): use PODS=real (the default) or PODS=kwok)
endif
.PHONY: bench-knative
bench-knative: cluster-bins node-deps image-deps $(if $(findstring jetstream,$(PATHS)),natss-bins)
	@$(GORUN) ./test/cluster/cmd/cluster status -dir $(CLUSTER_DIR) >/dev/null 2>&1 || $(MAKE) --no-print-directory cluster-up KNATIVE=1 AUDIT_USERS=system:serviceaccount:tesk:tesk-handler $(if $(filter kwok,$(PODS)),NODES=4) $(if $(findstring jetstream,$(PATHS)),NATS=1)
	@status=0; $(GORUN) ./test/knative/cmd/bench -dir $(CLUSTER_DIR) -cold $(COLD) -scale $(SCALE) -share $(SHARE) -audit-log $(CLUSTER_DIR)/audit.log $(if $(filter kwok,$(PODS)),-played) -paths $(PATHS) || status=$$?; $(MAKE) --no-print-directory cluster-down; exit $$status

# TASKS tasks x 3 executors through the adapter and a stand-in for the
# Broker into bin/handler, then the same with two handler processes behind
# one address (BENCHMARKS.md: 3,889 s for the one-handler run of
# 2026-12-06 at 7ab9f06; each run is bounded by 2 h, benchscale's -timeout).
TASKS ?= 10000
.PHONY: bench-scale
bench-scale: control-plane-bins build
	$(GORUN) ./test/benchscale -tasks $(TASKS)

# The chaos run: CHAOS_TASKS generated TES tasks, clean and then under
# faults (events dropped, duplicated, reordered; the handler SIGKILLed and
# restarted; the handler's writes failed by a proxy before the API server),
# compared task by task (test/chaos). make test runs a short one.
CHAOS_TASKS ?= 200
.PHONY: chaos
chaos: control-plane-bins build
	$(GORUN) ./test/chaos/cmd/chaos -tasks $(CHAOS_TASKS)

# The local control plane (test/cluster): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok and the ApiServerSource
# adapter, built from the Go module proxy into
# $XDG_CACHE_HOME (default ~/.cache)/tesk-knative/cluster/<key>, and the real
# node's kubelet, containerd (with its runc shim and ctr), image registry and
# volume provisioner into .../tesk-knative/node/<key>; reused when present.
# node-deps installs runc, the CNI plugins, iptables and busybox-static from
# Debian (root). build-services.sh builds kube-proxy, CoreDNS and
# kube-network-policies (the Services option) into .../tesk-knative/services/<key>.
.PHONY: cluster-bins node-deps cluster-up cluster-down cluster-status test-cluster
CLUSTER_DIR ?= .cluster
# NODE=real: cluster-up, dev and demo also start a real node (kubelet,
# containerd and runc on this machine; root) and run the tasks there.
NODE ?= kwok
ifeq ($(NODE),real)
CLUSTER_UP_FLAGS := -real
NODE_DEPS := node-deps
else ifneq ($(NODE),kwok)
$(error NODE=$(NODE): use NODE=kwok (the default) or NODE=real)
endif
# SERVICES=1 (NODE=real implied): cluster-up also gives the real node
# kube-proxy, cluster DNS, the API server at the kubernetes Service, the
# Deployment and endpoint controllers and NetworkPolicy enforcement.
SERVICES ?=
ifneq ($(SERVICES),)
CLUSTER_UP_FLAGS := -real -services
NODE_DEPS := node-deps
endif
# KNATIVE=1 (SERVICES=1 implied): cluster-up also runs Knative Eventing and
# Serving on the real node (build-knative.sh builds them).
KNATIVE ?=
ifneq ($(KNATIVE),)
CLUSTER_UP_FLAGS := -real -services -knative
NODE_DEPS := node-deps
endif
# NATS=1 (with KNATIVE=1): cluster-up also runs a NATS server with JetStream
# and the NatsJetStreamChannel of eventing-natss (build-natss.sh builds
# them); the default channel stays the in-memory one.
NATS ?=
ifneq ($(NATS),)
ifeq ($(KNATIVE),)
$(error NATS=1 needs KNATIVE=1)
endif
CLUSTER_UP_FLAGS += -nats
endif

# NODES: the number of kwok's fake nodes (beside a real node, tainted: only
# the pods of a namespace the cluster's PlayPods names go to them).
NODES ?=
ifneq ($(NODES),)
CLUSTER_UP_FLAGS += -nodes $(NODES)
endif

# KUBELET_FEATURE_GATES (with a real node): feature gates the kubelet also
# sets, as its --feature-gates flag takes them (e.g. EventedPLEG=true, an
# alpha gate: BENCHMARKS.md's cold start without the kubelet's relist).
KUBELET_FEATURE_GATES ?=
ifneq ($(KUBELET_FEATURE_GATES),)
CLUSTER_UP_FLAGS += -kubelet-feature-gates $(KUBELET_FEATURE_GATES)
endif

# cluster-bins builds all four (the test suite runs every kind of
# cluster); cluster-up, dev and demo build only what the cluster they start
# runs (up-bins): the control plane and kwok always, the real node's
# binaries with NODE=real, the services' with SERVICES=1, Knative with
# KNATIVE=1. Each is cached on its own.
.PHONY: control-plane-bins node-bins services-bins knative-bins natss-bins up-bins
cluster-bins: control-plane-bins node-bins services-bins knative-bins

control-plane-bins:
	GO=$(GO) ./test/cluster/build.sh

node-bins:
	GO=$(GO) ./test/cluster/build-node.sh

services-bins:
	GO=$(GO) ./test/cluster/build-services.sh

knative-bins:
	GO=$(GO) ./test/cluster/build-knative.sh

natss-bins:
	GO=$(GO) ./test/cluster/build-natss.sh

up-bins: control-plane-bins $(if $(findstring -real,$(CLUSTER_UP_FLAGS)),node-bins) $(if $(findstring -services,$(CLUSTER_UP_FLAGS)),services-bins) $(if $(findstring -knative,$(CLUSTER_UP_FLAGS)),knative-bins) $(if $(findstring -nats,$(CLUSTER_UP_FLAGS)),natss-bins)

node-deps:
	./test/cluster/node-deps.sh

# Starts the cluster in the background; admin kubeconfig in .cluster/kubeconfig.
# AUDIT_USERS (comma-separated): the API server logs their requests to
# $(CLUSTER_DIR)/audit.log.
cluster-up: up-bins $(NODE_DEPS)
	$(GORUN) ./test/cluster/cmd/cluster up -dir $(CLUSTER_DIR) $(CLUSTER_UP_FLAGS) $(if $(AUDIT_USERS),-audit-users $(AUDIT_USERS))

# Stops every process cluster-up started and removes its state.
cluster-down:
	$(GORUN) ./test/cluster/cmd/cluster down -dir $(CLUSTER_DIR)

cluster-status:
	$(GORUN) ./test/cluster/cmd/cluster status -dir $(CLUSTER_DIR)

# The control plane's own tests (pod fates, logs, adapter, CRDs, start/stop).
test-cluster: cluster-bins
	$(GO) test -tags e2e -count=1 -timeout 20m ./test/cluster/...

# Knative packaging: the manifests of config/knative, the images, the
# deployment, and a kind cluster with Knative for users who have Docker.
.PHONY: validate-manifests image deploy kind-up kind-down kind-deploy
IMAGE_REPO ?= $(if $(KO_DOCKER_REPO),$(KO_DOCKER_REPO),ghcr.io/elixir-cloud-aai)
IMAGE_TAG ?= $(VERSION)
# Tags the three images also carry (space-separated; empty: none).
IMAGE_ALSO_TAGS ?= latest
HANDLER_IMAGE ?= $(IMAGE_REPO)/tesk-knative-handler:$(IMAGE_TAG)
FILER_IMAGE ?= $(IMAGE_REPO)/tesk-knative-filer:$(IMAGE_TAG)
TES_IMAGE ?= $(IMAGE_REPO)/tesk-knative-tes:$(IMAGE_TAG)
KIND_CLUSTER ?= tesk

# Every object of config/knative dry-run against the local API server with
# the Knative CRDs and webhook checks, broken copies rejected, and the
# manifests held to the code (RBAC, variables, event types).
validate-manifests: cluster-bins
	$(GO) test -tags e2e -count=1 -timeout 10m ./test/manifests/...

# The handler's, the TES API's and the filer's images, named HANDLER_IMAGE,
# TES_IMAGE and FILER_IMAGE (tagged IMAGE_TAG, the build's VERSION), also
# tagged IMAGE_ALSO_TAGS (latest), their programs built as VERSION. By
# default (IMAGE_BUILDER=ociimage) as OCI image tarballs in IMAGE_DIR (bin/images/handler.tar, tes.tar, filer.tar), built by
# hack/ociimage without Docker or a registry: docker load -i, ctr -n k8s.io
# images import, kind load image-archive or crane push take them.
# IMAGE_BUILDER=ko builds and pushes them with ko to KO_DOCKER_REPO;
# IMAGE_BUILDER=docker builds the Dockerfile's targets handler, tes and filer
# with a Docker daemon.
IMAGE_BUILDER ?= ociimage
IMAGE_DIR ?= bin/images
image:
	GO=$(GO) IMAGE_BUILDER=$(IMAGE_BUILDER) IMAGE_DIR=$(IMAGE_DIR) HANDLER_IMAGE=$(HANDLER_IMAGE) TES_IMAGE=$(TES_IMAGE) FILER_IMAGE=$(FILER_IMAGE) VERSION=$(VERSION) IMAGE_ALSO_TAGS="$(IMAGE_ALSO_TAGS)" ./hack/image.sh

# Every image hack/ociimage builds, as tarballs in IMAGE_DIR: the three above,
# the pod sandbox image (registry.k8s.io/pause) and the busybox stand-ins
# tagged busybox, alpine and ubuntu for local tests (not the real
# distributions).
.PHONY: images-all image-deps
images-all:
	$(GORUN) ./hack/ociimage -go $(GO) -out $(IMAGE_DIR) -version $(VERSION) -also-tags "$(IMAGE_ALSO_TAGS)" -handler-image $(HANDLER_IMAGE) -tes-image $(TES_IMAGE) -filer-image $(FILER_IMAGE)

# What hack/ociimage and its integration test need from Debian's packages
# (ca-certificates, busybox-static, runc): installed once, then only checked.
image-deps:
	./hack/image-deps.sh

# kubectl apply -k config/knative with HANDLER_IMAGE in place of the ko://
# reference and FILER_IMAGE as the filer (with ko: ko resolve -k), into the
# current kubectl context (or KUBE_CONTEXT).
deploy:
	HANDLER_IMAGE=$(HANDLER_IMAGE) TES_IMAGE=$(TES_IMAGE) FILER_IMAGE=$(FILER_IMAGE) ./hack/deploy.sh

# kind + Knative Serving (Kourier) + Knative Eventing (in-memory channel,
# MT channel-based Broker); needs Docker, kind and kubectl.
kind-up:
	KIND_CLUSTER=$(KIND_CLUSTER) ./hack/kind-up.sh

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)

# Build the three images as dev.local/... tarballs (Knative does not resolve
# dev.local tags in a registry), load them into kind, deploy.
kind-deploy:
	$(MAKE) --no-print-directory image IMAGE_REPO=dev.local KO_DOCKER_REPO= IMAGE_BUILDER=ociimage
	for i in handler tes filer; do kind load image-archive --name $(KIND_CLUSTER) $(IMAGE_DIR)/$$i.tar || exit 1; done
	$(MAKE) --no-print-directory deploy IMAGE_REPO=dev.local KO_DOCKER_REPO= KUBE_CONTEXT=kind-$(KIND_CLUSTER)

# The filer's tests and benchmark need vsftpd, curl, an FTP test user and
# versitygw (built into $XDG_CACHE_HOME/tesk-knative/tools): test/filer-deps.sh
# installs them once and then only checks.
.PHONY: filer-deps test-filer bench-filer
filer-deps:
	GO=$(GO) ./test/filer-deps.sh

# The filer against real servers on loopback (versitygw for S3, vsftpd for
# FTP, net/http), with the taskspec helpers it relies on.
test-filer: filer-deps
	$(GO) test -tags integration -count=1 -timeout 15m ./taskspec/... ./filer/... ./cmd/filer/...

# One 1 GiB file and 1,000 small files each way through S3 and HTTP on
# loopback: MB/s, files/s and peak RSS of the filer next to curl's (a few
# minutes; FILER_BENCH_REPS runs each, default 3).
bench-filer: filer-deps
	$(GO) test -tags integration -count=1 -run '^$$' -bench BenchmarkFiler -benchtime 1x -timeout 30m ./filer/

# The Helm chart (charts/tesk-knative): lint, template tests and schema
# refusals with the Helm v4 SDK (test/helm, a module of its own).
.PHONY: test-helm chart
test-helm:
	cd test/helm && $(GO) test -count=1 ./...

# config/knative written as the chart's rendering with
# config/knative/values.yaml (make test-helm fails when it differs).
.PHONY: manifests
manifests:
	cd test/helm && $(GO) run ./cmd/render

# The chart packaged into dist/ as the build's VERSION: the chart's version
# is VERSION without its v (0.3.0; 0.0.0-dev+<commit> for a VERSION that is
# not SemVer), its appVersion and its images' tags are VERSION.
chart:
	cd test/helm && $(GO) run ./cmd/package -out ../../dist -version $(VERSION)
