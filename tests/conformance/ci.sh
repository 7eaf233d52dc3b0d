#!/usr/bin/env bash
# Runs the official MCP conformance suite against a real `openphone serve` (simulated phone,
# loopback, fresh data directory, the default MCP token) and stops the daemon afterwards.
# Usage: tests/conformance/ci.sh [OUTDIR]   (default target/conformance)
# Installs the suite first (tests/conformance/install.sh). Exit status: run.sh's.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
out="${1:-target/conformance}"

bash "$here/install.sh"
cargo build --locked --quiet -p openphone-cli
bin="$root/target/debug/openphone"

data="$(mktemp -d)"
"$bin" serve --data-dir "$data/d" --listen 127.0.0.1:0 >"$data/serve.log" 2>&1 &
pid=$!
cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

for _ in $(seq 100); do
    [ -s "$data/d/endpoint.json" ] && break
    sleep 0.1
done
if [ ! -s "$data/d/endpoint.json" ]; then
    echo "the daemon did not start:" >&2
    cat "$data/serve.log" >&2
    exit 2
fi
url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mcp_url"])' "$data/d/endpoint.json")"
MCP_TOKEN_FILE="$data/d/mcp.token" bash "$here/run.sh" "$url" "$out"
