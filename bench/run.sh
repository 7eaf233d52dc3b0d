#!/usr/bin/env bash
# Re-measures the performance figures of issue 13 in one run, with the references measured in
# the same run so the ratios mean something on any machine (docs/benchmarks.md).
#
# It builds (release) and starts nine servers on loopback ports:
#   - the daemon (`openphone serve`) in a fresh data directory, with a runtime `bench` and
#     `[limits] rate_per_sec`/`rate_burst` raised to 1000000 so the limiter is out of the way;
#   - the null server (bench/null-server, mode `ws`): the WebSocket wire ceiling, answering
#     `device.status` and `screen.get` with the daemon's captured answers (bench/fixtures);
#   - the null MCP server (the same binary, mode `mcp`): the MCP wire ceiling, both eras;
#   - the same null servers with `--durable-log` (and the WebSocket one again `--pipelined`):
#     each tool call answered only once a record of it is fsynced into a file on the data
#     directory's disk, and with `--durable-sqlite`: the record a row committed into a SQLite
#     database in WAL mode with synchronous = FULL — the durable ceiling (the best of them),
#     what a server doing nothing but keeping a private read's promise reaches here;
#   - the TypeScript MCP SDK server (bench/ts-sdk-server, `npm ci`): the typical MCP server,
#     measured twice (the table takes the mean: it is the noisiest reference);
# then runs `openphone bench` against each, and the in-process bridge, probes the fsync time
# of the data directory's disk (mode `fsync`), prints a table with the ratios, the targets,
# each row's ceiling measured in the same run and the daemon's share of it, and stops
# everything (also on Ctrl-C or an error).
#
# Usage: bench/run.sh [SECONDS | --short]
#   SECONDS             measured seconds per benchmark (default $BENCH_SECS or 10)
#   --short             the CI set: 1 s measured after 1 s of warm-up each (about 50 s of
#                       load after the build); it prints the same table, and never fails on a
#                       target (a shared machine is too noisy for thresholds)
#   BENCH_WARMUP        warm-up seconds before each measurement (default 2; 1 with --short)
#   BENCH_PROFILE       the cargo profile openphone is built with (default release)
#   OPENPHONE_BIN       an openphone binary to measure instead of building one (e.g. an
#                       older build, to compare two in the same conditions)
#   BENCH_CONNECTIONS   WebSocket / HTTP connections (default 8)
#   BENCH_CONCURRENCY   bridge tasks (default 64)
#   BENCH_DIR           where the data directories go (default: target/, i.e. the disk the
#                       repository is on; a tmpfs would make every fsync free)
#   BENCH_FSYNC_SECS    seconds of each fsync probe (default 2; 1 with --short)
# The JSON report of every benchmark is kept in target/bench-results/, and the ceilings with
# the daemon's share of each in target/bench-results/ceilings.json.
#
# Needs: cargo, python3, node >= 18 and npm (the Node 24 that tests/conformance/install.sh
# puts in .cache/node24 is used when present). Reaches only crates.io and the npm registry
# (for the builds); all load stays on 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

if [ "${1:-}" = "--short" ]; then
    secs=1
    warmup="${BENCH_WARMUP:-1}"
    fsync_secs="${BENCH_FSYNC_SECS:-1}"
else
    secs="${1:-${BENCH_SECS:-10}}"
    warmup="${BENCH_WARMUP:-2}"
    fsync_secs="${BENCH_FSYNC_SECS:-2}"
fi
profile="${BENCH_PROFILE:-release}"
connections="${BENCH_CONNECTIONS:-8}"
concurrency="${BENCH_CONCURRENCY:-64}"
out="$root/target/bench-results"

log() { printf '[bench] %s\n' "$*" >&2; }

find_node "$root"
command -v python3 >/dev/null || { log "python3 is needed for the table"; exit 2; }

if [ -n "${OPENPHONE_BIN:-}" ]; then
    openphone="$OPENPHONE_BIN"
    log "measuring $openphone; building (release): the null server, the TypeScript SDK server"
else
    log "building ($profile): openphone; (release): the null server, the TypeScript SDK server"
    cargo build --profile "$profile" --locked --quiet -p openphone-cli
    case "$profile" in
        dev) openphone="$root/target/debug/openphone" ;;
        *) openphone="$root/target/$profile/openphone" ;;
    esac
fi
build_references "$root"

with_servers_workdir "$root" bench-run

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo null; }

token="$(bench_config "$work")"

log "starting the daemon, the null servers (WebSocket, MCP; plain and durable) and the TypeScript SDK server"
"$openphone" serve --data-dir "$work/data" --listen 127.0.0.1:0 --config "$work/openphone.toml" \
    >"$work/daemon.log" 2>&1 &
