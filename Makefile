# cas: Conformalized Agentic Search in one Go binary.
# CPU builds use GoMLX's pure-Go backend only (no cgo, no PJRT plugin).
GO      ?= go
BIN     ?= bin/cas
CAS_SHARED ?= $(abspath ../shared)
export CGO_ENABLED ?= 0
export CAS_SHARED

.PHONY: build test bench demo lint fuzz gpu-check clean

build:
	$(GO) build -o $(BIN) ./cmd/cas

# The README's test command; .ci/run runs exactly this.
test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

demo: build
	$(BIN) demo

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin
