# Tollgate. `make run` reads .env when present; `make test` is offline.
GO ?= go
BIN := bin/bot
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build run test bench lint fmt-check vet

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/bot

# .env is read by the bot itself, literally, so a value with spaces or $
# needs no shell quoting; variables set in the environment win over it.
run: build
	@if [ -f .env ]; then exec ./$(BIN) --env-file .env; else exec ./$(BIN); fi

# go test shows nothing of a passing package, so the line that says the
# PostgreSQL tests were skipped is printed here (store/pgtest finds the
# server the same way).
test: fmt-check vet
	@bin=$$(pg_config --bindir 2>/dev/null); \
	for d in "$$bin" /usr/lib/postgresql/*/bin; do \
		if [ -x "$$d/initdb" ] && [ -x "$$d/pg_ctl" ]; then exit 0; fi; \
	done; \
	echo "PostgreSQL tests not run: no initdb and pg_ctl from pg_config --bindir or /usr/lib/postgresql/*/bin (install Debian's postgresql package)"
	$(GO) test -race -count=1 ./...

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint: fmt-check vet
