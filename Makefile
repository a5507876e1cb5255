# Vidra's developer entry points. `make run` and `make test` are the two
# commands of the README; everything they need is built from the Go module
# proxy and cached in bin/ (ignored).

GO        ?= go
BIN       := bin
K8S_VERSION := v1.37.1
CONTROLPLANE := $(BIN)/controlplane/$(K8S_VERSION)
# -race everywhere: the operator is concurrent by nature. The timeout covers
# the slowest package with its own control plane on a 2-core machine.
TEST_FLAGS ?= -race -count=1 -timeout=40m

.PHONY: all build install-plugin test unit verify generate controlplane tools prereqs run bench fmt vet clean

# make run's listen addresses for Vidra's /metrics and probes.
METRICS_ADDR ?= 127.0.0.1:18080
PROBE_ADDR   ?= 127.0.0.1:18081

all: build

## build: the operator (bin/vidra), the kubectl plugin (bin/kubectl-vidra),
## the benchmark (bin/vidra-bench) and localup.
build:
	$(GO) build -o $(BIN)/ ./cmd/... ./hack/localup

## install-plugin: kubectl vidra, for kubectl to find on the PATH: the binary
## kubectl-vidra into BIN_DIR (default: the first entry of GOPATH, /bin), and
## kubectl_complete-vidra, which kubectl (1.26 and later) runs to complete
## the plugin's arguments.
BIN_DIR ?= $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
install-plugin:
	mkdir -p $(BIN_DIR)
	$(GO) build -o $(BIN_DIR)/kubectl-vidra ./cmd/kubectl-vidra
	printf '#!/bin/sh\n# kubectl runs this to complete the arguments of kubectl vidra.\nexec kubectl-vidra __complete "$$@"\n' > $(BIN_DIR)/kubectl_complete-vidra
	chmod +x $(BIN_DIR)/kubectl_complete-vidra
	@echo "installed $(BIN_DIR)/kubectl-vidra; with $(BIN_DIR) on the PATH, run: kubectl vidra --help"

controlplane: prereqs
	bash hack/controlplane/build.sh

## tools: helm and promtool for the chart and alert tests (test/chart),
## built from the Go module proxy into bin/tools and cached like the
## control plane.
tools: prereqs
	bash hack/tools/build.sh

## prereqs: what the machine must have (Go version, tools); says what is missing.
prereqs:
	@bash hack/prereqs.sh

## test: everything CI runs: static checks, generated-code check, then all
## tests against a real control plane, with the race detector.
test: prereqs controlplane tools verify
	VIDRA_CONTROLPLANE_DIR=$(CURDIR)/$(CONTROLPLANE) $(GO) test $(TEST_FLAGS) ./...
	@# The nested modules (hack/modules.sh), each on its own go.mod.
	for m in $$(bash hack/modules.sh); do (cd $$m && VIDRA_CONTROLPLANE_DIR=$(CURDIR)/$(CONTROLPLANE) $(GO) test $(TEST_FLAGS) ./...) || exit 1; done

## unit: the tests that need no control plane (pure logic), in seconds;
## hack/unit-packages.sh lists their packages. -short keeps the packages
## that also have control-plane tests from starting one (they skip).
unit:
	$(GO) test -race -count=1 -short $$(bash hack/unit-packages.sh)
	for m in $$(bash hack/modules.sh); do (cd $$m && $(GO) test -race -count=1 -short ./...) || exit 1; done

verify: fmt vet
	bash hack/verify-codegen.sh
	bash hack/verify-layout.sh
	bash hack/verify-headers.sh
	bash hack/verify-modules.sh
	bash hack/verify-doc-links.sh
	bash hack/verify-staticcheck.sh

fmt:
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^pkg/generated/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	for m in $$(bash hack/modules.sh); do (cd $$m && $(GO) vet ./...) || exit 1; done

generate:
	bash hack/update-codegen.sh

## run: a local control plane with Vidra, a sample and an InfrahubSync of a
## stand-in Infrahub; Ctrl-C stops it all.
run: controlplane
	@bash hack/prereqs.sh $(METRICS_ADDR) $(PROBE_ADDR)
	$(GO) build -o $(BIN)/vidra ./cmd/vidra
	$(GO) build -o $(BIN)/kubectl-vidra ./cmd/kubectl-vidra
	$(GO) build -o $(BIN)/localup ./hack/localup
	$(GO) build -o $(BIN)/infrahub-standin ./hack/infrahub-standin
	@# The binary itself, not go run: go run exits 1 when interrupted, so a
	@# normal Ctrl-C would read as make's "Error 1".
	$(BIN)/localup --kubeconfig $(BIN)/local/kubeconfig --vidra $(BIN)/vidra --sample manifests/samples/app.yaml \
		--infrahub-standin $(BIN)/infrahub-standin \
		--metrics-bind-address $(METRICS_ADDR) --health-probe-bind-address $(PROBE_ADDR)

## bench: SPEC §7 figures on a fresh control plane (about 5 minutes at N=1000);
## writes bench/results/latest.json and drift-latency.svg. BENCH_FLAGS=-n 100
## for a quick run.
BENCH_FLAGS ?=
bench: controlplane
	VIDRA_CONTROLPLANE_DIR=$(CURDIR)/$(CONTROLPLANE) $(GO) run ./cmd/vidra-bench $(BENCH_FLAGS)

clean:
	rm -rf $(BIN)/local
