#!/usr/bin/env bash
# The dashboard's browser suite (docs/dashboard.md): installs playwright-core (npm ci) when
# missing, builds the openphone and openphone-fake-model binaries, and runs suite.mjs against
# the system Chromium.
# Screenshots land in .cache/dashboard-shots/ (override with SHOTS=…).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$HERE"
CHROMIUM="${CHROMIUM:-$(command -v chromium || true)}"
if [ -z "$CHROMIUM" ]; then
  echo "chromium is not installed (apt-get install -y chromium)" >&2
  exit 1
fi
export CHROMIUM
if [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund
fi
if [ -z "${OPENPHONE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --locked -p openphone-cli --bin openphone -p openphone-fake-model --bin openphone-fake-model)
  export OPENPHONE_BIN="$ROOT/target/debug/openphone"
fi
# The background job's model: the repo's scripted fake OpenAI-compatible server.
export FAKE_MODEL_BIN="${FAKE_MODEL_BIN:-$(dirname "$OPENPHONE_BIN")/openphone-fake-model}"
if [ ! -x "$FAKE_MODEL_BIN" ]; then
  (cd "$ROOT" && cargo build --locked -p openphone-fake-model --bin openphone-fake-model)
fi
# Node 22+ has WebSocket built in; Node 20 needs the flag.
NODE_FLAGS=()
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  NODE_FLAGS+=(--experimental-websocket)
fi
exec node "${NODE_FLAGS[@]}" --test --test-concurrency=1 suite.mjs
