# vmipam — see README.md. Every target installs or builds what it needs itself.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

K8S_VERSION      ?= 1.37.2
ETCD_VERSION     ?= 3.7.3
CONTROLLER_GEN_VERSION ?= v0.23.0
PROMETHEUS_VERSION ?= v0.316.0
VMIPAM_CACHE     ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/vmipam
ENVTEST_BIN_DIR  ?= $(VMIPAM_CACHE)/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
TOOLS_BIN        ?= $(VMIPAM_CACHE)/tools
CONTROLLER_GEN   := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
PROMTOOL         := $(TOOLS_BIN)/promtool-$(PROMETHEUS_VERSION)
GO_TEST_FLAGS    ?=
export KUBEBUILDER_ASSETS := $(ENVTEST_BIN_DIR)
export VMIPAM_CACHE ENVTEST_BIN_DIR K8S_VERSION ETCD_VERSION

.PHONY: all
all: build

## demo: start the local sandbox (control plane, CRDs, default policy, samples, controller, stand-ins).
.PHONY: demo
demo: envtest-bins
	go run ./cmd/ipam-sandbox $(SANDBOX_FLAGS)

## test: everything CI runs: generated files current, vet, gofmt, unit and envtest suites.
.PHONY: test
test: envtest-bins verify-generate vet fmt-check test-alerts
	go test -timeout 30m $(GO_TEST_FLAGS) ./...

## build: compile every binary into bin/, and bin/kubectl-ipam (ipamctl as the kubectl plugin `kubectl ipam`)
## with bin/kubectl_complete-ipam, kubectl's completion hook for the plugin.
.PHONY: build
build:
	go build -ldflags "-X main.version=$(VERSION) -X github.com/vmipam/vmipam/cmd/ipamctl/cli.Version=$(VERSION)" -o bin/ ./cmd/...
	ln -sf ipamctl bin/kubectl-ipam
	ln -sf ipamctl bin/kubectl_complete-ipam

## kubectl-ipam: bin/ipamctl and bin/kubectl-ipam; put bin/ on PATH for `kubectl ipam …`.
.PHONY: kubectl-ipam
kubectl-ipam: build

## image: the controller image without a container runtime (hack/image, go-containerregistry):
## bin/image (OCI layout) and bin/image.tar (docker/podman load). The Dockerfile builds the same.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
.PHONY: image
image:
	go run ./hack/image -version $(VERSION) -out bin/image

## envtest-bins: build kube-apiserver, kube-controller-manager and etcd once into $(ENVTEST_BIN_DIR).
.PHONY: envtest-bins
envtest-bins:
	./hack/envtest-bins.sh >/dev/null

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_BIN)/tmp
	GOBIN=$(TOOLS_BIN)/tmp go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_BIN)/tmp/controller-gen $@

# promtool of the Prometheus release whose Go module version is PROMETHEUS_VERSION (v0.316.0 = Prometheus 3.16.0).
$(PROMTOOL):
	mkdir -p $(TOOLS_BIN)/tmp
	GOBIN=$(TOOLS_BIN)/tmp go install github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION)
	mv $(TOOLS_BIN)/tmp/promtool $@

## test-alerts: promtool checks deploy/monitoring/alerts.yaml and runs its unit tests (alerts_test.yaml).
.PHONY: test-alerts
test-alerts: $(PROMTOOL)
	$(PROMTOOL) check rules deploy/monitoring/alerts.yaml
	cd deploy/monitoring && $(PROMTOOL) test rules alerts_test.yaml

CHART            := deploy/helm/vmipam

