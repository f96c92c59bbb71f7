# archway's build, test and development entry points. Every target that needs
# a tool runs `make tools` first; tools are built once into a cache outside the
# clone (ARCHWAY_CACHE, default ~/.cache/archway) and reused.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ARCHWAY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/archway
export ARCHWAY_CACHE
# -trimpath everywhere, as make images builds its binaries: the build cache
# keys a package by it, so the tests' compile of archway for this machine
# is make images' too (one compile of every package fewer on a new
# machine). The paths in stack traces are module paths.
export GOFLAGS := -buildvcs=false -trimpath
export GOTOOLCHAIN := local

ASSETS = $(shell hack/tools.sh assets)
export KUBEBUILDER_ASSETS = $(ASSETS)
CONTROLLER_GEN = $(ASSETS)/controller-gen
GOLANGCI_LINT = $(ASSETS)/golangci-lint

# Build tags buildah needs to build with no extra C libraries: OpenPGP in Go
# instead of gpgme, no btrfs graph driver, and the system's libsqlite3 (which
# libsqlite3-dev provides) instead of a bundled copy; and Go's own resolver
# and user lookups (netgo, osusergo), which make images needs for static
# binaries: with its tags and -trimpath, every compile for this machine
# (tests, make build, make images, the bed's tools) is one.
BUILD_TAGS := containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3
# -s -w leave the symbol table and DWARF out (stack traces keep their names):
# chroot isolation copies the builder's binary into memory twice per RUN step.
GO_LDFLAGS := -s -w -X github.com/archway-build/archway/pkg/version.Version=$(VERSION)
GO_BUILD_FLAGS := -tags "$(BUILD_TAGS)" -ldflags "$(GO_LDFLAGS)"
BIN_DIR := bin

# Test runs: hack/test-jobs.sh runs the unit tests and each bed suite (a
# package: each starts its own bed) as jobs, TEST_JOBS at a time, longest
# first; the suites with a real node run one after the other.
TEST_FLAGS ?=
TEST_JOBS ?= 3
UNIT_PKGS = $(shell go list -tags "$(BUILD_TAGS)" ./... | grep -v /test/)
# The race detector where the code under test runs in the test's process:
# the unit tests and the bed suites that run controllers and webhooks
# in-process (RACE= turns it off). The other bed suites (bed, builder,
# images, node, monitoring) run without it: their code runs in programs
# they start (builder, buildah, build-controller, kubelet).
RACE ?= -race
MODULE = github.com/archway-build/archway
RACE_SUITES = $(addprefix $(MODULE)/test/integration/,buildconfig imagetrigger binary build api manifestlist \
	webhookcert placement operator scheduling/policy scheduling/protection)
# The packages with tests of their own.
TESTED_PKGS = go list -tags "$(BUILD_TAGS)" -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}'
INTEGRATION_PKGS = $(shell $(TESTED_PKGS) ./test/bed/... ./test/integration/...)
# test/e2e/openshiftreal needs OpenShift's own programs, too long to build
# for CI's budget: `make test-openshift` runs it.
E2E_PKGS = $(filter-out $(MODULE)/test/e2e/openshiftreal,$(shell $(TESTED_PKGS) ./test/e2e/...))
# The suites whose bed has a real node: one real node per machine.
REAL_NODE_SUITES = $(addprefix $(MODULE)/test/integration/,images node)
# The longest jobs, started first (measured: docs/dev-guide/benchmarks.md).
SLOW_FIRST = $(MODULE)/test/e2e/install $(MODULE)/test/e2e/upgrade unit $(addprefix $(MODULE)/test/integration/,placement builder \
	scheduling/protection monitoring) $(MODULE)/test/bed $(MODULE)/test/e2e
