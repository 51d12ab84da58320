#!/usr/bin/env bash
# build-release.sh OUTDIR ARCH...: static linux binaries of fenceproxy, one
# per GOARCH (amd64, arm64), named fenceproxy-VERSION-linux-ARCH, with the
# version and commit stamped (fenceproxy version), and OUTDIR/SHA256SUMS.
#
# pg_query_go is C, so cgo builds it: natively with gcc, for another
# architecture with Debian's cross compiler (scripts/install-release-deps.sh).
# netgo and osusergo keep glibc's NSS (getaddrinfo, getpwnam) out, so the
# binary links fully static (-extldflags -static) and runs on any Linux.
#
# VERSION defaults to the file VERSION, COMMIT to git's HEAD ("-dirty" with
# uncommitted changes). CHECK=0 skips checking the result with file(1).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { echo "usage: $0 OUTDIR ARCH..." >&2; exit 2; }
out=$1
shift
GO=${GO:-go}
version=${VERSION:-$(cat VERSION)}
if [ -z "${COMMIT:-}" ] && git rev-parse HEAD >/dev/null 2>&1; then
	COMMIT=$(git rev-parse HEAD)
	[ -z "$(git status --porcelain --untracked-files=no)" ] || COMMIT+=-dirty
fi
commit=${COMMIT:-}
host=$($GO env GOHOSTARCH)
mkdir -p "$out"

# cc ARCH: the C compiler that targets linux/ARCH from this host.
cc() {
	if [ "$1" = "$host" ]; then
		echo "${CC:-gcc}"
		return
	fi
	case $1 in
	amd64) echo x86_64-linux-gnu-gcc ;;
	arm64) echo aarch64-linux-gnu-gcc ;;
	*) echo "build-release: no C cross compiler known for $1" >&2; exit 1 ;;
	esac
}

# check BIN ARCH: file(1) must see a static executable for ARCH.
check() {
	local desc want
	desc=$(file -b "$1")
	case $2 in
	amd64) want=x86-64 ;;
	arm64) want=aarch64 ;;
	esac
	if [[ $desc != *"$want"* ]] || [[ $desc != *"statically linked"* ]]; then
		echo "build-release: $1 is not a static $2 executable: $desc" >&2
		exit 1
	fi
	echo "build-release: $1: $desc" >&2
}

# runs BIN: the binary runs here and reports the version stamped in it.
runs() {
	local first
	first=$("$1" version | head -n 1)
	if [ "$first" != "fenceproxy $version" ]; then
		echo "build-release: $1 version printed \"$first\", want \"fenceproxy $version\"" >&2
		exit 1
	fi
}

names=()
for arch in "$@"; do
	name=fenceproxy-$version-linux-$arch
	compiler=$(cc "$arch")
	command -v "$compiler" >/dev/null 2>&1 || {
		echo "build-release: $compiler not found: run scripts/install-release-deps.sh" >&2
		exit 1
	}
	echo "build-release: $name ($compiler)" >&2
	CGO_ENABLED=1 GOOS=linux GOARCH=$arch CC=$compiler $GO build -trimpath -buildvcs=false \
		-tags netgo,osusergo \
		-ldflags "-s -w -X main.version=$version -X main.commit=$commit -linkmode external -extldflags -static" \
		-o "$out/$name" ./cmd/fenceproxy
	if [ "${CHECK:-1}" != 0 ]; then
		check "$out/$name" "$arch"
		[ "$arch" != "$host" ] || runs "$out/$name"
	fi
	names+=("$name")
done
(cd "$out" && sha256sum "${names[@]}" >SHA256SUMS)