## generate: deepcopy and CRDs from the Go types (ours, and the trimmed third-party test
## fixtures), the dry-run API's schema, the controller's RBAC from its +kubebuilder:rbac
## markers, and the chart's files that come from Go source (CRD, webhook configuration).
.PHONY: generate
generate: $(CONTROLLER_GEN)
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./policies/... paths=./crds/... paths=./controller/dryrun/v1alpha1/...
	$(CONTROLLER_GEN) crd paths=./policies/... output:crd:dir=crds
	$(CONTROLLER_GEN) crd paths=./controller/dryrun/v1alpha1/... output:crd:dir=controller/dryrun/v1alpha1/openapi
	$(CONTROLLER_GEN) crd paths=./crds/... output:crd:dir=internal/thirdpartycrds
	$(CONTROLLER_GEN) rbac:roleName=vmipam-controller paths=./controller/... paths=./cmd/ipam-controller/... output:rbac:dir=$(CHART)/files
	cp crds/ipam.virtualization.deckhouse.io_clusteripampolicies.yaml crds/ipam.virtualization.deckhouse.io_virtualmachineipams.yaml $(CHART)/files/
	cp crds/rbac/dryrun.yaml $(CHART)/files/dryrun-roles.yaml
	cp crds/rbac/records.yaml $(CHART)/files/record-roles.yaml
	cp deploy/monitoring/metrics-reader.yaml $(CHART)/files/metrics-reader.yaml
	cp deploy/monitoring/alerts.yaml $(CHART)/files/alerts.yaml
	go run ./hack/gen-deploy $(CHART)/files

## verify-generate: fail when generated files differ from what `make generate` writes.
.PHONY: verify-generate
verify-generate: generate
	@if [ -n "$$(git status --porcelain -- crds policies internal/thirdpartycrds controller/dryrun/v1alpha1 $(CHART)/files)" ]; then \
	  git status --porcelain -- crds policies internal/thirdpartycrds controller/dryrun/v1alpha1 $(CHART)/files; \
	  git diff --stat -- crds policies internal/thirdpartycrds controller/dryrun/v1alpha1 $(CHART)/files; \
	  echo "generated files are stale: run 'make generate' and commit"; exit 1; fi

.PHONY: vet
vet:
	go vet ./...

.PHONY: fmt-check
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files -o --exclude-standard '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: the scale suite (N=1000 VMs by default, 3 runs) and the evaluator benchmarks;
## prints the table and writes docs/BENCHMARKS.md. `make bench N=10000 RUNS=1` for the large run.
N    ?= 1000
RUNS ?= 3
.PHONY: bench
bench: envtest-bins
	VMIPAM_SCALE_N=$(N) VMIPAM_SCALE_RUNS=$(RUNS) VMIPAM_BENCH_OUT=$(CURDIR)/docs/BENCHMARKS.md \
	  go test -count=1 -timeout 6h -run '^TestScale$$' -v ./test/scale/

## bench-workers: hotplug latency per --max-concurrent-reconciles value (WORKERS), the values
## taking turns on one control plane with N VMs converged (docs/SCALING.md).
WORKERS ?= 4,8,16
.PHONY: bench-workers
bench-workers: envtest-bins
	VMIPAM_SCALE_N=$(if $(filter command line,$(origin N)),$(N),300) VMIPAM_SCALE_WORKERS_SWEEP=$(WORKERS) \
	  go test -count=1 -timeout 2h -run '^TestHotplugWorkers$$' -v ./test/scale/

## fuzz: run the evaluator fuzzer FUZZ (default FuzzCompileAndDecide; FuzzGeneratedPolicy builds
## well-typed hostile policies) for FUZZTIME (default 2m), one worker, minimization off
## (docs/RELIABILITY.md), no test timeout (go test's default 10m would end a longer run).
FUZZ     ?= FuzzCompileAndDecide
FUZZTIME ?= 2m
.PHONY: fuzz
fuzz:
	go test -run '^$$' -fuzz '^$(FUZZ)$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0 -parallel 1 -timeout 0 ./evaluator/

## soak: the chaos soak (docs/RELIABILITY.md): SOAK_DURATION of seeded random operations and
## faults (default 30m; SOAK_SEED defaults to the clock), its figures appended to the table.
SOAK_DURATION ?= 30m
SOAK_SEED     ?= $(shell date +%s)
.PHONY: soak
soak: envtest-bins
	VMIPAM_SOAK_DURATION=$(SOAK_DURATION) VMIPAM_SOAK_SEED=$(SOAK_SEED) VMIPAM_SOAK_REPORT=$(CURDIR)/docs/RELIABILITY.md \
	  VMIPAM_SOAK_COMMIT=$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD -- . ':!docs' || echo -dirty) \
	  go test -count=1 -timeout 4h -run '^TestSoak$$' -v ./test/soak/
