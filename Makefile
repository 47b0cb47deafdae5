# Tollgate. `make run` reads .env when present; `make test` is offline.
GO ?= go
BIN := bin/bot
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build run test bench lint fmt-check vet

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/bot

run: build
	@if [ -f .env ]; then set -a; . ./.env; set +a; fi; ./$(BIN)

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