daemon_pid=$!
pids+=("$daemon_pid")
"$null_server" --token "$token" >"$work/null.log" 2>&1 &
null_pid=$!
pids+=("$null_pid")
"$null_server" mcp --token "$token" >"$work/null-mcp.log" 2>&1 &
null_mcp_pid=$!
pids+=("$null_mcp_pid")
# The durable ceilings: their records on the data directory's disk, one file each.
"$null_server" --token "$token" --durable-log "$work/durable-ws.records" >"$work/durable.log" 2>&1 &
durable_pid=$!
pids+=("$durable_pid")
"$null_server" --token "$token" --durable-log "$work/durable-ws-pipelined.records" --pipelined \
    >"$work/durable-pipelined.log" 2>&1 &
durable_pipelined_pid=$!
pids+=("$durable_pipelined_pid")
"$null_server" mcp --token "$token" --durable-log "$work/durable-mcp.records" \
    >"$work/durable-mcp.log" 2>&1 &
durable_mcp_pid=$!
pids+=("$durable_mcp_pid")
"$null_server" --token "$token" --durable-sqlite "$work/store-ws.db" >"$work/store.log" 2>&1 &
store_pid=$!
pids+=("$store_pid")
"$null_server" mcp --token "$token" --durable-sqlite "$work/store-mcp.db" \
    >"$work/store-mcp.log" 2>&1 &
store_mcp_pid=$!
pids+=("$store_mcp_pid")
"$node_bin" "$here/ts-sdk-server/server.mjs" >"$work/ts.log" 2>&1 &
ts_pid=$!
pids+=("$ts_pid")

wait_endpoint "$work/data" "$work/daemon.log" 300 "$daemon_pid" || exit 2
ws_url="$(endpoint_field "$work/data" url)"
mcp_url="$(endpoint_field "$work/data" mcp_url)"
null_url="$(listening "$work/null.log" "the null server" "$null_pid")"
null_mcp_url="$(listening "$work/null-mcp.log" "the null MCP server" "$null_mcp_pid")"
durable_url="$(listening "$work/durable.log" "the durable null server" "$durable_pid")"
durable_pipelined_url="$(listening "$work/durable-pipelined.log" "the pipelined durable null server" "$durable_pipelined_pid")"
durable_mcp_url="$(listening "$work/durable-mcp.log" "the durable null MCP server" "$durable_mcp_pid")"
store_url="$(listening "$work/store.log" "the SQLite-durable null server" "$store_pid")"
store_mcp_url="$(listening "$work/store-mcp.log" "the SQLite-durable null MCP server" "$store_mcp_pid")"
ts_url="$(listening "$work/ts.log" "the TypeScript SDK server" "$ts_pid")"
sleep 1
idle_rss="$(rss_kib "$daemon_pid")"
db_size() { du -cb "$work/data"/openphone.db* 2>/dev/null | tail -n1 | cut -f1; }
db_before="$(db_size)"

rm -rf "$out"
mkdir -p "$out"
timed=(--duration "$secs" --warmup "$warmup" --json)

# A process's CPU time (user + system) in clock ticks, or nothing.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || true; }
clk_tck="$(getconf CLK_TCK 2>/dev/null || echo 100)"

