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

if [ ${#missing[@]} -gt 0 ]; then
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 || {
			echo "install-test-deps: missing ${missing[*]}: run as root, or apt-get install them" >&2
			exit 1
		}
		sudo=(sudo)
	fi
	echo "install-test-deps: installing Debian packages: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q -o DPkg::Lock::Timeout=600
	"${sudo[@]}" apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi

if [ ! -f "$NODE_DIR/node_modules/pg/package.json" ]; then
	echo "install-test-deps: npm ci in $NODE_DIR (node-postgres)" >&2
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi
