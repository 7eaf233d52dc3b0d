#!/usr/bin/env bash
# Runs the official MCP conformance suite (server mode) against a running MCP server over HTTP.
#
#   tests/conformance/run.sh MCP_URL OUTDIR
#
# Needs tests/conformance/install.sh to have run (Node 24 and the suite under .cache/); fetches
# nothing at run time. For each spec version it runs the scenarios that apply to a tools-only
# server (no prompts, resources, completions or logging capability, and none of the suite's
# fixture tools such as test_simple_text), one suite invocation per scenario, with the
# expected-failures baseline tests/conformance/baseline.yml. Writes OUTDIR/<version>/<scenario>/
# {checks.json,output.log}, prints one line per scenario and a final `N passed, M failed`
# (scenarios), and exits 1 if any scenario failed beyond the baseline (or a baseline entry is
# stale), 2 on a usage or setup error.
#
# Environment (all optional):
#   MCP_TOKEN / MCP_TOKEN_FILE   bearer token for the server; sent as `Authorization: Bearer ...`
#                                on every request to MCP_URL's host:port (the suite has no header
#                                option; auth-preload.mjs adds it). Never printed; scrubbed from
#                                OUTDIR should it appear there.
#   CONFORMANCE_BASELINE         baseline file instead of tests/conformance/baseline.yml
#   CONFORMANCE_VERSIONS         space-separated spec versions (default "2025-11-25 2026-07-28")
#   CONFORMANCE_SCENARIOS        space-separated scenarios to run at every version in
#                                CONFORMANCE_VERSIONS instead of the built-in lists below
#   CONFORMANCE_TIMEOUT_MS       per-scenario timeout inside the suite (default 30000)
set -uo pipefail

if [ "$#" -ne 2 ]; then
  echo "usage: $0 MCP_URL OUTDIR" >&2
  exit 2
fi
MCP_URL="$1"
OUTDIR="$2"

# Loopback only (tests never send traffic elsewhere).
case "$MCP_URL" in
  http://127.*|http://localhost[:/]*|http://\[::1\]*) ;;
  *) echo "refusing non-loopback MCP_URL: $MCP_URL" >&2; exit 2 ;;
esac

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
mkdir -p "$OUTDIR" || exit 2
OUTDIR="$(cd "$OUTDIR" && pwd)"

NODE_SHIM="$ROOT/.cache/node24/shim"
PKG_DIR="$ROOT/.cache/conformance/node_modules/@modelcontextprotocol/conformance"
SUITE_JS="$PKG_DIR/dist/index.js"
BASELINE="${CONFORMANCE_BASELINE:-$HERE/baseline.yml}"
VERSIONS="${CONFORMANCE_VERSIONS:-2025-11-25 2026-07-28}"
TIMEOUT_MS="${CONFORMANCE_TIMEOUT_MS:-30000}"

# Scenarios that apply to a tools-only server, per spec version (the suite's `list --server`
# shows the rest; each needs fixture tools, prompts, resources or x-mcp-header tools we lack).
declare -A SCENARIOS=(
  [2025-11-25]="server-initialize server-session-lifecycle ping logging-set-level tools-list server-sse-multiple-streams dns-rebinding-protection"
  [2026-07-28]="server-stateless tools-list server-sse-multiple-streams dns-rebinding-protection caching http-header-validation input-required-result-unsupported-methods"
)

if [ ! -x "$NODE_SHIM/node" ] || [ ! -f "$SUITE_JS" ]; then
  echo "conformance suite not installed: run tests/conformance/install.sh first" >&2
  exit 2
fi
export PATH="$NODE_SHIM:$PATH"
export CONFORMANCE_PKG_DIR="$PKG_DIR"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 22 ]; then
  echo "node $(node --version) is too old for the conformance suite (needs >= 22)" >&2
  exit 2
fi
if [ ! -f "$BASELINE" ]; then
  echo "baseline file not found: $BASELINE" >&2
  exit 2
fi

# Optional bearer token, injected by auth-preload.mjs.
TOKEN="${MCP_TOKEN:-}"
if [ -z "$TOKEN" ] && [ -n "${MCP_TOKEN_FILE:-}" ]; then
  TOKEN="$(tr -d '\r\n' < "$MCP_TOKEN_FILE")" || exit 2
fi
PRELOAD=()
if [ -n "$TOKEN" ]; then
  export CONFORMANCE_AUTHORIZATION="Bearer $TOKEN"
  CONFORMANCE_AUTH_ORIGIN="$(node -p 'new URL(process.argv[1]).origin' "$MCP_URL")" || exit 2
  export CONFORMANCE_AUTH_ORIGIN
  PRELOAD=(--import "$(node -p 'require("url").pathToFileURL(process.argv[1]).href' "$HERE/auth-preload.mjs")")
  auth_note="with bearer token"
else
  unset CONFORMANCE_AUTHORIZATION CONFORMANCE_AUTH_ORIGIN
  auth_note="without auth"
fi

echo "conformance $(node -p 'require(process.argv[1]).version' "$PKG_DIR/package.json") on node $(node --version) against $MCP_URL ($auth_note)"
echo "baseline: $BASELINE; results: $OUTDIR"

passed=0
failed=0
for version in $VERSIONS; do
  if [ -n "${CONFORMANCE_SCENARIOS:-}" ]; then
    list="$CONFORMANCE_SCENARIOS"
  else
    list="${SCENARIOS[$version]:-}"
    if [ -z "$list" ]; then
      echo "no scenario list for spec version $version" >&2
      exit 2
    fi
  fi
  mkdir -p "$OUTDIR/$version"
  effective="$OUTDIR/$version/baseline.effective.yml"
  if ! node "$HERE/lib.mjs" baseline "$BASELINE" "$version" "$effective"; then
    echo "invalid baseline file: $BASELINE" >&2
    exit 2
  fi
  for scenario in $list; do
    dir="$OUTDIR/$version/$scenario"
    rm -rf "$dir"
    mkdir -p "$dir"
    # Bounded: the suite's own per-scenario timeout plus a margin, then SIGTERM, then SIGKILL.
    timeout --kill-after=10 "$(( TIMEOUT_MS / 1000 + 60 ))" \
      node "${PRELOAD[@]}" "$SUITE_JS" server \
        --url "$MCP_URL" --scenario "$scenario" --spec-version "$version" \
        --expected-failures "$effective" --timeout "$TIMEOUT_MS" \
        -o "$dir" > "$dir/output.log" 2>&1 < /dev/null
    rc=$?
    # The suite writes <dir>/server-<scenario>-<timestamp>/checks.json; keep a stable path.
    for f in "$dir"/server-*/checks.json; do
      [ -f "$f" ] || continue
      mv "$f" "$dir/checks.json"
      rmdir "$(dirname "$f")" 2>/dev/null || true
    done
    if node "$HERE/lib.mjs" summary "$version" "$scenario" "$dir/checks.json" "$effective" "$rc"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
    fi
  done
done

# The token must never end up in artifacts.
if [ -n "$TOKEN" ]; then
  grep -rlF -- "$TOKEN" "$OUTDIR" 2>/dev/null | while IFS= read -r f; do
    TOKEN="$TOKEN" node -e '
      const fs = require("fs"); const f = process.argv[1];
      fs.writeFileSync(f, fs.readFileSync(f, "utf8").split(process.env.TOKEN).join("<redacted>"));' "$f"
    echo "warning: redacted the token from $f" >&2
  done
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
