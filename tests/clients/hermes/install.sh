#!/usr/bin/env bash
# Installs the pinned Hermes Agent (Nous Research, PyPI `hermes-agent` with its `mcp` and `cron`
# extras) into .cache/hermes-venv (repo root), for the Hermes suites (docs/hermes.md).
# Idempotent: a venv that already holds the pinned version is left alone. Works from any cwd.
# Prints the venv and the `hermes` executable it provides.
set -euo pipefail

HERMES_VERSION="0.19.0"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

venv=".cache/hermes-venv"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p .cache
    "$py" -m venv "$venv"
fi

have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("hermes-agent"))' 2>/dev/null || true)"
if [ "$have" != "$HERMES_VERSION" ] || [ ! -x "$venv/bin/hermes" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "hermes-agent[mcp,cron]==$HERMES_VERSION"
fi
# Hermes' API server (`hermes gateway run`, the runtime adapter's /v1/runs surface) needs aiohttp,
# which the mcp and cron extras do not bring; 3.14.1 is the version hermes-agent's own extras pin
# (the whole `messaging` extra would pull every chat platform's SDK).
if ! "$venv/bin/python" -c 'import aiohttp' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "aiohttp==3.14.1"
fi

"$venv/bin/python" -c 'import importlib.metadata as m; print("hermes-agent", m.version("hermes-agent"))'
echo "venv: $root/$venv"
echo "hermes: $root/$venv/bin/hermes"
