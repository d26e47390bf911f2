# TESK on Knative: build, test and run locally.
SHELL := /bin/bash
GO ?= go

.PHONY: all build test
all: build

build:
	$(GO) build -o bin/ ./cmd/...
