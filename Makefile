# Swift for containerd. `make demo` and `make test` do all set-up on a fresh
# Debian 12 machine (as root): `deps` installs packages and builds a
# containerd into $(CACHE), reused on later runs.
SHELL := /bin/bash
GO ?= go
CACHE ?= /var/cache/swift-build
CONTAINERD_VERSION ?= v2.4.2
CONTAINERD_BIN ?= $(CACHE)/containerd-$(CONTAINERD_VERSION:v%=%)
CRICTL_VERSION ?= v1.37.0
CONTAINERD17_VERSION ?= v1.7.35
# Debian's own containerd packages in the support matrix, suite=exact Debian
# version; deps fetches each into $(CACHE)/containerd-deb-<upstream version>.
DEBIAN_CONTAINERD ?= trixie=1.7.24~ds1-6+deb13u1 sid=2.1.9+ds1-5
CNI_PLUGINS_VERSION ?= v1.10.0
# the VM suite's Kubernetes bed (scripts/deps-k8s.sh builds it)
K8S_VERSION ?= v1.37.2
ETCD_VERSION ?= v3.7.3
PREFIX ?= /usr/local
BIN := $(CURDIR)/bin
OUT := $(CURDIR)/out
# Fuzz budgets are execution counts (about 10 s each on 2 cores): a duration
# (-fuzztime 10s) trips Go 1.26's fuzz coordinator race (golang/go#75804),
# which fails a target with "context deadline exceeded" and no input.
# FUZZSCALE multiplies them for a longer local run.
FUZZSCALE ?= 1
BENCH_RUNS ?= 20
# runs of each mode in the VM benchmarks (fork-bench, verbs-bench, x-bench)
VM_BENCH_RUNS ?= 30
GOFILES = $(shell git ls-files -co --exclude-standard '*.go')
# the C of the zygote, the preload, the VM's test programs and probes (.clang-format)
CFILES = $(shell git ls-files -co --exclude-standard 'zygote/*.[ch]' 'preload/*.[ch]' 'test/vm/csrc/*.[ch]' 'test/vm/probes/*.[ch]')
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/test/')

export SWIFT_BIN := $(BIN)
export SWIFT_CONTAINERD_BIN := $(CONTAINERD_BIN)
export SWIFT_CRICTL_BIN := $(CACHE)/crictl-$(CRICTL_VERSION:v%=%)
export SWIFT_CNI_BIN := $(CACHE)/cni-plugins-$(CNI_PLUGINS_VERSION:v%=%)
export SWIFT_K8S_BIN := $(CACHE)/k8s-$(K8S_VERSION:v%=%)
export SWIFT_HELM_BIN := $(SWIFT_K8S_BIN)/helm
# the image the chart runs (make image), which the Kubernetes bed imports
export SWIFT_IMAGE := $(OUT)/swift-image.tar

.PHONY: all build install image deps test unit lint helm fuzz integration cri matrix shimbench-smoke benchkeys-smoke bench demo clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "-X github.com/swift-rdma/swift-containerd/internal/version.Version=$$(git describe --tags --always --dirty 2>/dev/null)" -o $(BIN)/ ./cmd/...
	# swift-gateway runs in containers of any image: static
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/swift-gateway ./cmd/swift-gateway
	$(MAKE) -s -C zygote OUT=$(BIN)
	$(MAKE) -s -C preload OUT=$(BIN)

