#!/usr/bin/env bash
# What a call costs the kernel: bytes the daemon writes, write system calls and CPU time per
# answered call, read from /proc/PID/io and /proc/PID/stat around a fixed number of calls. The
# bytes and system calls are mostly the store's (log frames, the checkpointer's copies; one
# write per answer goes to the socket), which callgrind's instruction count does not see. See
# docs/benchmarks.md.
#
# Starts the daemon (`openphone serve`) in a fresh data directory and, for each path below,
# makes CALLS calls on each of 8 connections with `openphone bench` after one untimed call per
# connection:
#   ws-status   WebSocket tools.invoke openphone.device.status
#   mcp-2025    MCP tools/call openphone_device_status, era 2025-11-25
#   mcp-2026    MCP tools/call openphone_device_status, era 2026-07-28
# A second table splits each path's CPU time and context switches per call by thread
# (`bench/threads.py`: the tokio workers, the store's writer, syncer and checkpointer).
# Bytes per call depend a little on how many calls a batch carries (one commit writes each page
# it touched once), so on a busier machine they move a little; they do not move with the CPU's
# speed as calls per second do.
#
# Usage: bench/writes.sh [CALLS]
#   CALLS             calls per connection (default $BENCH_CALLS or 2000), 8 connections
#   OPENPHONE_BIN     the openphone binary to measure (default: build target/release/openphone)
#   BENCH_DIR         where the data directory goes (default target/, the repository's disk)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

calls="${1:-${BENCH_CALLS:-2000}}"
case "$calls" in
    '' | *[!0-9]* | 0) echo "[writes] CALLS must be a positive whole number, not '$calls'" >&2; exit 2 ;;
esac
log() { printf '[writes] %s\n' "$*" >&2; }
[ -r /proc/self/io ] || { log "/proc/PID/io is needed (Linux with task I/O accounting)"; exit 2; }

openphone="$(release_binary "$root")"
with_workdir "$root" bench-writes
token="$(bench_config "$work")"

start_daemon 300 "$openphone"
ticks="$(getconf CLK_TCK)"

# counters: "wchar syscw cpu-ticks" of the daemon now.
counters() {
    local io stat
    io="$(awk '/^wchar:/ {w=$2} /^syscw:/ {s=$2} END {print w, s}' "/proc/$daemon_pid/io")"
    # utime and stime are fields 14 and 15; the command name (field 2) has no spaces here.
    stat="$(awk '{print $14 + $15}' "/proc/$daemon_pid/stat")"
    echo "$io $stat"
}

rows=()
# measure NAME ARGS...: one untimed call per connection, then CALLS per connection, counted.
measure() {
    local name="$1"
    shift
    log "$name"
    "$openphone" bench "$@" --connections 8 --calls 1 --json >/dev/null 2>&1 || true
    local before after ok rate
    before="$(counters)"
    python3 "$here/threads.py" snap "$daemon_pid" >"$work/$name.threads-before"
    "$openphone" bench "$@" --connections 8 --calls "$calls" --timeout 120 --json \
        >"$work/$name.json" 2>"$work/$name.err" || true
    after="$(counters)"
    python3 "$here/threads.py" snap "$daemon_pid" >"$work/$name.threads-after"
    ok="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$work/$name.json" 2>/dev/null || echo 0)"
    rate="$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["calls_per_sec"]))' "$work/$name.json" 2>/dev/null || echo '—')"
    rows+=("$name $ok $rate $before $after")
    [ "$ok" -gt 0 ] || { log "$name: no call answered:"; cat "$work/$name.err" >&2; }
}

measure ws-status invoke --url "$ws_url" --token "$token" \
    --tool openphone.device.status --params '{"reason": "benchmark"}'
measure mcp-2025 mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era 2025-11-25 \
    --tool openphone_device_status --args '{"reason": "benchmark"}'
measure mcp-2026 mcp --url "$mcp_url" --token-file "$work/data/mcp.token" --era 2026-07-28 \
    --tool openphone_device_status --args '{"reason": "benchmark"}'

echo
echo "writes per call (daemon, /proc; $calls calls × 8 connections; data in $(df -P "$work" | awk 'NR==2 {print $1}'))"
echo
echo "| path | calls answered | calls/s | bytes written per call | write syscalls per call | CPU µs per call |"
echo "|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
    set -- $row
    if [ "$2" -gt 0 ] 2>/dev/null; then
        printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" \
            "$(( ($7 - $4) / $2 ))" \
            "$(awk -v a="$5" -v b="$8" -v n="$2" 'BEGIN {printf "%.2f", (b - a) / n}')" \
            "$(awk -v a="$6" -v b="$9" -v n="$2" -v t="$ticks" 'BEGIN {printf "%.0f", (b - a) * 1e6 / t / n}')"
    else
        printf '| %s | failed | — | — | — | — |\n' "$1"
    fi
done

echo
echo "CPU and context switches per call, by thread (/proc/PID/task)"
for row in "${rows[@]}"; do
    set -- $row
    if [ "$2" -gt 0 ] 2>/dev/null; then
        echo
        python3 "$here/threads.py" table "$work/$1.threads-before" "$work/$1.threads-after" "$2" "$1"
    fi
done
