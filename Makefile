GO ?= go
PKGS := ./...

.PHONY: build test vet unit integration bench fuzz clean

build:
	$(GO) build -o bin/fenceproxy ./cmd/fenceproxy

## test: vet + unit + integration (needs PostgreSQL server binaries; see README)
test: vet
	$(GO) test -count=1 -timeout 30m $(PKGS)

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -count=1 -short $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 $(PKGS)

clean:
	rm -rf bin
