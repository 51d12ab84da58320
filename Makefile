GO ?= go
PKGS := ./...

.PHONY: build test vet lint unit integration bench bench-pgbench bench-memory bench-guard fuzz fuzz-diff clean

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

## bench-guard: the database guard's cost (fenceproxy protect): pgbench tpcb-like and a
## 100,000-row COPY, guard on vs off, median of 5 alternating runs
bench-guard:
	$(GO) test -run '^$$' -bench 'BenchmarkGuardCost' -benchtime 5x -timeout 30m ./integration/

## bench-memory: peak RSS of `fenceproxy serve` with 200 idle sessions and a 256 MiB COPY in and out
bench-memory:
	$(GO) test -run '^$$' -bench 'BenchmarkMemory' -benchtime 1x -timeout 30m ./integration/

## lint: gofmt, go vet and staticcheck
lint: vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

## fuzz: run each fuzz target for FUZZTIME (default 30s); crashers land in testdata/fuzz
FUZZTIME ?= 30s
FUZZ_TARGETS := internal/pgwire:FuzzReadStartup internal/pgwire:FuzzReader internal/pgwire:FuzzSession internal/gate:FuzzAnalyze \
	internal/gate:FuzzDirectives internal/hwm:FuzzLiteralRoundTrip
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; \
	done

## fuzz-diff: the differential fuzz target against a real PostgreSQL for FUZZTIME:
## random texts and settings through the proxy, compared with the server straight
## (integration/fuzz_diff_test.go); one worker per core
fuzz-diff:
	$(GO) test -run '^$$' -fuzz '^FuzzDifferential$$' -fuzztime $(FUZZTIME) -timeout 0 ./integration/
