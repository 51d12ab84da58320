#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: PostgreSQL's server and client
# programs, and the client drivers of the driver matrix (integration/drivers):
# psycopg 3 and asyncpg for Debian's python3, node-postgres, pgjdbc and a JDK;
# and PgBouncer, for the bench-compare harness's smoke test.
# Only what is missing is installed, so a second run takes about a second.
# Debian packages through apt-get (as root, or through sudo); `pg` from npm
# into integration/drivers/testdata/node (versions pinned by its lockfile).
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_DIR=integration/drivers/testdata/node
JDBC_JAR=/usr/share/java/postgresql.jar
PYTHON=/usr/bin/python3

have_pg() {
	[ -n "${PG_BIN:-}" ] && [ -x "$PG_BIN/initdb" ] && return 0
	command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ] && return 0
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}

missing=()
if ! have_pg || ! command -v psql >/dev/null 2>&1 || ! command -v pgbench >/dev/null 2>&1; then
	missing+=(postgresql postgresql-contrib)
fi
[ -x "$PYTHON" ] && "$PYTHON" -c 'import psycopg' 2>/dev/null || missing+=(python3-psycopg)
[ -x "$PYTHON" ] && "$PYTHON" -c 'import asyncpg' 2>/dev/null || missing+=(python3-asyncpg)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
{ command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; } || missing+=(default-jdk-headless)
[ -f "$JDBC_JAR" ] || missing+=(libpostgresql-jdbc-java)
# PgBouncer: the bench-compare harness's smoke test (TestCompareHarness).
{ command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; } || missing+=(pgbouncer)

# as_root runs a command as root: directly, or through sudo.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "install-test-deps: needs root for: $*: run as root, or run it yourself" >&2
		exit 1
	fi
}

if [ ${#missing[@]} -gt 0 ]; then
	echo "install-test-deps: installing Debian packages: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -q -o DPkg::Lock::Timeout=600
	as_root apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

# The C guard (ext/fence_guard), for the guard tests that run both
# implementations: the server's headers and PGXS (postgresql-server-dev-NN,
# NN the server the tests use, found as internal/pgcluster finds it), then
# the library built into that server's $libdir (make only rebuilds what
# changed).
pg_bin=${PG_BIN:-}
if [ -z "$pg_bin" ] && command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
	pg_bin=$(pg_config --bindir)
fi
[ -n "$pg_bin" ] || pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
pg_config_bin=$pg_bin/pg_config
[ -x "$pg_config_bin" ] || pg_config_bin=$(command -v pg_config)
# Debian's postgresql-client-NN ships pgxs.mk without the server headers,
# so both are looked for.
pgxs=$("$pg_config_bin" --pgxs)
server_h=$("$pg_config_bin" --includedir-server)/postgres.h
if [ ! -f "$pgxs" ] || [ ! -f "$server_h" ]; then
	major=$("$pg_config_bin" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
	echo "install-test-deps: installing Debian package postgresql-server-dev-$major (for ext/fence_guard)" >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -q -o DPkg::Lock::Timeout=600
	as_root apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "postgresql-server-dev-$major"
fi
libdir=$("$pg_config_bin" --pkglibdir)
make -s -C ext/fence_guard PG_CONFIG="$pg_config_bin"
if ! cmp -s ext/fence_guard/fence_guard.so "$libdir/fence_guard.so"; then
	echo "install-test-deps: installing ext/fence_guard into $libdir" >&2
	as_root make -s -C ext/fence_guard PG_CONFIG="$pg_config_bin" install
fi

if [ ! -f "$NODE_DIR/node_modules/pg/package.json" ]; then
	echo "install-test-deps: npm ci in $NODE_DIR (node-postgres)" >&2
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi
