# azlb — see README.md. Every target installs what it needs from the Go module
# proxy or Debian packages; nothing is expected to be on the machine by hand.
SHELL := /bin/bash
GO    ?= go
PKGS  ?= ./...
# Unit and integration packages: everything but the end-to-end and chaos suites.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/e2e -e /test/image -e /test/chart -e /test/chaos -e /test/cluster -e /test/k8se2e)
comma := ,
BIN   := $(CURDIR)/bin
TEST_FLAGS ?= -race -count=1 -timeout 20m

# Version stamping: k8s.io/component-base/version feeds --version and the
# kubernetes_build_info metric. Without a v* tag the version is
# v0.0.0-<commit>. Timestamps come from the commit, so a rebuild of the same
# commit gives the same image digests.
GIT_COMMIT        := $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE    := $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),dirty,clean)
VERSION           ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(if $(filter dirty,$(GIT_TREE_STATE)),-dirty))
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILD_DATE        := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG       := k8s.io/component-base/version
LDFLAGS           := -X $(VERSION_PKG).gitVersion=$(VERSION) -X $(VERSION_PKG).gitCommit=$(GIT_COMMIT) \
                     -X $(VERSION_PKG).gitTreeState=$(GIT_TREE_STATE) -X $(VERSION_PKG).buildDate=$(BUILD_DATE)

# Images (see docs/install.md): IMAGE_REGISTRY/IMAGE_TAG as `make push` uses
# them; OCI layouts under _out/images/<name>.
IMAGE_REGISTRY  ?= localhost:5000
IMAGE_TAG       ?= $(VERSION)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGES          := azlb-controller-manager azlb-node-manager azlb-emulator
OUT             := $(CURDIR)/_out
IMAGE_TOOL       = $(GO) -C hack/tools/image

.PHONY: help build tools test test-unit test-e2e test-readme test-e2e-cluster test-k8s-e2e test-chaos chaos test-image test-chart bench lint fmt vet golangci fuzz sandbox sandbox-down clean \
	image image-binaries build-node-image-linux push manifests update-dependencies

help: ## show this help
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into bin/
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

image-binaries:
	@for p in $(subst $(comma), ,$(IMAGE_PLATFORMS)); do \
	  os=$${p%/*}; arch=$${p#*/}; \
	  echo "go build $$os/$$arch: $(IMAGES)"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' \
	    -o $(OUT)/bin/$${os}_$${arch}/ $(addprefix ./cmd/,$(IMAGES)) || exit 1; \
	done

image: image-binaries ## OCI images (IMAGE_PLATFORMS, one index each) under _out/images/, no daemon needed
	$(IMAGE_TOOL) run . build --bin-dir $(OUT)/bin --out $(OUT)/images --tag $(IMAGE_TAG) \
	  --platforms $(IMAGE_PLATFORMS) --version $(VERSION) --revision $(GIT_COMMIT) --created $(SOURCE_DATE_EPOCH) $(IMAGES)

build-node-image-linux: ## the node manager's image alone, for linux/$(ARCH) (default amd64)
	$(MAKE) image IMAGES=azlb-node-manager IMAGE_PLATFORMS=linux/$(or $(ARCH),amd64)

push: image ## push the images to $(IMAGE_REGISTRY)/<name>:$(IMAGE_TAG)
	$(IMAGE_TOOL) run . push --dir $(OUT)/images --registry $(IMAGE_REGISTRY) --tag $(IMAGE_TAG) $(IMAGES)

tools: ## build kube-apiserver and kubectl v1.37.1 and etcd into bin/ (cached; first build takes minutes)
	./hack/build-tools.sh

test: lint test-unit test-image test-chart test-e2e test-readme test-chaos ## run every test (race detector on), e2e, README walkthroughs and short chaos included

test-unit: ## unit and integration tests (in-process emulator, client-go fakes)
	$(GO) test $(TEST_FLAGS) $(UNIT_PKGS)

test-image: image ## build the images, check them (user, entrypoint, platforms, --version) and push to a loopback registry
	$(IMAGE_TOOL) test $(TEST_FLAGS) ./...
	AZLB_IMAGE_DIR=$(OUT)/images AZLB_IMAGE_TAG=$(IMAGE_TAG) AZLB_IMAGE_VERSION=$(VERSION) $(GO) test $(TEST_FLAGS) ./test/image/

test-chart: ## helm lint and helm template of deploy/helm/azlb, asserted; deploy/rbac.yaml is its rendering
	./hack/build-tools.sh helm
	$(GO) test $(TEST_FLAGS) ./test/chart/

update-dependencies: ## upgrade Go dependencies and the tool modules under hack/tools, tidy, verify, build
	./hack/update-dependencies.sh

