GO ?= go
PKGS := ./...

.PHONY: build test vet lint unit integration bench bench-pgbench fuzz clean

build:
	$(GO) build -o bin/fenceproxy ./cmd/fenceproxy

## test: vet + unit + integration (needs PostgreSQL server binaries; see README).
## -p 1: packages that start their own PostgreSQL and etcd run one at a time, so
## that latency assertions (cancel within 1 s, loss within one renewal) hold on 2 cores.
test: vet
	$(GO) test -count=1 -p 1 -timeout 30m $(PKGS)

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -count=1 -short $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $$($(GO) list ./... | grep -v /integration)

clean:
	rm -rf bin

## bench-pgbench: pgbench select-only -c 16, direct vs through the proxy, same run
bench-pgbench:
	$(GO) test -run '^$$' -bench 'BenchmarkPgbench' -benchtime 3x -timeout 30m ./integration/

## lint: gofmt, go vet and staticcheck
lint: vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
