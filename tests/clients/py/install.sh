#!/usr/bin/env bash
# Installs the pinned Python MCP client SDK into .cache/mcp-py (repo root).
# Idempotent; works from any cwd. See docs: docs/spec/mcp.md §12.3.
set -euo pipefail

MCP_VERSION="2.3.0"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

venv=".cache/mcp-py"
py="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p .cache
    "$py" -m venv "$venv"
fi

have="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null || true)"
if [ "$have" != "$MCP_VERSION" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
fi

"$venv/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))'
