#!/usr/bin/env bash
# Instructions per call: the daemon's CPU work per call, counted by valgrind's callgrind, which
# the machine's load does not move (calls/s does). See docs/benchmarks.md.
#
# Starts the daemon (`openphone serve`) under `valgrind --tool=callgrind` in a fresh data
# directory, then for each path below zeroes the daemon's counters, makes CALLS calls per
# connection with `openphone bench` (not under valgrind), dumps the counters and divides the
# instructions the daemon executed (every thread) by the calls it answered:
#   ws-status   WebSocket tools.invoke openphone.device.status
#   ws-screen   WebSocket tools.invoke openphone.screen.get (no screenshot)
#   mcp-2025    MCP tools/call openphone_device_status, era 2025-11-25
#   mcp-2026    MCP tools/call openphone_device_status, era 2026-07-28
# The figure includes everything the daemon did meanwhile (its timers too), so it is a little
# above the pure per-call work; under valgrind the threads run one at a time, so the group
# commit's batches are smaller than on a real run.
#
# Usage: bench/instructions.sh [CALLS]
#   CALLS             calls per connection (default $BENCH_CALLS or 250), 2 connections
#   OPENPHONE_BIN     the openphone binary to measure (default: build target/release/openphone)
#   BENCH_DIR         where the data directory goes (default target/)
# The callgrind files are kept in target/bench-results/callgrind/ (callgrind_annotate reads them),
# named after the daemon's process id.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

calls="${1:-${BENCH_CALLS:-250}}"
log() { printf '[instructions] %s\n' "$*" >&2; }
callgrind_results "$root" callgrind
openphone="$(release_binary "$root")"
with_workdir "$root" bench-instr

token="$(bench_config "$work")"

log "starting the daemon under callgrind"
start_daemon 1200 valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out.%p" "$openphone"

# The total instructions (Ir) of the newest dump.
last_ir() {
    local file
    file="$(ls -t "$out"/callgrind.out."$daemon_pid"* | head -n1)"
    awk '/^(summary|totals):/ {print $2; exit}' "$file"
}

rows=()
# measure NAME ARGS...: zero, run the load, dump, print instructions per answered call.
measure() {
    local name="$1"
    shift
    log "$name"
    # One untimed call per connection first, so connection set-up is not counted.
    "$openphone" bench "$@" --connections 2 --calls 1 --json >/dev/null 2>&1 || true
    callgrind_control -z "$daemon_pid" >/dev/null
    "$openphone" bench "$@" --connections 2 --calls "$calls" --timeout 120 --json \
        >"$out/$name.json" 2>"$out/$name.err" || true
    callgrind_control -d "$name" "$daemon_pid" >/dev/null
    sleep 0.5
    local ir ok
    ir="$(last_ir)"
    ok="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$out/$name.json" 2>/dev/null || echo 0)"
    rows+=("$name $ir $ok")
}

measure ws-status invoke --url "$ws_url" --token "$token" \
    --tool openphone.device.status --params '{"reason": "benchmark"}'
measure ws-screen invoke --url "$ws_url" --token "$token" \
    --tool openphone.screen.get --params '{"reason": "benchmark", "include_screenshot": false}'
measure mcp-2025 mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era 2025-11-25 \
    --tool openphone_device_status --args '{"reason": "benchmark"}'
measure mcp-2026 mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era 2026-07-28 \
    --tool openphone_device_status --args '{"reason": "benchmark"}'

echo
echo "instructions per call (callgrind, daemon, all threads; $calls calls × 2 connections)"
echo
echo "| path | calls answered | instructions per call |"
echo "|---|---|---|"
for row in "${rows[@]}"; do
    set -- $row
    if [ "${3:-0}" -gt 0 ] 2>/dev/null && [ -n "${2:-}" ]; then
        printf '| %s | %s | %s |\n' "$1" "$3" "$(($2 / $3))"
    else
        printf '| %s | failed (see %s.err) | — |\n' "$1" "$1"
    fi
done