install: build
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN)/containerd-shim-swift-v2 $(BIN)/swift-hook $(BIN)/swiftctl $(BIN)/swift-node $(PREFIX)/bin/
	install -d $(PREFIX)/lib/swift
	install -m 0755 $(BIN)/swift-init $(BIN)/swift-run $(BIN)/swift-gateway $(BIN)/swift-warm $(BIN)/swift-warm-dyn $(BIN)/swift-profile $(BIN)/libswiftverbs.so $(PREFIX)/lib/swift/
	install -d $(PREFIX)/lib/swift/lib $(PREFIX)/lib/swift/handlers
	install -m 0755 $(BIN)/lib/* $(PREFIX)/lib/swift/lib/
	install -m 0755 $(BIN)/handlers/* $(PREFIX)/lib/swift/handlers/

# The image of Swift's binaries that the Helm chart runs (deploy/image):
# out/swift-image.tar, a docker-archive (ctr images import, skopeo copy
# docker-archive:...). Its name is IMAGE, by default the chart's.
IMAGE_TAG := $(shell sed -n 's/^appVersion: "\(.*\)"$$/\1/p' deploy/helm/swift/Chart.yaml)
IMAGE ?= swift-rdma/swift:$(IMAGE_TAG)
image: build
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X github.com/swift-rdma/swift-containerd/internal/version.Version=$$(git describe --tags --always --dirty 2>/dev/null)" -o $(OUT)/image-bin/ ./cmd/...
	$(GO) run ./deploy/image --bin $(BIN) --static $(OUT)/image-bin --ref $(IMAGE) --out $(OUT)/swift-image.tar

deps:
	@SWIFT_VM_CACHE=$(VM_CACHE) SWIFT_K8S_VERSIONS='$(K8S_VERSION) $(ETCD_VERSION)' bash scripts/deps.sh $(CACHE) $(CONTAINERD_VERSION) $(CRICTL_VERSION) $(CONTAINERD17_VERSION) $(CNI_PLUGINS_VERSION) '$(DEBIAN_CONTAINERD)'

# golangci-lint (pinned in tools/go.mod, configured in .golangci.yml):
# staticcheck, goimports, misspell, gosec's high-confidence findings and
# the standard set, as containerd runs them; the C as .clang-format says.
GOLANGCI_LINT = $(OUT)/tools/golangci-lint
lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	cd tools && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	$(GOLANGCI_LINT) run ./...
	@command -v clang-format >/dev/null || { echo "lint: clang-format is missing (make deps installs it)"; exit 1; }
	@echo "clang-format --dry-run --Werror ($(words $(CFILES)) C files)"; clang-format --dry-run --Werror $(CFILES)

unit: lint
	$(GO) test -count=1 -tags e2e $(UNIT_PKGS)
	$(GO) test -count=1 ./test/benchkeys
	$(MAKE) -s -C zygote test OUT=$(BIN)
	$(MAKE) -s -C preload test OUT=$(BIN)

# The Helm chart (deploy/helm/swift): helm lint --strict and helm template,
# its objects against literal expectations (Helm v4, built by deps).
helm: deps
	$(GO) test -count=1 -tags e2e -v ./test/helm

# Each fuzz target runs its budget of inputs on top of its seed corpus.
FUZZ = $(GO) test -run '^$$' -fuzzminimizetime 0
fuzz:
	$(FUZZ) -fuzz '^FuzzParse$$' -fuzztime $$((300000 * $(FUZZSCALE)))x ./annotations
	$(FUZZ) -fuzz '^FuzzParse$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./config
	$(FUZZ) -fuzz '^FuzzParseRuntimeOptions$$' -fuzztime $$((50000 * $(FUZZSCALE)))x ./shim
	$(FUZZ) -fuzz '^FuzzParse$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./policy
	$(FUZZ) -fuzz '^FuzzParseSnapshot$$' -fuzztime $$((300000 * $(FUZZSCALE)))x ./verbs
	$(FUZZ) -fuzz '^FuzzDecode$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./metrics
	$(FUZZ) -fuzz '^FuzzParseStatus$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./metrics
	$(FUZZ) -fuzz '^FuzzParse$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./keys
	$(FUZZ) -fuzz '^FuzzCorruptLedger$$' -fuzztime $$((2000 * $(FUZZSCALE)))x ./ledger
	$(FUZZ) -fuzz '^FuzzParseReply$$' -fuzztime $$((200000 * $(FUZZSCALE)))x ./swiftrun
	$(FUZZ) -fuzz '^FuzzParseExit$$' -fuzztime $$((50000 * $(FUZZSCALE)))x ./swiftrun
	$(FUZZ) -fuzz '^FuzzParseStatus$$' -fuzztime $$((50000 * $(FUZZSCALE)))x ./swiftrun
	$(FUZZ) -fuzz '^FuzzActivation$$' -fuzztime $$((100000 * $(FUZZSCALE)))x ./gateway
	$(FUZZ) -fuzz '^FuzzInit$$' -fuzztime $$((20000 * $(FUZZSCALE)))x ./gateway

integration: deps build
	$(GO) test -count=1 -tags e2e -v -timeout 20m ./test/integration

# CRI: crictl runp/create/exec through the swift runtime entry.
cri: deps build
	$(GO) test -count=1 -tags e2e ./test/harness
	$(GO) test -count=1 -tags e2e -v -timeout 10m ./test/cri

# Support matrix (docs/support-matrix.md): the integration and CRI suites
# against the self-built containerd 1.7 and Debian's packages (the default
# 2.4.2 runs them in `integration` and `cri`). Every build runs even after
# one fails; the failed ones are listed at the end.
debian_upstream = $(firstword $(subst ~, ,$(subst +, ,$(subst -, ,$(lastword $(subst =, ,$(1)))))))
MATRIX_CONTAINERD = $(CACHE)/containerd-$(CONTAINERD17_VERSION:v%=%) \
	$(foreach p,$(DEBIAN_CONTAINERD),$(CACHE)/containerd-deb-$(call debian_upstream,$(p)))
matrix: deps build
	@failed=; for d in $(MATRIX_CONTAINERD); do \
		echo "matrix: $$($$d/containerd --version) from $$d"; start=$$(date +%s); \
		SWIFT_CONTAINERD_BIN=$$d $(GO) test -count=1 -tags e2e -v -timeout 20m ./test/integration ./test/cri || failed="$$failed $$d"; \
		echo "matrix: $$d took $$(( $$(date +%s) - start )) s"; \
	done; [ -z "$$failed" ] || { echo "matrix FAILED for:$$failed"; exit 1; }

include test/vm/vm.mk

# `make test` ends with `make demo` itself: the same boot, scenario and
# node config a person runs, so that when the main job breaks, CI fails.
test: deps build unit helm fuzz integration cri matrix shimbench-smoke test-vm benchkeys-smoke demo

# The documentation's figures (README, docs/benchmarks.md) are all produced.
BENCH_DOCS = $(foreach f,README.md $(wildcard docs/benchmarks.md),-doc $(f))
benchkeys-smoke:
	$(GO) run ./test/benchkeys $(BENCH_DOCS) $(OUT)/shimbench-smoke.json $(OUT)/bench-smoke.json

# The host benchmark once with two runs (the VM benchmarks run in test-vm
# with a few runs each): none of them can break unseen.
shimbench-smoke: deps build
	@mkdir -p $(OUT) && rm -f $(OUT)/shimbench-smoke.json
	$(GO) run ./test/shimbench --runs 2 --out $(OUT)/shimbench-smoke.json

# Benchmarks, side by side in one run: the shim against runc's (host), and
# fork start in the rxe VM, the data plane and fork start across a pair of
# guests, and pod start and exec under Kubernetes (x-k8s); all figures go
# to out/bench.json.
bench: deps build image
	@mkdir -p $(OUT) && rm -f $(OUT)/bench.json
	$(GO) run ./test/shimbench --runs $(BENCH_RUNS) --out $(OUT)/bench.json
	SWIFT_VM_SCENARIOS=fork-bench,verbs-bench,gateway,x-bench,x-podnet,x-k8s SWIFT_BENCH_OUT=$(OUT)/bench.json SWIFT_VM_CACHE=$(VM_CACHE) \
		SWIFT_VM_BENCH_RUNS=$(VM_BENCH_RUNS) SWIFT_VM_SCENARIO_TIMEOUT=15m SWIFT_VM_TIMEOUT=50m \
		$(GO) test -count=1 -tags e2e -v -timeout 90m -run TestVM ./test/vm
	@cat $(OUT)/bench.json
	$(GO) run ./test/benchkeys $(BENCH_DOCS) $(OUT)/bench.json

# The demo: boots the rxe VM, runs containerd with the Swift runtime, starts
# two containers whose zygotes pre-connect QPs, runs a forked function's
# 1000 messages over one and prints the result and fork-start timings.
demo: deps build
	@mkdir -p $(OUT)
	@echo "demo: booting the soft-RoCE VM (about 2-4 minutes under emulation; full log in out/demo.log)"
	@set -o pipefail; SWIFT_VM_SCENARIOS=demo SWIFT_VM_CACHE=$(VM_CACHE) \
		$(GO) test -count=1 -tags e2e -v -timeout 30m -run TestVM ./test/vm 2>&1 | tee $(OUT)/demo.log | \
		grep -v -E '^\s+vm_test.go|^=== |^--- |^PASS|^ok ' || { echo "demo FAILED; tail of out/demo.log:"; tail -n 40 $(OUT)/demo.log; \
		echo "demo FAILED: $$(grep -E '(FAIL|TIMEOUT): ' $(OUT)/demo.log | grep -v -e '--- FAIL' | tail -n 1 | sed 's/^[[:space:]]*//')"; exit 1; }

clean:
	rm -rf $(BIN) $(OUT)