TEST_JOBS_ENV = BUILD_TAGS="$(BUILD_TAGS)" GO_LDFLAGS="$(GO_LDFLAGS)" RACE="$(RACE)" TEST_FLAGS="$(TEST_FLAGS)" \
	TEST_JOBS="$(TEST_JOBS)" UNIT_PKGS="$(UNIT_PKGS)" RACE_SUITES="$(RACE_SUITES)" \
	INTEGRATION_PKGS="$(INTEGRATION_PKGS)" E2E_PKGS="$(E2E_PKGS)" REAL_NODE_SUITES="$(REAL_NODE_SUITES)" \
	SLOW_FIRST="$(SLOW_FIRST)"

.PHONY: all
all: build

.PHONY: build
build: ## Build build-controller, builder and emulation-setup into bin/.
	go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/ ./cmd/build-controller ./cmd/builder ./cmd/emulation-setup

# The kubectl plugin as release binaries: pure Go (no cgo, none of the
# builder's C libraries), so every platform cross-compiles from one machine.
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 linux/ppc64le linux/s390x darwin/amd64 darwin/arm64 windows/amd64

# Where the release's plugin archives are downloaded from, for the krew
# manifest.
PLUGIN_RELEASE_URL ?= https://github.com/archway-build/archway/releases/download/$(VERSION)

# Where plugin-release writes (its own files there are replaced).
PLUGIN_OUT ?= $(BIN_DIR)/release

