#!/usr/bin/env bash
# Debian's PostgreSQL server for the PostgreSQL store's tests (issue 35): installed with apt-get
# when no server binaries are found (`initdb`, `pg_ctl`), as tests/clients/adb/install.sh installs
# adb. The cluster itself is tests/postgres/cluster.sh's (data in .cache/pg).
set -euo pipefail

found() {
    command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir 2>/dev/null)/initdb" ] && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && return 0
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1
}

if ! found; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
found || { echo "PostgreSQL server binaries still missing after apt-get install postgresql" >&2; exit 1; }
ls -d /usr/lib/postgresql/*/bin 2>/dev/null || dirname "$(command -v initdb)"
