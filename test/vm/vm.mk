# test/vm/vm.mk — the soft-RoCE (rxe) VM test, included by the top-level
# Makefile. Targets:
#   vm-deps  fetch the guest kernels (Debian 12's 6.1; trixie-backports'
#            7.3 through a private apt configuration) and build their
#            initramfs (cached under $(VM_CACHE); `make deps` and the test
#            also do this)
#   test-vm  build, then boot the guest (and the pair) once and run every VM
#            scenario, the benchmark ones with VM_SMOKE_RUNS runs
# Variables (environment or make command line):
#   VM_CACHE         guest cache (default /var/cache/swift-build/vm)
#   VM_TEST_TIMEOUT  go test -timeout (default 75m)
#   SWIFT_VM_SCENARIOS, SWIFT_VM_BROKEN, SWIFT_VM_TIMEOUT, SWIFT_VM_KEEP, ...
#                    see ConfigFromEnv in test/vm/vm.go
VM_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
VM_CACHE ?= /var/cache/swift-build/vm
VM_TEST_TIMEOUT ?= 75m
VM_GO ?= $(if $(GO),$(GO),go)

.PHONY: test-vm vm-deps

vm-deps:
	SWIFT_VM_CACHE=$(VM_CACHE) SWIFT_VM_KERNEL=6.1 $(VM_MK_DIR)/guest/build.sh
	SWIFT_VM_CACHE=$(VM_CACHE) SWIFT_VM_KERNEL=7.3 $(VM_MK_DIR)/guest/build.sh

# The test batch, then every benchmark scenario with a few runs each, so
# that none of them breaks unseen (`make bench` runs the full counts); their
# figures go to $(VM_SMOKE_OUT).
VM_SMOKE_RUNS ?= 3
VM_SMOKE_OUT ?= $(CURDIR)/out/bench-smoke.json
test-vm: build image
	@mkdir -p $(dir $(VM_SMOKE_OUT)) && rm -f $(VM_SMOKE_OUT)
	SWIFT_VM_CACHE=$(VM_CACHE) SWIFT_VM_SCENARIOS=$${SWIFT_VM_SCENARIOS:-default,fork-bench,verbs-bench,x-bench} \
		SWIFT_VM_BENCH_RUNS=$(VM_SMOKE_RUNS) SWIFT_BENCH_OUT=$(VM_SMOKE_OUT) \
		$(VM_GO) test -count=1 -tags e2e -v -timeout $(VM_TEST_TIMEOUT) ./test/vm
