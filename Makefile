GO ?= go
PKGS := ./...
## The lockclient modules (lockclient/README.md): `go test ./...` at the root
## does not enter them, so test, vet and lint run in each as well.
MODULES := lockclient lockclient/redislock lockclient/zklock lockclient/pgxfence

.PHONY: build test vet lint unit integration bench bench-pgbench bench-memory bench-guard bench-compare fuzz fuzz-diff clean chaos

build:
	$(GO) build -o bin/fenceproxy ./cmd/fenceproxy

## test: vet + unit + integration (needs PostgreSQL server binaries and the
## driver matrix's drivers: test-deps installs what is missing; see docs/development.md).
## -p 1: packages that start their own PostgreSQL and etcd run one at a time, so
## that latency assertions (cancel within 1 s, loss within one renewal) hold on 2 cores.
test: vet test-deps
	$(GO) test -count=1 -p 1 -timeout 30m $(PKGS)
	@for m in $(MODULES); do echo "go test ./... in $$m"; (cd $$m && $(GO) test -count=1 -p 1 -timeout 10m ./...) || exit 1; done

## test-deps: PostgreSQL, the drivers of integration/drivers (Debian packages, `pg` from npm) and ext/fence_guard built into that PostgreSQL
.PHONY: test-deps compat
test-deps:
	scripts/install-test-deps.sh

vet:
	$(GO) vet $(PKGS)
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

unit:
	$(GO) test -count=1 -short $(PKGS)
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 -short ./...) || exit 1; done

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $$($(GO) list ./... | grep -v /integration)

clean:
	rm -rf bin dist

## release: static linux/amd64 and linux/arm64 binaries, version (file VERSION)
## and commit stamped, in dist/ with SHA256SUMS; each checked with file(1), the
## host's run. Installs the arm64 C cross compiler when missing. Slow (a cold
## build per architecture), so not part of make test. See docs/install.md.
RELEASE_ARCHES ?= amd64 arm64
.PHONY: release
release:
	scripts/install-release-deps.sh
	rm -rf dist
	GO=$(GO) scripts/build-release.sh dist $(RELEASE_ARCHES)

## image: the container image fenceproxy:VERSION from the Dockerfile (needs docker)
.PHONY: image
image:
	docker build --build-arg VERSION=$$(cat VERSION) --build-arg COMMIT=$$(git rev-parse HEAD) -t fenceproxy:$$(cat VERSION) .

## chaos: the fault suite (integration/chaos) for CHAOS_DURATION (default 5m) with
## the hand-off targets enforced (and its transaction-pool round for half of it),
## then 10 lock-run takeovers that must exit 76.
## make test runs a 45 s round of it (and 22 s pooled) with correctness checks only.
CHAOS_DURATION ?= 5m
chaos:
	FENCEPROXY_CHAOS_DURATION=$(CHAOS_DURATION) FENCEPROXY_CHAOS_STRICT=1 \
		$(GO) test -count=1 -v -timeout 60m -run '^TestChaos$$' ./integration/chaos/
	FENCEPROXY_TAKEOVER_ROUNDS=5 $(GO) test -count=1 -v -timeout 10m -run '^TestLockRunTakeoverExits76$$' ./integration/

## bench-pgbench: pgbench select-only -c 16, direct vs through the proxy, same run
bench-pgbench:
	$(GO) test -run '^$$' -bench 'BenchmarkPgbench' -benchtime 3x -timeout 30m ./integration/

## bench-guard: the database guard's cost (fenceproxy protect): pgbench tpcb-like and a
## 100,000-row COPY with no guard, the PL/pgSQL guard and the C guard: server CPU per
## transaction and TPS, 9 alternating rounds; and the guard's cost per write statement
## inside one backend
bench-guard:
	$(GO) test -run '^$$' -bench 'BenchmarkGuard' -benchtime 9x -timeout 30m ./integration/

## bench-memory: peak RSS of `fenceproxy serve` with 200 idle sessions and a 256 MiB COPY in and out
bench-memory:
	$(GO) test -run '^$$' -bench 'BenchmarkMemory' -benchtime 1x -timeout 30m ./integration/

## compat: pgx's own test suite (go.mod's pgx, from the module cache) and psycopg
## 3.1.7's (vendored; Debian's python3-psycopg), each direct and through the
## proxy, pgx's also through the proxy in transaction pool mode; prints the pass
## counts and the difference of the pass sets (docs/compat.md).
## compat-deps: what psycopg's suite imports (scripts/install-compat-deps.sh)
compat: test-deps compat-deps
	$(GO) test -tags compat -count=1 -v -timeout 120m -run 'TestPgxSuite|TestPsycopgSuite' ./integration/compat/

.PHONY: compat-deps
compat-deps:
	scripts/install-compat-deps.sh

## bench-compare: fenceproxy beside PgBouncer (session, then transaction mode) on loopback, pgbench
## workloads interleaved over ROUNDS rounds; prints TPS, latency and the proxy's
## CPU µs per transaction. Installs pgbouncer (Debian package) when missing.
## BENCH_PROFILE=DIR also saves CPU profiles of fenceproxy there; BENCH_ROWS=REGEXP
## runs only the rows whose name matches.
ROUNDS ?= 3
bench-compare:
	GO=$(GO) bash .ci/bench-compare -benchtime $(ROUNDS)x

## lint: gofmt, go vet and staticcheck
lint: vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	@for m in $(MODULES); do (cd $$m && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...) || exit 1; done

## fuzz: run each fuzz target for FUZZTIME (default 30s); crashers land in testdata/fuzz.
## The last, FuzzSessionModel, needs PostgreSQL: random sequences of client
## messages straight to the server and through the proxy, replies compared
## (integration/session_model_diff_test.go); `make test` runs its fixed corpus.
FUZZTIME ?= 30s
FUZZ_TARGETS := internal/pgwire:FuzzReadStartup internal/pgwire:FuzzReader internal/pgwire:FuzzSession internal/gate:FuzzAnalyze \
	internal/gate:FuzzDirectives internal/fencestore:FuzzLiteralRoundTrip
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$pkg/ || exit 1; \
	done
	@echo "fuzz FuzzSessionModel (integration) for $(FUZZTIME)"
	$(GO) test -run '^$$' -fuzz '^FuzzSessionModel$$' -fuzztime $(FUZZTIME) -timeout 0 ./integration/

## fuzz-diff: the differential fuzz target against a real PostgreSQL for FUZZTIME:
## random texts and settings through the proxy, compared with the server straight
## (integration/fuzz_diff_test.go); one worker per core
fuzz-diff:
	$(GO) test -run '^$$' -fuzz '^FuzzDifferential$$' -fuzztime $(FUZZTIME) -timeout 0 ./integration/

## image-test: builds the container image and runs serve in it with a mounted config (needs a docker daemon; not part of make test)
.PHONY: image-test
image-test:
	$(GO) test -tags docker -count=1 -v -run TestDockerImage ./integration/packaging/
