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

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "install-release-deps: needs root for: $*: run as root, or install ${missing[*]} yourself" >&2
		exit 1
	fi
}

echo "install-release-deps: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -q -o DPkg::Lock::Timeout=600
as_root apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || {
	echo "install-release-deps: aarch64-linux-gnu-gcc still missing after installing ${missing[*]}" >&2
	exit 1
}