manifests: ## regenerate deploy/rbac.yaml from the chart
	./hack/build-tools.sh helm
	./hack/render-rbac.sh > deploy/rbac.yaml

test-e2e: ## end-to-end: the real controller binary vs a real kube-apiserver + etcd + the emulator
	./hack/build-tools.sh kube-apiserver kubectl etcd helm
	./hack/ipv6-loopback.sh
	AZLB_E2E_RACE=1 $(GO) test $(TEST_FLAGS) -v ./test/e2e/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

test-readme: build tools ## play README.md's walkthroughs as written, each in a network namespace of its own (needs root)
	./hack/ensure-debs.sh curl:curl nc:netcat-openbsd python3:python3
	AZLB_README_RUN=1 $(GO) test -race -count=1 -timeout 45m -v -run 'TestEveryStepHasACheck|TestWalkthroughs' ./test/readme/ 2>&1 | grep -E '^\s*(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go|README.md:' ; exit $${PIPESTATUS[0]}

test-e2e-cluster: build ## black-box scenarios against the cluster KUBECONFIG names and the Azure azure.json/AZURE_* name (default: the running sandbox; docs/install.md)
	$(GO) test -count=1 -timeout 30m -v ./test/cluster/ 2>&1 | grep -E '^\s*(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

test-k8s-e2e: build tools ## Kubernetes' own e2e LoadBalancer specs (e2e.test v1.37.1) vs azlb on 3 real nodes, and README's SANDBOX=nodes walkthrough (root; docs/kubernetes-e2e.md)
	./hack/node-packages.sh
	./hack/build-tools.sh cluster helm
	AZLB_K8S_E2E=1 AZLB_E2E_RACE=1 $(GO) test -count=1 -timeout 80m -v ./test/k8se2e/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go|^ ' ; exit $${PIPESTATUS[0]}
	AZLB_README_RUN=1 AZLB_README_NODES=1 AZLB_README_ONLY=-nodes $(GO) test -race -count=1 -timeout 30m -v -run TestWalkthroughs ./test/readme/ 2>&1 | grep -E '^\s*(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go|README.md:' ; exit $${PIPESTATUS[0]}

test-chaos: ## short reliability suites (fault mix, crashes, leader failover; docs/reliability.md), a few minutes
	./hack/build-tools.sh kube-apiserver etcd helm
	AZLB_CHAOS_RACE=1 $(GO) test -race -count=1 -timeout 15m -v ./test/chaos/ 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

chaos: ## full reliability suites: 20 fault-mix seeds of 1,000 events, 20 crash points, 6 failovers; figures in _out/chaos/figures.jsonl
	./hack/build-tools.sh kube-apiserver etcd helm
	@mkdir -p $(OUT)/chaos && rm -f $(OUT)/chaos/figures.jsonl
	AZLB_CHAOS_FULL=1 AZLB_CHAOS_OUT=$(OUT)/chaos $(GO) test -count=1 -timeout 3h -v ./test/chaos/ 2>&1 | tee $(OUT)/chaos/chaos.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit $${PIPESTATUS[0]}

bench: ## benchmarks (emulator throughput, client overhead, controller figures; the scale run of docs/reliability.md)
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m $(UNIT_PKGS)
	./hack/build-tools.sh kube-apiserver etcd helm
	$(GO) test -run '^$$' -bench Scale -benchtime 1x -count=1 -timeout 60m ./test/chaos/

fuzz: ## run each fuzz target briefly (FUZZTIME, default 10s each)
	@./hack/fuzz.sh $(or $(FUZZTIME),10s)

lint: fmt vet golangci ## gofmt, go vet and golangci-lint (.golangci.yml)

fmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(IMAGE_TOOL) vet ./...

golangci:
	./hack/build-tools.sh golangci-lint
	$(BIN)/golangci-lint run --allow-serial-runners --timeout 15m $(PKGS)
	cd hack/tools/image && $(BIN)/golangci-lint run --allow-serial-runners --timeout 15m ./...

sandbox: build tools ## start emulator + kube-apiserver + controller with a demo cluster (SANDBOX=multi|nic|container|basic|nodes; runs in the background)
	@if [ "$(SANDBOX)" = nodes ]; then ./hack/node-packages.sh && ./hack/build-tools.sh cluster; fi
	@./hack/ipv6-loopback.sh || echo "sandbox: going on without IPv6 frontends on loopback (see above)" >&2
	$(BIN)/azlb sandbox up --dir .sandbox --bin $(BIN) --variant $(or $(SANDBOX),multi)

sandbox-down: ## stop everything make sandbox started
	@if [ -x $(BIN)/azlb ]; then $(BIN)/azlb sandbox down --dir .sandbox; else echo "nothing to stop"; fi

clean:
	rm -rf $(BIN) .sandbox $(OUT)
