#!/usr/bin/env bash
# Where a call's CPU time goes: samples the daemon with `perf record` while `openphone bench`
# loads one path, then prints the top functions by their own time and the project's functions
# by inclusive time, and keeps the folded stacks (one line per stack: `a;b;c COUNT`, the input
# of any flame-graph renderer such as inferno-flamegraph or flamegraph.pl). See
# docs/benchmarks.md ("Profiles").
#
# Usage: bench/profile.sh [PATH] [SECONDS]
#   PATH            ws-status (default) | ws-screen | mcp-2025 | mcp-2026
#   SECONDS         sampled seconds (default 8), after 2 s of warm-up load
#   OPENPHONE_BIN   the openphone binary to profile (default: build target/release/openphone)
#   BENCH_DIR       where the data directory goes (default target/)
# Output: target/bench-results/profile-PATH.{folded,txt}
#
# Needs perf (Debian's linux-perf). Where the machine has no hardware counters (a VM), perf
# samples on the cpu-clock timer, which is what this uses: the percentages are of CPU time.
# The daemon's release build has its symbol table; stacks are unwound from DWARF call frames.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

path="${1:-ws-status}"
secs="${2:-8}"
log() { printf '[profile] %s\n' "$*" >&2; }
case "$path" in
    ws-status | ws-screen | mcp-2025 | mcp-2026) ;;
    *) log "unknown path '$path' (ws-status, ws-screen, mcp-2025, mcp-2026)"; exit 2 ;;
esac
case "$secs" in
    '' | *[!0-9]*) log "SECONDS must be a whole number, not '$secs'"; exit 2 ;;
esac
command -v perf >/dev/null || { log "perf is needed (apt-get install linux-perf)"; exit 2; }
command -v python3 >/dev/null || { log "python3 is needed to fold the stacks"; exit 2; }

openphone="$(release_binary "$root")"
out="$root/target/bench-results"
mkdir -p "$out"
with_workdir "$root" bench-profile

token="$(bench_config "$work")"

start_daemon 300 "$openphone"

mcp_load() {
    "$openphone" bench mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era "$1" \
        --duration "$2" --tool openphone_device_status --args '{"reason": "benchmark"}'
}
load() {
    local seconds="$1"
    case "$path" in
        ws-status) "$openphone" bench invoke --url "$ws_url" --token "$token" --duration "$seconds" \
            --tool openphone.device.status --params '{"reason": "benchmark"}' ;;
        ws-screen) "$openphone" bench invoke --url "$ws_url" --token "$token" --duration "$seconds" \
            --tool openphone.screen.get --params '{"reason": "benchmark", "include_screenshot": false}' ;;
        mcp-2025) mcp_load 2025-11-25 "$seconds" ;;
        mcp-2026) mcp_load 2026-07-28 "$seconds" ;;
    esac
}

log "warming up ($path, 2 s)"
load 1 >/dev/null
log "sampling the daemon for $secs s under load"
perf record -F 999 --call-graph dwarf,32768 -o "$work/perf.data" -p "$daemon_pid" -- sleep "$secs" \
    >"$work/perf.log" 2>&1 &
perf_pid=$!
load "$secs" | tail -n 3 >&2
wait "$perf_pid" || { log "perf record failed:"; cat "$work/perf.log" >&2; exit 2; }

log "folding the stacks"
perf script -i "$work/perf.data" 2>/dev/null | python3 "$here/fold_stacks.py" \
    "$out/profile-$path.folded" | tee "$out/profile-$path.txt"
log "folded stacks in $out/profile-$path.folded"
