# azlb — see README.md. Every target installs what it needs from the Go module
# proxy or Debian packages; nothing is expected to be on the machine by hand.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...
# Unit and integration packages: everything but the end-to-end suite.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/e2e)
BIN   := $(CURDIR)/bin
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: help build tools test test-unit test-e2e bench lint fmt vet golangci fuzz sandbox sandbox-down clean

help: ## show this help
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

tools: ## build kube-apiserver and kubectl v1.37.1 and etcd into bin/ (cached; first build takes minutes)
	./hack/build-tools.sh

test: lint test-unit test-e2e ## run every test (race detector on), e2e included

test-unit: ## unit and integration tests (in-process emulator, client-go fakes)
	$(GO) test $(TEST_FLAGS) $(UNIT_PKGS)

test-e2e: ## end-to-end: the real controller binary vs a real kube-apiserver + etcd + the emulator
	./hack/build-tools.sh kube-apiserver etcd
	AZLB_E2E_RACE=1 $(GO) test $(TEST_FLAGS) -v ./test/e2e/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

bench: ## benchmarks (emulator throughput, client overhead, controller figures)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(UNIT_PKGS)

fuzz: ## run each fuzz target briefly (FUZZTIME, default 10s each)
	@./hack/fuzz.sh $(or $(FUZZTIME),10s)

lint: fmt vet golangci ## gofmt, go vet and golangci-lint (.golangci.yml)

fmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

golangci:
	./hack/build-tools.sh golangci-lint
	$(BIN)/golangci-lint run --timeout 15m $(PKGS)

sandbox: build tools ## start emulator + kube-apiserver + controller with a demo cluster (runs in the background; SANDBOX=container for pod-based load balancing)
	$(BIN)/azlb sandbox up --dir .sandbox --bin $(BIN) $(if $(SANDBOX),--variant $(SANDBOX))

sandbox-down: ## stop everything make sandbox started
	@if [ -x $(BIN)/azlb ]; then $(BIN)/azlb sandbox down --dir .sandbox; else echo "nothing to stop"; fi

clean:
	rm -rf $(BIN) .sandbox