# Runs one benchmark, its JSON report into $out/NAME.json (stderr into NAME.err); a failed
# run is reported in the table, not fatal. The CPU seconds the client (the `openphone bench`
# process) and the server (its --pid) used during it go into NAME.cpu.json.
measure() {
    local name="$1" server="" before="" after="" client="" a
    shift
    local args=("$@")
    for ((a = 0; a < ${#args[@]} - 1; a++)); do
        [ "${args[a]}" = "--pid" ] && server="${args[a + 1]}"
    done
    log "$name"
    [ -n "$server" ] && before="$(cpu_ticks "$server")"
    client="$( { TIMEFORMAT='%U %S'; time "$openphone" bench "$@" "${timed[@]}" \
        >"$out/$name.json" 2>"$out/$name.err" || true; } 2>&1 )"
    [ -n "$server" ] && after="$(cpu_ticks "$server")"
    python3 - "$out/$name.cpu.json" "$client" "${before:-}" "${after:-}" "$clk_tck" <<'PY' || true
import json, sys
path, client, before, after, tck = sys.argv[1:6]
user, system = (float(x) for x in client.split()[-2:])
server = (int(after) - int(before)) / int(tck) if before and after else None
json.dump({"client_cpu_s": user + system, "server_cpu_s": server}, open(path, "w"))
PY
}

status_args=(--tool openphone.device.status --params '{"reason": "benchmark"}')
screen_args=(--tool openphone.screen.get --params '{"reason": "benchmark", "include_screenshot": false}')
mcp_args=(--tool openphone_device_status --args '{"reason": "benchmark"}' --connections "$connections")

measure ws-status-daemon invoke --url "$ws_url" --token "$token" --pid "$daemon_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-status-null invoke --url "$null_url" --token "$token" --pid "$null_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-status-durable invoke --url "$durable_url" --token "$token" --pid "$durable_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-status-durable-pipelined invoke --url "$durable_pipelined_url" --token "$token" \
    --pid "$durable_pipelined_pid" --connections "$connections" "${status_args[@]}"
measure ws-status-store invoke --url "$store_url" --token "$token" --pid "$store_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-screen-daemon invoke --url "$ws_url" --token "$token" --pid "$daemon_pid" \
    --connections "$connections" "${screen_args[@]}"
measure ws-screen-null invoke --url "$null_url" --token "$token" --pid "$null_pid" \
    --connections "$connections" "${screen_args[@]}"
measure mcp-2025-daemon mcp --url "$mcp_url" --token-file "$work/data/mcp.token" \
    --pid "$daemon_pid" --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2026-daemon mcp --url "$mcp_url" --token-file "$work/data/mcp.token" \
    --pid "$daemon_pid" --era 2026-07-28 "${mcp_args[@]}"
measure mcp-2025-ts mcp --url "$ts_url" --pid "$ts_pid" --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2025-null mcp --url "$null_mcp_url" --token "$token" --pid "$null_mcp_pid" \
    --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2026-null mcp --url "$null_mcp_url" --token "$token" --pid "$null_mcp_pid" \
    --era 2026-07-28 "${mcp_args[@]}"
measure mcp-2025-durable mcp --url "$durable_mcp_url" --token "$token" --pid "$durable_mcp_pid" \
    --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2026-durable mcp --url "$durable_mcp_url" --token "$token" --pid "$durable_mcp_pid" \
    --era 2026-07-28 "${mcp_args[@]}"
measure mcp-2025-store mcp --url "$store_mcp_url" --token "$token" --pid "$store_mcp_pid" \
    --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2026-store mcp --url "$store_mcp_url" --token "$token" --pid "$store_mcp_pid" \
    --era 2026-07-28 "${mcp_args[@]}"
# The TS SDK reference again: the table takes the mean of its two runs (the noisiest
# reference, CPU-bound, moves with the machine's load).
measure mcp-2025-ts-again mcp --url "$ts_url" --pid "$ts_pid" --era 2025-11-25 "${mcp_args[@]}"
# The disk's part of every durable call: WAL-like commits (3 frames + fsync) in the data
# directory's file system, one after the other; then again with every core kept awake, as
# during a benchmark (on an idle virtual CPU an fsync waits for a timer tick, ~4 ms here).
probe() {
    local name="$1"
    shift
    log "$name"
    "$null_server" fsync --dir "$work" --secs "$fsync_secs" "$@" >"$out/$name.json" \
        2>"$out/$name.err" || true
}
probe fsync
probe fsync-awake --awake "$(nproc 2>/dev/null || echo 2)"
measure bridge-read bridge --op read --concurrency "$concurrency" --dir "$work"
measure bridge-mutation bridge --op mutation --concurrency "$concurrency" --dir "$work"

# Storage: what the daemon's database grew by, per call it served, once it has stopped (its
# shutdown checkpoints the write-ahead log).
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
db_after="$(db_size)"

log "done; reports in $out"
# How the idle CPUs wait: on a virtual machine whose idle vCPUs halt at once (haltpoll with
# guest_halt_poll_ns 0), every wake-up is a VM exit, and the single-threaded TS SDK server pays
# that more than the daemon does (docs/benchmarks.md, "Twelfth round"): named in the heading.
idle_cpus() {
    local driver polling
    driver="$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null)" || return 0
    polling="$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null)" || polling=""
    if [ "$driver" = haltpoll ] && [ -n "$polling" ]; then
        echo "haltpoll, guest_halt_poll_ns $polling"
    else
        echo "$driver"
    fi
}
BENCH_IDLE="$(idle_cpus)" BENCH_BINARY="$openphone" BENCH_CONNECTIONS="$connections" \
    BENCH_CONCURRENCY="$concurrency" \
    python3 "$here/table.py" "$out" "$idle_rss" "$db_before" "$db_after" "$secs" "$warmup"