.PHONY: plugin-release
plugin-release: ## Build kubectl-archway for each of PLUGIN_PLATFORMS into PLUGIN_OUT (bin/release/): binaries, krew archives, archway.yaml (krew manifest; VERSION=vX.Y.Z), SHA256SUMS.
	@mkdir -p $(PLUGIN_OUT) && rm -f $(PLUGIN_OUT)/kubectl-archway_* $(PLUGIN_OUT)/archway.yaml $(PLUGIN_OUT)/SHA256SUMS
	@for p in $(PLUGIN_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		out=$(PLUGIN_OUT)/kubectl-archway_$${os}_$${arch}$$ext; \
		echo "==> $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath \
			-ldflags "-s -w -X github.com/archway-build/archway/pkg/version.Version=$(VERSION)" -o $$out ./cmd/kubectl-archway; \
	done
	@go run ./hack/krew-manifest --dir $(PLUGIN_OUT) --version "$(VERSION)" --url "$(PLUGIN_RELEASE_URL)"
	@cd $(PLUGIN_OUT) && sha256sum kubectl-archway_* > SHA256SUMS && cat SHA256SUMS

.PHONY: tools
tools: ## Install everything the tests and the bed need (idempotent, cached).
	hack/tools.sh test

.PHONY: tools-all
tools-all: ## Install every tool, the linters and controller-gen included.
	hack/tools.sh all

.PHONY: test
test: tools ## Everything CI runs: unit, integration and e2e tests, TEST_JOBS jobs at a time.
	@$(TEST_JOBS_ENV) hack/test-jobs.sh all

.PHONY: test-unit
test-unit: ## Unit tests: pure functions and packages, no bed (with -race; RACE= without).
	go test $(GO_BUILD_FLAGS) $(RACE) $(TEST_FLAGS) $(UNIT_PKGS)

.PHONY: test-integration
test-integration: tools ## Integration tests on the bed (apiserver, scheduler, kwok, registry).
	@$(TEST_JOBS_ENV) hack/test-jobs.sh integration

.PHONY: test-e2e
test-e2e: tools ## End-to-end tests on the full bed: four-platform builds through build-controller and build pods.
	@$(TEST_JOBS_ENV) hack/test-jobs.sh e2e

.PHONY: test-openshift
test-openshift: tools ## archway's custom-builder mode under OpenShift's own apiserver, build controller and oc (hack/openshift.sh builds them: ~30 min cold).
	env $$(hack/openshift.sh env) go test $(GO_BUILD_FLAGS) $(TEST_FLAGS) -p 1 -count=1 -timeout 40m -v ./test/e2e/openshiftreal/

# KEEP=1 leaves the bed running after the demo, until Ctrl-C. INSTALL=1
# installs archway onto the bed with kubectl apply -k (every component a pod)
# instead of running build-controller as a process. KUBECONFIG=FILE given on
# make's command line (not from the environment) builds on that cluster,
# where archway is installed, with DEMO_GIT_URI (a git repository holding
# examples/demo/app; DEMO_CONTEXT_DIR for a directory of it), DEMO_REGISTRY
# (where build pods push), DEMO_BASE_IMAGE and DEMO_NAMESPACE.
KEEP ?=
INSTALL ?=
DEMO_GIT_URI ?=
DEMO_CONTEXT_DIR ?=
DEMO_REGISTRY ?=
DEMO_BASE_IMAGE ?= docker.io/library/busybox:latest
DEMO_NAMESPACE ?= default
DEMO_CLUSTER = $(filter command line,$(origin KUBECONFIG))

.PHONY: demo
demo: ## A four-architecture build, live: on a one-machine cluster (KEEP=1, INSTALL=1) or KUBECONFIG=FILE's.
ifeq ($(DEMO_CLUSTER),)
	@echo "==> Installing the tools the demo needs (kube-apiserver, kube-scheduler, kwok, registry, qemu...; cached after the first run)"
	@hack/tools.sh demo $(if $(INSTALL),kube-controller-manager)
	@echo "==> Building builder and build-controller into $(BIN_DIR)/"
	@$(MAKE) --no-print-directory build
	@go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/demo ./test/e2e/cmd/demo
	@$(BIN_DIR)/demo --bin-dir $(BIN_DIR) $(if $(KEEP),--keep) $(if $(INSTALL),--install)
else
	@go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/demo ./test/e2e/cmd/demo
	@$(BIN_DIR)/demo --cluster "$(KUBECONFIG)" --git-uri "$(DEMO_GIT_URI)" --context-dir "$(DEMO_CONTEXT_DIR)" \
		--registry "$(DEMO_REGISTRY)" --base-image "$(DEMO_BASE_IMAGE)" --namespace "$(DEMO_NAMESPACE)"
endif

# make images REGISTRY=quay.io/me TAG=v0.1.0 [PLATFORMS=...] [BUILDER_BASE_IMAGE=...]:
# see hack/images.sh for every variable.
REGISTRY ?=
TAG ?= $(VERSION)
PLATFORMS ?= linux/amd64,linux/arm64,linux/ppc64le,linux/s390x

.PHONY: images
images: ## Build and push the build-controller, builder and emulation-setup images for PLATFORMS to REGISTRY (buildah as root, or in a user namespace: hack/userns.sh).
	REGISTRY="$(REGISTRY)" TAG="$(TAG)" PLATFORMS="$(PLATFORMS)" VERSION="$(VERSION)" hack/images.sh

# make release-manifests REGISTRY=quay.io/me TAG=v0.1.0 after make images with
# the same REGISTRY and TAG: RELEASE_OUT is manifests/default with every image
# pinned by the digest of the index pushed (and RELEASE_OUT/emulation,
# manifests/emulation pinned). RELEASE_BASE: default, cert-manager, openshift
# or openshift/placement.
# RELEASE_FLAGS: e.g. --authfile FILE.
RELEASE_OUT ?= manifests/release
RELEASE_FLAGS ?=
RELEASE_BASE ?= default

.PHONY: release-manifests
release-manifests: ## Write RELEASE_OUT: the install overlay with every image pinned by digest (after make images).
	go run -tags "$(BUILD_TAGS)" ./hack/release-manifests --registry "$(REGISTRY)" --tag "$(TAG)" \
		--platforms "$(PLATFORMS)" --base "$(RELEASE_BASE)" --out "$(RELEASE_OUT)" $(RELEASE_FLAGS)

# make bundle VERSION=vX.Y.Z: the OLM bundle (registry+v1) of BUNDLE_INSTALL
# (default manifests/default, images by tag; make release gives it the
# pinned overlay) into BUNDLE_OUT, validated with the operator-framework
# library: manifests/ (the ClusterServiceVersion, the CRDs of manifests/crd,
# the objects OLM installs besides), metadata/annotations.yaml,
# bundle.Dockerfile, and cluster.yaml (what OLM cannot install, for the
# administrator). BUNDLE_FLAGS: e.g. --require-digests, --channel stable.
BUNDLE_INSTALL ?= manifests/default
BUNDLE_OUT ?= $(BIN_DIR)/bundle
BUNDLE_FLAGS ?=

.PHONY: bundle
bundle: ## Write the OLM bundle of BUNDLE_INSTALL into BUNDLE_OUT (VERSION=vX.Y.Z), validated.
	go run -tags "$(BUILD_TAGS)" ./hack/bundle --version "$(VERSION)" --install "$(BUNDLE_INSTALL)" \
		--out "$(BUNDLE_OUT)" --platforms "$(PLATFORMS)" $(BUNDLE_FLAGS)

# make release VERSION=vX.Y.Z REGISTRY=quay.io/me: everything a release
# ships, into RELEASE_DIR (bin/release/VERSION): see hack/release.sh.
RELEASE_DIR ?= $(BIN_DIR)/release/$(VERSION)

.PHONY: release
release: ## Build a release into RELEASE_DIR (VERSION=vX.Y.Z REGISTRY=...): images, manifests pinned by digest, plugin + krew manifest, OLM bundle.
	@MAKE="$(MAKE)" VERSION="$(if $(filter file,$(origin VERSION)),,$(VERSION))" REGISTRY="$(REGISTRY)" PLATFORMS="$(PLATFORMS)" RELEASE_DIR="$(RELEASE_DIR)" \
		RELEASE_FLAGS="$(RELEASE_FLAGS)" hack/release.sh

.PHONY: generate
generate: ## Generate deepcopy code, apply configurations and CRDs with controller-gen, and the API reference pages.
	hack/tools.sh controller-gen
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	rm -rf pkg/apis/*/*/applyconfiguration
	$(CONTROLLER_GEN) applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false paths=./pkg/apis/... output:crd:artifacts:config=manifests/crd/bases
	go run ./hack/apidocs -apis pkg/apis -out docs/reference/api
	@# RBAC is not generated: each component's roles (manifests/*/rbac) are
	@# written by hand, each rule next to its reason, and TestInstall shows
	@# each rule is needed.

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- pkg/apis manifests docs/reference/api)" ]; then \
		git status --porcelain -- pkg/apis manifests docs/reference/api; git diff --stat -- pkg/apis manifests docs/reference/api; \
		echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

