SHELL := /bin/bash
# Labstream — see README.md. `make demo` and `make test` are the two entry points.
SWIFT ?= $(shell command -v swift || echo /opt/swift/usr/bin/swift)
BIN := .build/debug/labstream

.PHONY: all deps build release test demo clean bench

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The integration tests start the built `labstream` binary, so build it first.
test: build
	$(SWIFT) test

demo: build
	mkdir -p mountpoints/demo
	$(BIN) demo mountpoints/demo

# Benchmarks are not part of `make test`: they need quiet machines and minutes.
bench: release
	./bench/run.sh

clean:
	$(SWIFT) package clean
