# Shortcuts for working on onceflow. `make` or `make help` lists them.

GO ?= go

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-7s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: test
test: ## run every test
	$(GO) test ./...

.PHONY: race
race: ## run the engine and store tests with the race detector
	$(GO) test -race ./store/... .

.PHONY: vet
vet: ## run go vet
	$(GO) vet ./...

.PHONY: fmt
fmt: ## format every Go file with gofmt
	gofmt -w .

.PHONY: schema
schema: ## write flowfile/workflow.schema.json and docs/steps.md from the step kinds
	$(GO) generate ./flowfile

.PHONY: demo
demo: ## run the demo: every effect once, against services that misbehave
	$(GO) run ./cmd/onceflow demo

.PHONY: bench
bench: ## run the engine benchmarks (testing.B) and onceflow bench on SQLite
	$(GO) test -run '^$$' -bench . -benchtime 20000x .
	$(GO) run ./cmd/onceflow bench

.PHONY: peers
peers: ## compare onceflow with River on the local PostgreSQL (bench/peers)
	cd bench/peers && $(GO) run . --rounds 2

.PHONY: build
build: ## build the onceflow binary into ./onceflow
	$(GO) build -o onceflow ./cmd/onceflow

.PHONY: ci
ci: ## run what CI runs (.ci/run)
	./.ci/run
