#!/usr/bin/env bash
# How the durable floor falls as a server does more work per call (docs/benchmarks.md, "The
# floor with work"). `bench/run.sh` measures the floor of a server that does nothing but keep a
# durable record per call; this asks what a server reaches that also spends W µs of CPU per
# call (the null servers' `--work-us W`), for several W, beside the references of the targets
# in the same run:
#   - MCP 2025-11-25 and 2026-07-28, `tools/call`: the TypeScript SDK server (2025-11-25, the
#     era it speaks: the reference of both, as in bench/run.sh), the null MCP server, the
#     durable null MCP server with each W, and the daemon;
#   - WebSocket `tools.invoke openphone.device.status`: the null server, the durable null
#     server with each W, and the daemon.
# Each server's CPU per call is measured too (its /proc ticks over the calls it answered), so
# the daemon can be placed on the curve by what it spends. ROUNDS passes go over every point in
# turn (the machine's load drifts; each point's best pass is printed, and every pass is kept in
# the JSON).
#
# Usage: bench/floor-work.sh [SECONDS] [W ...]
#   SECONDS          measured seconds per point (default 5; 1 s of warm-up before each)
#   W ...            work per call in µs (default 0 5 10 20 40)
#   FLOOR_KIND       log (the default: a file written ahead, fdatasync) or sqlite (a row in a
#                    WAL-mode SQLite database, synchronous = FULL)
#   ROUNDS           passes over every point (default 2)
#   OPENPHONE_BIN    the openphone binary (its `bench` client, and the daemon measured);
#                    default: a release build
#   BENCH_DIR        where the records and the daemon's data go (default target/)
# Prints a table; the figures go to target/bench-results/floor-work.json.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
# shellcheck source=bench/daemon.sh
. "$here/daemon.sh"

log() { printf '[floor-work] %s\n' "$*" >&2; }

secs="${1:-5}"
[ $# -gt 0 ] && shift
works=("$@")
[ ${#works[@]} -eq 0 ] && works=(0 5 10 20 40)
case "$secs" in '' | *[!0-9]*) log "SECONDS must be a whole number, not '$secs'"; exit 2 ;; esac
for w in "${works[@]}"; do
    case "$w" in '' | *[!0-9]*) log "each W must be a whole number of µs, not '$w'"; exit 2 ;; esac
done
rounds="${ROUNDS:-2}"
case "$rounds" in '' | 0 | *[!0-9]*) log "ROUNDS must be a whole number above 0"; exit 2 ;; esac
kind="${FLOOR_KIND:-log}"
case "$kind" in
    log) floor_option=--durable-log ;;
    sqlite) floor_option=--durable-sqlite ;;
    *) log "FLOOR_KIND is log or sqlite, not '$kind'"; exit 2 ;;
esac

find_node "$root"
command -v python3 >/dev/null || { log "python3 is needed for the table"; exit 2; }

openphone="$(release_binary "$root")"
log "building (release): the null server, the TypeScript SDK server"
build_references "$root"

out="$root/target/bench-results"
mkdir -p "$out"
with_servers_workdir "$root" floor-work

token="$(bench_config "$work")"
# name → "url pid"
declare -A server
start() {
    local name="$1"
    shift
    "$@" >"$work/$name.log" 2>&1 &
    local pid=$!
    pids+=("$pid")
    server[$name]="$(listening "$work/$name.log" "$name" "$pid") $pid"
}

log "starting the servers ($kind floors with ${works[*]} µs of work per call)"
start null-ws "$null_server" --token "$token"
start null-mcp "$null_server" mcp --token "$token"
for w in "${works[@]}"; do
    start "floor-ws-$w" "$null_server" --token "$token" "$floor_option" "$work/ws-$w.records" --work-us "$w"
    start "floor-mcp-$w" "$null_server" mcp --token "$token" "$floor_option" "$work/mcp-$w.records" --work-us "$w"
done
# The TypeScript SDK server and the daemon after them: the null servers calibrate their work at
# start, best on a quiet machine (the other core busy slows the calibrating one).
"$node_bin" "$here/ts-sdk-server/server.mjs" >"$work/ts.log" 2>&1 &
ts_pid=$!
pids+=("$ts_pid")
server[ts]="$(listening "$work/ts.log" "the TypeScript SDK server" "$ts_pid") $ts_pid"
"$openphone" serve --data-dir "$work/data" --listen 127.0.0.1:0 --config "$work/openphone.toml" \
    >"$work/daemon.log" 2>&1 &
daemon_pid=$!
pids+=("$daemon_pid")
wait_endpoint "$work/data" "$work/daemon.log" 300 "$daemon_pid" || exit 2
server[daemon-ws]="$(endpoint_field "$work/data" url) $daemon_pid"
server[daemon-mcp]="$(endpoint_field "$work/data" mcp_url) $daemon_pid"
grep -h "work per call" "$work"/floor-*.log | sort -u | sed 's/^/[floor-work] /' >&2 || true

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
clk_tck="$(getconf CLK_TCK 2>/dev/null || echo 100)"
results="$work/results.jsonl"
: >"$results"

