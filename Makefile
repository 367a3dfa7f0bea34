# cas: Conformalized Agentic Search in one Go binary.
# CPU builds use GoMLX's pure-Go backend only (no cgo, no PJRT plugin).
GO      ?= go
BIN     ?= bin/cas
CAS_SHARED ?= $(abspath ../shared)
export CGO_ENABLED ?= 0
export CAS_SHARED

.PHONY: build test bench demo lint fuzz gpu-check gpu-bundle clean

build:
	$(GO) build -o $(BIN) ./cmd/cas

# The README's test command; .ci/run runs exactly this.
test:
	$(GO) vet ./...
	CGO_ENABLED=1 $(GO) vet -tags xla ./...
	$(GO) test -count=1 -timeout 20m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

demo: build
	$(BIN) demo

lint:
	$(GO) vet ./...
	CGO_ENABLED=1 $(GO) vet -tags xla ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every fuzz target of every package, one after another, for FUZZTIME each
# (not part of `make test`). -fuzzminimizetime bounds how long a new
# interesting input may be minimised, so minimisation cannot eat the budget.
# A failing input is saved under the package's testdata/fuzz/ and fails the
# run; `go test ./pkg -run FuzzX/ID` replays it.
FUZZTIME    ?= 5s
FUZZMINTIME ?= 2s
fuzz:
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; for pkg in $$($(GO) list ./...); do \
		for fz in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$fz ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$fz\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) >$$log 2>&1 || { tail -30 $$log; exit 1; }; \
			tail -1 $$log; \
		done; \
	done

# GPU check: needs a CUDA GPU and an installed PJRT CUDA plugin (see
# backend; GOMLX_NO_AUTO_INSTALL=1 forbids downloads). Runs the golden
# Qwen logits, KV-cache and gradient tests on XLA/CUDA, then measures prefill
# and decode tokens/s of a Qwen2.5-0.5B-shaped random model; batch-1 decode is
# reported against the HBM bound (weight bytes / bandwidth; the bandwidth comes
# from nvidia-smi's GPU name or CAS_HBM_GBPS).
GPU_BACKEND ?= xla:cuda
gpu-check:
	CGO_ENABLED=1 GOMLX_BACKEND=$(GPU_BACKEND) $(GO) test -tags xla -count=1 -v \
		-run 'TestGolden|TestCacheMatchesFullForward|TestGenerateLogProbsMatchScore|TestScoreGradient' ./model/qwen/
	CGO_ENABLED=1 GOMLX_BACKEND=$(GPU_BACKEND) $(GO) test -tags xla -count=1 -run '^$$' \
		-bench '(Prefill|Decode)/qwen-0.5B' -benchtime 64x -timeout 30m ./model/qwen/

# GPU bundle: the xla-tagged cas and test binaries (cgo, stripped, gzipped;
# the first cgo build of go-xla takes minutes), the golden files they read,
# gpu/check.sh and gpu/hf_check.py in one folder under 64 MiB that a device
# call carries; on the GPU machine: `bash bin/gpu-bundle/check.sh --out $$OUT`.
# gpu/check_test.go rehearses the same layout on gocpu in `make test`.
gpu-bundle:
	bash gpu/bundle.sh --tags xla --out bin/gpu-bundle

clean:
	rm -rf bin