# PURGE_APT=1 removes the cross-build apt packages first, to show make tools
# installs them; KEEP=1 keeps the clone and caches (in /tmp/archway-ci-cold-*).
PURGE_APT ?=

.PHONY: ci-cold
ci-cold: ## Run .ci/run as a new machine would: a fresh clone of HEAD, every cache empty; prints stage times.
	hack/ci-cold.sh $(if $(PURGE_APT),--purge-apt)

.PHONY: demo-cold
demo-cold: ## Run make demo as a new machine would: a fresh clone of HEAD, every cache empty; prints its time.
	hack/ci-cold.sh --demo

.PHONY: lint
lint: ## golangci-lint with the repository's .golangci.yml.
	hack/tools.sh golangci-lint
	$(GOLANGCI_LINT) run --allow-parallel-runners --build-tags "$(BUILD_TAGS)" ./...

.PHONY: docs
docs: ## Build the docs site (mkdocs.yml, docs/) into _site/, failing on a broken link; installs MkDocs via apt.
	hack/docs.sh

.PHONY: bed-up
bed-up: tools ## Start a long-running bed for people (REAL_NODE=1: with a real node; RUNNER=1: the pod runner).
	go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/bed ./test/bed/cmd/bed
	$(BIN_DIR)/bed up $(if $(REAL_NODE),--real-node) $(if $(RUNNER),--runner)

.PHONY: bed-down
bed-down: ## Stop the bed started by bed-up.
	go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/bed ./test/bed/cmd/bed
	$(BIN_DIR)/bed down

.PHONY: clean
clean: ## Remove build output (the tool cache in ARCHWAY_CACHE stays).
	rm -rf $(BIN_DIR) _site

.PHONY: help
help:
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