# point ROUND NAME SERVER-KEY ERA|ws: one measurement into results.jsonl.
point() {
    local round="$1" name="$2" key="$3" era="$4" url pid before after report
    read -r url pid <<<"${server[$key]}"
    local args=()
    if [ "$era" = ws ]; then
        args=(invoke --url "$url" --token "$token" --connections 8
            --tool openphone.device.status --params '{"reason": "benchmark"}')
    else
        args=(mcp --url "$url" --era "$era" --connections 8
            --tool openphone_device_status --args '{"reason": "benchmark"}')
        if [ "$key" = daemon-mcp ]; then
            args+=(--token-file "$work/data/mcp.token")
        elif [ "$key" != ts ]; then
            args+=(--token "$token")
        fi
    fi
    before="$(cpu_ticks "$pid")"
    report="$("$openphone" bench "${args[@]}" --duration "$secs" --warmup 1 --json 2>"$work/err")" || {
        log "$name failed:"; cat "$work/err" >&2; return 0; }
    after="$(cpu_ticks "$pid")"
    python3 - "$round" "$name" "$era" "$before" "$after" "$clk_tck" "$report" >>"$results" <<'PY'
import json, sys
round_, name, era, before, after, tck, report = sys.argv[1:8]
r = json.loads(report)
calls = r.get("calls") or 0
cpu_s = (int(after) - int(before)) / int(tck)
# The ticks also cover the 1-s warm-up, whose calls the report leaves out: spread them over
# the calls made in both (calls/s × (seconds + warm-up)).
seconds = r.get("seconds") or 0
warm = r.get("warmup_seconds") or 0
all_calls = calls * (seconds + warm) / seconds if seconds else 0
print(json.dumps({
    "round": int(round_), "name": name, "era": era,
    "calls_per_sec": r.get("calls_per_sec"), "p99_ms": r.get("p99_ms"),
    "errors": r.get("errors"), "ok": r.get("ok"), "calls": calls,
    "server_cpu_us_per_call": (cpu_s * 1e6 / all_calls) if all_calls else None,
}))
PY
}

for round in $(seq "$rounds"); do
    for era in 2025-11-25 2026-07-28; do
        log "round $round: MCP $era"
        # The TypeScript SDK server speaks the handshake era only: it is the reference of both
        # eras, as in bench/run.sh.
        [ "$era" = 2025-11-25 ] && point "$round" "ts" ts "$era"
        point "$round" "null" null-mcp "$era"
        for w in "${works[@]}"; do point "$round" "floor+$w" "floor-mcp-$w" "$era"; done
        point "$round" "daemon" daemon-mcp "$era"
    done
    log "round $round: WebSocket"
    point "$round" "null" null-ws ws
    for w in "${works[@]}"; do point "$round" "floor+$w" "floor-ws-$w" ws; done
    point "$round" "daemon" daemon-ws ws
done

python3 - "$results" "$out/floor-work.json" "$kind" <<'PY'
import json, sys
path, target, kind = sys.argv[1:4]
rows = [json.loads(line) for line in open(path) if line.strip()]
json.dump({"floor": kind, "passes": rows}, open(target, "w"), indent=2)

def best(era, name):
    runs = [r for r in rows if r["era"] == era and r["name"] == name and r["calls_per_sec"]]
    return max(runs, key=lambda r: r["calls_per_sec"]) if runs else None

names = []
for r in rows:
    if r["name"] not in names:
        names.append(r["name"])
for era, ref, target_ratio in (("2025-11-25", "ts", 3.0), ("2026-07-28", "ts", 3.0), ("ws", "null", 0.25)):
    title = f"MCP {era}" if era != "ws" else "WebSocket device.status"
    base = best("2025-11-25" if ref == "ts" else era, ref)
    print(f"\n{title} ({kind} floor; best of each point's passes; target {target_ratio:g}× {ref})\n")
    print(f"| server | calls/s | × {ref} | server CPU µs/call | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    if ref == "ts" and base:
        print(f'| ts (2025-11-25) | {base["calls_per_sec"]:,.0f} | 1.00 | {base["server_cpu_us_per_call"]:.0f} | {base["p99_ms"]:.2f} |')
    for name in names:
        if name == ref and ref == "ts":
            continue
        r = best(era, name)
        if not r:
            continue
        ratio = r["calls_per_sec"] / base["calls_per_sec"] if base else float("nan")
        mark = " ✓" if name != ref and ratio >= target_ratio else ""
        cpu = r["server_cpu_us_per_call"]
        cpu = f"{cpu:.0f}" if cpu is not None else "–"
        p99 = f'{r["p99_ms"]:.2f}' if r.get("p99_ms") is not None else "–"
        print(f'| {name} | {r["calls_per_sec"]:,.0f} | {ratio:.2f}{mark} | {cpu} | {p99} |')
print(f"\nevery pass: {target}")
PY
