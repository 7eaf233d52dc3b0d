#!/usr/bin/env bash
# Allocations per call, and where they are made: the daemon under valgrind's callgrind with
# every call of Rust's allocator entry points (`__rust_alloc`, `__rust_realloc`) counted under
# the chain of its callers (`--separate-callers`), so the count is exact and the machine's load
# does not move it. Each allocation is a malloc and a free — in the ninth round's profiles the
# allocator was ~7 % of the daemon's CPU — and the chains say which code makes them. See
# docs/benchmarks.md ("Allocations per call").
#
# Starts the daemon (`openphone serve`) in a fresh data directory, makes one untimed call per
# connection, zeroes the counters, makes CALLS calls on each of 2 connections with `openphone
# bench` (not under valgrind), dumps the counters and prints allocations per answered call with
# the places that make most (`bench/alloc_chains.py`).
#
# Usage: bench/allocs.sh [CALLS] [PATH]
#   CALLS             calls per connection (default $BENCH_CALLS or 200), 2 connections
#   PATH              mcp-2025 (default) | mcp-2026 | ws-status | ws-screen
#   ALLOC_DEPTH       callers kept per chain (default 10)
#   ALLOC_TOP         places printed (default 25)
#   OPENPHONE_BIN     the openphone binary to measure (default: build target/release/openphone)
#   BENCH_DIR         where the data directory goes (default target/)
# The callgrind file is kept in target/bench-results/allocs/.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

calls="${1:-${BENCH_CALLS:-200}}"
path="${2:-mcp-2025}"
depth="${ALLOC_DEPTH:-10}"
top="${ALLOC_TOP:-25}"
log() { printf '[allocs] %s\n' "$*" >&2; }
case "$calls" in
    '' | *[!0-9]* | 0) log "CALLS must be a positive whole number, not '$calls'"; exit 2 ;;
esac
case "$depth" in
    '' | *[!0-9]* | 0) log "ALLOC_DEPTH must be a positive whole number, not '$depth'"; exit 2 ;;
esac
case "$path" in
    mcp-2025 | mcp-2026 | ws-status | ws-screen) ;;
    *) log "unknown path '$path' (mcp-2025, mcp-2026, ws-status, ws-screen)"; exit 2 ;;
esac
callgrind_results "$root" allocs
openphone="$(release_binary "$root")"
with_workdir "$root" bench-allocs
token="$(bench_config "$work")"

log "starting the daemon under callgrind"
start_daemon 1200 valgrind --tool=callgrind \
    "--separate-callers${depth}=*__rust_alloc" "--separate-callers${depth}=*__rust_realloc" \
    --callgrind-out-file="$out/callgrind.out.%p" "$openphone"

case "$path" in
    mcp-2025 | mcp-2026)
        era=2025-11-25
        [ "$path" = mcp-2026 ] && era=2026-07-28
        args=(mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era "$era"
              --tool openphone_device_status --args '{"reason": "benchmark"}') ;;
    ws-status)
        args=(invoke --url "$ws_url" --token "$token" --tool openphone.device.status
              --params '{"reason": "benchmark"}') ;;
    ws-screen)
        args=(invoke --url "$ws_url" --token "$token" --tool openphone.screen.get
              --params '{"reason": "benchmark", "include_screenshot": false}') ;;
esac

log "$path: $calls calls × 2 connections"
"$openphone" bench "${args[@]}" --connections 2 --calls 1 --json >/dev/null 2>&1 || true
callgrind_control -z "$daemon_pid" >/dev/null
"$openphone" bench "${args[@]}" --connections 2 --calls "$calls" --timeout 120 --json \
    >"$out/$path.json" 2>"$out/$path.err" || { log "the load failed: see $out/$path.err"; exit 1; }
callgrind_control -d "$path" "$daemon_pid" >/dev/null
sleep 0.5
file="$(ls -t "$out"/callgrind.out."$daemon_pid"* | head -n1)"
ok="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$out/$path.json")"
[ "$ok" -gt 0 ] 2>/dev/null || { log "no call was answered: see $out/$path.err"; exit 1; }
echo
echo "$path, $ok calls answered (callgrind, the daemon's every thread; $file)"
echo
python3 "$here/alloc_chains.py" "$file" "$ok" "$top"
