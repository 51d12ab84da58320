#!/usr/bin/env bash
# Installs what `make release` needs beyond Go: the C cross-compiler for
# linux/arm64 (pg_query_go is C, built through cgo) and file(1), which the
# release target uses to check what it built. Debian packages through
# apt-get (as root, or through sudo); only what is missing.
set -euo pipefail

missing=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v file >/dev/null 2>&1 || missing+=(file)
[ ${#missing[@]} -eq 0 ] && exit 0

PROG=install-release-deps
# shellcheck source=scripts/apt.sh
. "$(dirname "$0")/apt.sh"

apt_install "${missing[@]}"
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || {
	echo "install-release-deps: aarch64-linux-gnu-gcc still missing after installing ${missing[*]}" >&2
	exit 1
}
