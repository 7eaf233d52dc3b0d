#!/usr/bin/env bash
# The PostgreSQL store's tests as CI runs them (issue 35), called by .ci/run:
#   1. Debian's PostgreSQL server, installed with apt-get when no server binaries are found
#      (`apt-get install -y postgresql`, as tests/clients/adb/install.sh installs adb);
#   2. the throwaway cluster of tests/postgres/cluster.sh (data in .cache/pg, loopback only),
#      started unless it already runs, and stopped again at the end when this script started it;
#   3. OPENPHONE_TEST_PG_URL exported, so crates/store-pg/build.rs compiles the conformance suite
#      in, then clippy over openphone-store-pg's targets (the lint step of .ci/run runs without
#      the variable and so never sees tests/conformance.rs) and
#      `cargo test --locked -p openphone-store-pg`: the unit tests, the plumbing tests and the
#      conformance suite (the store's behavioural test modules on PostgreSQL);
#   4. the counts per test target, and a failure when the conformance suite ran no test (it must
#      never pass by running against nothing).
# Usage: bash tests/postgres/ci.sh [extra cargo test args, e.g. -- memory::]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
started_at=$(date +%s)

find_server() {
    command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ] && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1
}

echo "-- PostgreSQL server binaries"
if ! find_server; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
ls -d /usr/lib/postgresql/*/bin 2>/dev/null || command -v initdb

echo "-- throwaway cluster (tests/postgres/cluster.sh)"
we_started=0
if ! bash "$here/cluster.sh" status >/dev/null 2>&1; then
    we_started=1
fi
OPENPHONE_TEST_PG_URL="$(bash "$here/cluster.sh" start)"
export OPENPHONE_TEST_PG_URL
echo "OPENPHONE_TEST_PG_URL=$OPENPHONE_TEST_PG_URL"
log="$(mktemp)"
cleanup() {
    rm -f "$log"
    if [ "$we_started" = 1 ]; then bash "$here/cluster.sh" stop || true; fi
}
trap cleanup EXIT

echo "-- lint with the conformance suite compiled in"
cargo clippy --locked -p openphone-store-pg --all-targets -- -D warnings

echo "-- cargo test --locked -p openphone-store-pg"
status=0
cargo test --locked -p openphone-store-pg "$@" 2>&1 | tee "$log" || status=$?

# "Running tests/conformance.rs (target/...)" then, later, "test result: ok. N passed; ..."
echo "-- counts"
awk '
    /^ *Running / { target = ($2 == "unittests") ? $2 " " $3 : $2 }
    /^ *Doc-tests / { target = "doc-tests " $2 }
    /^test result:/ {
        passed = $4; failed = $6; ignored = $8
        sub(/;/, "", passed); sub(/;/, "", failed); sub(/;/, "", ignored)
        printf "%-28s %5d passed %5d failed %5d ignored\n", target, passed, failed, ignored
        tp += passed; tf += failed; ti += ignored
        if (target ~ /conformance/) conformance += passed + failed
    }
    END {
        printf "%-28s %5d passed %5d failed %5d ignored\n", "total", tp, tf, ti
        if (conformance == 0) { print "conformance suite: no test ran"; exit 3 }
    }
' "$log" || { [ "$status" != 0 ] || status=3; }
echo "PostgreSQL store tests: exit $status, $(($(date +%s) - started_at)) s"
exit "$status"
