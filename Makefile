SHELL := /bin/bash
# Labstream — see README.md. `make demo` and `make test` are the two entry points.
SWIFT ?= $(shell command -v swift || echo /opt/swift/usr/bin/swift)
BIN := .build/debug/labstream

.PHONY: all deps build release test lint format demo clean bench install uninstall

PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(DESTDIR)$(PREFIX)/bin
MANDIR := $(DESTDIR)$(PREFIX)/share/man
UNITDIR := $(DESTDIR)$(PREFIX)/lib/systemd/system
SBINDIR := $(DESTDIR)/sbin

all: build

deps:
	@./scripts/deps.sh

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The code's layout is checked against .swift-format (the toolchain's `swift format`); `make
# format` rewrites it so.
lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Package.swift

format:
	$(SWIFT) format format --in-place --recursive Sources Tests Package.swift

# The integration tests start the built `labstream` binary, so build it first.
test: lint build
	@set -o pipefail; $(SWIFT) test 2>&1 | tee .build/test-output.log
	@echo "Skipped: $$(grep -cE 'Test .*\) skipped' .build/test-output.log) tests"; grep -E 'Test .*\) skipped' .build/test-output.log || true

demo: build
	mkdir -p mountpoints/demo
	$(BIN) demo mountpoints/demo

# Benchmarks are not part of `make test`: they need quiet machines and minutes.
bench: release
	./bench/run.sh

# labstream, mount.labstream (one binary, two names) and the /sbin helper link that mount(8)
# looks for, the labstream-probe helper (it must sit beside labstream), the man pages, and the
# systemd unit templates.
INSTALL_BIN ?= .build/release/labstream
INSTALL_PROBE ?= $(dir $(INSTALL_BIN))labstream-probe

.build/release/labstream:
	$(SWIFT) build -c release

install: $(INSTALL_BIN)
	install -d $(BINDIR) $(MANDIR)/man1 $(MANDIR)/man5 $(MANDIR)/man7 $(MANDIR)/man8 $(UNITDIR) $(SBINDIR)
	install -m 755 $(INSTALL_BIN) $(BINDIR)/labstream
	install -m 755 $(INSTALL_PROBE) $(BINDIR)/labstream-probe
	ln -sf labstream $(BINDIR)/mount.labstream
	ln -sf $(PREFIX)/bin/labstream $(SBINDIR)/mount.labstream
	install -m 644 man/labstream.1 $(MANDIR)/man1/labstream.1
	install -m 644 man/labstream.conf.5 $(MANDIR)/man5/labstream.conf.5
	install -m 644 man/labstream-http.7 $(MANDIR)/man7/labstream-http.7
	install -m 644 man/mount.labstream.8 $(MANDIR)/man8/mount.labstream.8
	sed 's|/usr/local/bin/labstream|$(PREFIX)/bin/labstream|' mountpoints/labstream@.service > $(UNITDIR)/labstream@.service
	install -m 644 mountpoints/srv-media.mount mountpoints/srv-media.automount $(UNITDIR)/

uninstall:
	rm -f $(BINDIR)/labstream $(BINDIR)/labstream-probe $(BINDIR)/mount.labstream $(SBINDIR)/mount.labstream
	rm -f $(MANDIR)/man1/labstream.1 $(MANDIR)/man5/labstream.conf.5 $(MANDIR)/man7/labstream-http.7 $(MANDIR)/man8/mount.labstream.8
	rm -f $(UNITDIR)/labstream@.service $(UNITDIR)/srv-media.mount $(UNITDIR)/srv-media.automount

clean:
	$(SWIFT) package clean
