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

test: fmt-check vet
	$(GO) test -race -count=1 ./...

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint: fmt-check vet
