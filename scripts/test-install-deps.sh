#!/usr/bin/env bash
# Tests scripts/install-test-deps.sh on a machine without PostgreSQL's server
# headers, the state of a fresh Debian with `apt-get install postgresql`
# (postgresql-client-NN ships pgxs.mk, but postgres.h comes only with
# postgresql-server-dev-NN): it removes postgresql-server-dev-NN when
# installed, runs install-test-deps.sh, and checks that the headers are back
# and that ext/fence_guard builds, is installed in the server's $libdir, and
# installs by its own rule. .ci/run runs it in CI, as root, before make test.
#
# Safe to repeat: it removes that one package and nothing else (it stops if
# apt-get would remove more), leaves the installed library in place, and
# ends with the machine as make test needs it. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
	echo "test-install-deps: FAIL: $*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root: it removes and reinstalls a Debian package"

# find_pg_config prints the pg_config of the server the tests use, found as
# install-test-deps.sh finds it; nothing when there is no server.
find_pg_config() {
	local pg_bin=${PG_BIN:-}
	if [ -z "$pg_bin" ] && command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
		pg_bin=$(pg_config --bindir)
	fi
	[ -n "$pg_bin" ] || pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -z "$pg_bin" ] || [ ! -x "$pg_bin/pg_config" ] || echo "$pg_bin/pg_config"
}
pg_config=$(find_pg_config)
if [ -z "$pg_config" ]; then
	# A machine with no PostgreSQL at all: the script installs it first.
	echo "test-install-deps: no PostgreSQL server: running install-test-deps.sh to install one" >&2
	scripts/install-test-deps.sh
	pg_config=$(find_pg_config)
	[ -n "$pg_config" ] || fail "install-test-deps.sh installed no PostgreSQL server"
fi
major=$("$pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
pkg=postgresql-server-dev-$major
server_h=$("$pg_config" --includedir-server)/postgres.h
libdir=$("$pg_config" --pkglibdir)

# 1. The machine without the headers.
if dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
	removed=$(apt-get -s remove "$pkg" | awk '/^Remv /{print $2}')
	[ "$removed" = "$pkg" ] || fail "apt-get remove $pkg would also remove: $(echo "$removed" | grep -vx "$pkg" | tr '\n' ' ')"
	echo "test-install-deps: removing $pkg" >&2
	DEBIAN_FRONTEND=noninteractive apt-get remove -y -q -o DPkg::Lock::Timeout=600 "$pkg" >/dev/null
fi
[ ! -f "$server_h" ] || fail "$server_h is still there after removing $pkg (another package ships it?)"
echo "test-install-deps: no $server_h; pgxs.mk $( [ -f "$("$pg_config" --pgxs)" ] && echo present || echo absent)" >&2
make -s -C ext/fence_guard PG_CONFIG="$pg_config" clean

# 2. The script under test.
scripts/install-test-deps.sh

# 3. What make test needs is there.
[ -f "$server_h" ] || fail "install-test-deps.sh left $server_h missing"
[ -f "$("$pg_config" --pgxs)" ] || fail "install-test-deps.sh left pgxs.mk missing"
[ -f ext/fence_guard/fence_guard.so ] || fail "install-test-deps.sh did not build ext/fence_guard"
cmp -s ext/fence_guard/fence_guard.so "$libdir/fence_guard.so" ||
	fail "$libdir/fence_guard.so is not the library just built"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
make -s -C ext/fence_guard PG_CONFIG="$pg_config" DESTDIR="$staging" install
[ -f "$staging$libdir/fence_guard.so" ] || fail "make install did not install fence_guard.so under DESTDIR"
echo "test-install-deps: ok: install-test-deps.sh installed $pkg and built and installed ext/fence_guard" >&2
