# archway's build, test and development entry points. Every target that needs
# a tool runs `make tools` first; tools are built once into a cache outside the
# clone (ARCHWAY_CACHE, default ~/.cache/archway) and reused.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
ARCHWAY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/archway
export ARCHWAY_CACHE
export GOFLAGS := -buildvcs=false
export GOTOOLCHAIN := local

ASSETS = $(shell hack/tools.sh assets)
export KUBEBUILDER_ASSETS = $(ASSETS)
CONTROLLER_GEN = $(ASSETS)/controller-gen
GOLANGCI_LINT = $(ASSETS)/golangci-lint

# Build tags buildah needs to build with no extra C libraries (see NOTES).
BUILD_TAGS := containers_image_openpgp exclude_graphdriver_btrfs libsqlite3
GO_BUILD_FLAGS := -tags "$(BUILD_TAGS)" -ldflags "-X github.com/archway-build/archway/pkg/version.Version=$(VERSION)"
BIN_DIR := bin

# Test runs. Integration and e2e suites start the bed per package; -p 1 keeps
# two beds (and their builds) from competing for the machine's 2 cores.
TEST_FLAGS ?=
UNIT_PKGS = $(shell go list -tags "$(BUILD_TAGS)" ./... | grep -v /test/)

.PHONY: all
all: build

.PHONY: build
build: ## Build build-controller and builder into bin/.
	go build $(GO_BUILD_FLAGS) -o $(BIN_DIR)/ ./cmd/build-controller ./cmd/builder

.PHONY: tools
tools: ## Install everything tests and the bed need (idempotent, cached).
	hack/tools.sh

.PHONY: test
test: tools test-unit test-integration test-e2e ## Everything CI runs.

.PHONY: test-unit
test-unit: ## Unit tests: pure functions and packages, no bed.
	go test $(GO_BUILD_FLAGS) $(TEST_FLAGS) $(UNIT_PKGS)

.PHONY: test-integration
test-integration: tools ## Integration tests on the bed (apiserver, scheduler, kwok, registry).
	go test $(GO_BUILD_FLAGS) -p 1 -timeout 30m $(TEST_FLAGS) ./test/bed/... ./test/integration/...

.PHONY: test-e2e
test-e2e: tools ## End-to-end tests on the full bed.
	@if compgen -G "test/e2e/*_test.go" >/dev/null; then \
		go test $(GO_BUILD_FLAGS) -p 1 -timeout 40m $(TEST_FLAGS) ./test/e2e/...; \
	else echo "test-e2e: no end-to-end suites yet"; fi

.PHONY: generate
generate: tools ## Generate deepcopy code, CRDs and RBAC with controller-gen.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false paths=./pkg/apis/... output:crd:artifacts:config=manifests/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=archway-build-controller paths=./pkg/... output:rbac:artifacts:config=manifests/rbac

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- pkg/apis manifests)" ]; then \
		git status --porcelain -- pkg/apis manifests; git diff --stat -- pkg/apis manifests; \
		echo "generated files are stale: run 'make generate' and commit the result"; exit 1; fi

.PHONY: lint
lint: tools ## golangci-lint with the repository's .golangci.yml.
	$(GOLANGCI_LINT) run --build-tags "$(BUILD_TAGS)" ./...

.PHONY: bed-up
bed-up: tools ## Start a long-running bed for people; prints KUBECONFIG and the registry.
	go run $(GO_BUILD_FLAGS) ./test/bed/cmd/bed up

.PHONY: bed-down
bed-down: ## Stop the bed started by bed-up.
	go run $(GO_BUILD_FLAGS) ./test/bed/cmd/bed down

.PHONY: clean
clean: ## Remove build output (the tool cache in ARCHWAY_CACHE stays).
	rm -rf $(BIN_DIR)

.PHONY: help
help:
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
