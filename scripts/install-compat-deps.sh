#!/usr/bin/env bash
# Installs what `make compat` needs beyond `make test-deps`: the Debian
# packages that psycopg 3's own test suite (integration/compat/testdata/psycopg,
# upstream's tests/ at tag 3.1.7) imports, for Debian's python3 and its
# python3-psycopg, which must be 3.1.7 — the version the vendored suite tests.
# Only what is missing is installed; anything still wrong afterwards fails
# the script with the reason.
#
# The suite is vendored because no registry reachable here serves it: Debian's
# python3-psycopg has no tests, and the mirror serves psycopg3_3.1.7-4.dsc but
# answers 404 for its psycopg3_3.1.7.orig.tar.xz, so `apt-get source psycopg3`
# (with a deb-src line for the same mirror) fails.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=/usr/bin/python3
SUITE=integration/compat/testdata/psycopg
WANT_PSYCOPG=3.1.7

# module:package pairs; psycopg_pool for tests/pool, pytest_timeout so that
# a test hanging through the proxy fails alone instead of stalling the run.
deps=(
	psycopg:python3-psycopg
	psycopg_pool:python3-psycopg-pool
	pytest:python3-pytest
	pytest_asyncio:python3-pytest-asyncio
	pytest_timeout:python3-pytest-timeout
	dns:python3-dnspython
	packaging:python3-packaging
)

# unimportable prints the packages of deps whose module $PYTHON cannot import.
unimportable() {
	"$PYTHON" - "${deps[@]}" <<-'EOF'
		import importlib.util, sys
		for d in sys.argv[1:]:
		    mod, pkg = d.split(":")
		    if importlib.util.find_spec(mod) is None:
		        print(pkg)
	EOF
}

missing=()
if [ -x "$PYTHON" ]; then
	mapfile -t missing < <(unimportable)
else
	missing=(python3 "${deps[@]##*:}")
fi

PROG=install-compat-deps
# shellcheck source=scripts/apt.sh
. scripts/apt.sh

if [ ${#missing[@]} -gt 0 ]; then
	apt_install "${missing[@]}"
fi

still=$(unimportable)
if [ -n "$still" ]; then
	echo "install-compat-deps: $PYTHON still cannot import the modules of: $still" >&2
	exit 1
fi
have=$("$PYTHON" -c 'import psycopg; print(psycopg.__version__)')
if [ "$have" != "$WANT_PSYCOPG" ]; then
	echo "install-compat-deps: python3-psycopg is $have; $SUITE is psycopg $WANT_PSYCOPG's suite (Debian 12's version): vendor the tests of $have to run it" >&2
	exit 1
fi
if [ ! -f "$SUITE/tests/conftest.py" ]; then
	echo "install-compat-deps: $SUITE/tests is missing" >&2
	exit 1
fi
