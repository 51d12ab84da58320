#!/usr/bin/env bash
# Installs what `make test` needs beyond Go: PostgreSQL's server and client
# programs, and the client drivers of the driver matrix (integration/drivers):
# psycopg 3, psycopg2, SQLAlchemy and asyncpg for Debian's python3,
# node-postgres with pg-cursor, pgjdbc and a JDK;
# PgBouncer, for the bench-compare harness's smoke test and the topology tests;
# systemd-analyze, for the systemd unit's test; and Redis and ZooKeeper, the
# lock backends' stores (lockclient/redislock, lockclient/zklock,
# integration/harness starts them on loopback).
# Only what is missing is installed, so a second run takes about a second.
# Debian packages through apt-get (as root, or through sudo); `pg` and
# `pg-cursor` from npm into integration/drivers/testdata/node (versions pinned
# by its lockfile).
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
# Debian's python3 modules of the driver programs: module=package.
PY_MODULES=(psycopg=python3-psycopg psycopg2=python3-psycopg2 sqlalchemy=python3-sqlalchemy asyncpg=python3-asyncpg)
for mp in "${PY_MODULES[@]}"; do
	[ -x "$PYTHON" ] && "$PYTHON" -c "import ${mp%%=*}" 2>/dev/null || missing+=("${mp#*=}")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
{ command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; } || missing+=(default-jdk-headless)
[ -f "$JDBC_JAR" ] || missing+=(libpostgresql-jdbc-java)
# PgBouncer: the bench-compare harness's smoke test (TestCompareHarness) and the
# topology tests (integration/topology_test.go).
{ command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; } || missing+=(pgbouncer)
# systemd-analyze: the systemd unit's test (integration/packaging).
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# Redis and ZooKeeper: the stores of the redislock and zklock backends' tests.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)

PROG=install-test-deps
# shellcheck source=scripts/apt.sh
. scripts/apt.sh

if [ ${#missing[@]} -gt 0 ]; then
	apt_install "${missing[@]}"
	for mp in "${PY_MODULES[@]}"; do
		if ! "$PYTHON" -c "import ${mp%%=*}"; then
			echo "install-test-deps: $PYTHON cannot import ${mp%%=*} after installing ${mp#*=}" >&2
			exit 1
		fi
	done
fi

# The C guard (ext/fence_guard), for the guard tests that run both
# implementations: the server's headers and PGXS (postgresql-server-dev-NN,
# NN the server the tests use, found as internal/pgcluster finds it), then
# the extension built and installed into that server: the library into its
# $libdir, fence_guard.control and the script into its share directory, where
# CREATE EXTENSION fence_guard finds them (make only rebuilds what changed).
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
	apt_install "postgresql-server-dev-$major" # for ext/fence_guard
fi
libdir=$("$pg_config_bin" --pkglibdir)
extdir=$("$pg_config_bin" --sharedir)/extension
make -s -C ext/fence_guard PG_CONFIG="$pg_config_bin"
installed=yes
cmp -s ext/fence_guard/fence_guard.so "$libdir/fence_guard.so" || installed=no
for f in ext/fence_guard/fence_guard.control ext/fence_guard/fence_guard--*.sql; do
	cmp -s "$f" "$extdir/$(basename "$f")" || installed=no
done
if [ "$installed" = no ]; then
	echo "install-test-deps: installing the extension ext/fence_guard into $libdir and $extdir" >&2
	as_root make -s -C ext/fence_guard PG_CONFIG="$pg_config_bin" install
fi

# Every dependency in package.json must be in node_modules (an older
# checkout's may have pg without pg-cursor): npm ci otherwise.
node_deps=$(cd "$NODE_DIR" && node -e 'console.log(Object.keys(require("./package.json").dependencies).join(" "))')
if [ -z "$node_deps" ]; then
	echo "install-test-deps: no dependencies found in $NODE_DIR/package.json" >&2
	exit 1
fi
node_missing=()
for mod in $node_deps; do
	[ -f "$NODE_DIR/node_modules/$mod/package.json" ] || node_missing+=("$mod")
done
if [ ${#node_missing[@]} -gt 0 ]; then
	echo "install-test-deps: npm ci in $NODE_DIR (missing: ${node_missing[*]})" >&2
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
	for mod in "${node_missing[@]}"; do
		if [ ! -f "$NODE_DIR/node_modules/$mod/package.json" ]; then
			echo "install-test-deps: npm ci did not install $mod into $NODE_DIR/node_modules" >&2
			exit 1
		fi
	done
fi
