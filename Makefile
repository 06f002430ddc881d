# azlb — see README.md. Every target installs what it needs from the Go module
# proxy or Debian packages; nothing is expected to be on the machine by hand.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...
BIN   := $(CURDIR)/bin
TEST_FLAGS ?= -race -count=1 -timeout 20m

.PHONY: help build test test-unit test-e2e bench lint fmt vet fuzz sandbox sandbox-down clean

help: ## show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into bin/
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

test: lint test-unit test-e2e ## run every test (race detector on), e2e included

test-unit: ## unit and integration tests (in-process emulator, client-go fakes)
	$(GO) test $(TEST_FLAGS) $(PKGS)

test-e2e: ## end-to-end suite against a real kube-apiserver + the emulator
	@echo "test-e2e: the end-to-end suite lands with issue 7 (no e2e tests yet)"

bench: ## benchmarks (emulator throughput, client overhead, controller figures)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)

fuzz: ## run each fuzz target briefly (FUZZTIME=30s)
	@./hack/fuzz.sh $(or $(FUZZTIME),10s)

lint: fmt vet ## gofmt + go vet

fmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

sandbox: ## start emulator + apiserver + controller with a demo cluster (issue 7)
	@echo "make sandbox: not yet — the sandbox lands with issue 7. Today: 'go run ./cmd/azlb-emulator' starts the ARM emulator."

sandbox-down: ## stop everything make sandbox started
	@echo "make sandbox-down: nothing to stop yet"

clean:
	rm -rf $(BIN) .sandbox
