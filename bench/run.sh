#!/usr/bin/env bash
# Re-measures the performance figures of issue 13 in one run, with the references measured in
# the same run so the ratios mean something on any machine (docs/benchmarks.md).
#
# It builds (release) and starts three servers on loopback ports:
#   - the daemon (`openphone serve`) in a fresh data directory, with a runtime `bench` and
#     `[limits] rate_per_sec`/`rate_burst` raised to 1000000 so the limiter is out of the way;
#   - the null server (bench/null-server): the WebSocket wire ceiling;
#   - the TypeScript MCP SDK server (bench/ts-sdk-server, `npm ci`): the typical MCP server;
# then runs `openphone bench` against each, and the in-process bridge, prints a table with
# the ratios and the targets, and stops everything (also on Ctrl-C or an error).
#
# Usage: bench/run.sh [SECONDS | --short]
#   SECONDS             measured seconds per benchmark (default $BENCH_SECS or 10)
#   --short             the CI set: 1 s measured after 1 s of warm-up each (about 30 s of
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
# The JSON report of every benchmark is kept in target/bench-results/.
#
# Needs: cargo, python3, node >= 18 and npm (the Node 24 that tests/conformance/install.sh
# puts in .cache/node24 is used when present). Reaches only crates.io and the npm registry
# (for the builds); all load stays on 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

if [ "${1:-}" = "--short" ]; then
    secs=1
    warmup="${BENCH_WARMUP:-1}"
else
    secs="${1:-${BENCH_SECS:-10}}"
    warmup="${BENCH_WARMUP:-2}"
fi
profile="${BENCH_PROFILE:-release}"
connections="${BENCH_CONNECTIONS:-8}"
concurrency="${BENCH_CONCURRENCY:-64}"
out="$root/target/bench-results"

log() { printf '[bench] %s\n' "$*" >&2; }

node_bin=node
if [ -x "$root/.cache/node24/shim/node" ]; then
    node_bin="$root/.cache/node24/shim/node"
fi
command -v "$node_bin" >/dev/null || { log "node is needed for the TypeScript SDK server"; exit 2; }
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
cargo build --release --locked --quiet --manifest-path bench/null-server/Cargo.toml
(cd bench/ts-sdk-server && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
null_server="$root/bench/null-server/target/release/openphone-null-server"

mkdir -p "$root/target"
work="$(mktemp -d "${BENCH_DIR:-$root/target}/bench-run.XXXXXX")"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until `file` holds a line `listening on URL`; prints URL.
listening() {
    local file="$1" what="$2" url=""
    for _ in $(seq 300); do
        url="$(sed -n 's/^listening on //p' "$file" 2>/dev/null | head -n1)"
        [ -n "$url" ] && { echo "$url"; return; }
        sleep 0.1
    done
    log "$what did not start:"; cat "$file" >&2; exit 2
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo null; }

token="bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat >"$work/openphone.toml" <<EOF
[[runtimes]]
id = "bench"
token = "$token"
grants = ["safe_read", "private_read", "dangerous"]

[limits]
rate_per_sec = 1000000.0
rate_burst = 1000000.0
EOF

log "starting the daemon, the null server and the TypeScript SDK server"
"$openphone" serve --data-dir "$work/data" --listen 127.0.0.1:0 --config "$work/openphone.toml" \
    >"$work/daemon.log" 2>&1 &
daemon_pid=$!
pids+=("$daemon_pid")
"$null_server" --token "$token" >"$work/null.log" 2>&1 &
null_pid=$!
pids+=("$null_pid")
"$node_bin" "$here/ts-sdk-server/server.mjs" >"$work/ts.log" 2>&1 &
ts_pid=$!
pids+=("$ts_pid")

for _ in $(seq 300); do
    [ -s "$work/data/endpoint.json" ] && break
    sleep 0.1
done
[ -s "$work/data/endpoint.json" ] || { log "the daemon did not start:"; cat "$work/daemon.log" >&2; exit 2; }
ws_url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$work/data/endpoint.json")"
mcp_url="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["mcp_url"])' "$work/data/endpoint.json")"
null_url="$(listening "$work/null.log" "the null server")"
ts_url="$(listening "$work/ts.log" "the TypeScript SDK server")"
sleep 1
idle_rss="$(rss_kib "$daemon_pid")"
db_size() { du -cb "$work/data"/openphone.db* 2>/dev/null | tail -n1 | cut -f1; }
db_before="$(db_size)"

rm -rf "$out"
mkdir -p "$out"
timed=(--duration "$secs" --warmup "$warmup" --json)

# Runs one benchmark, its JSON report into $out/NAME.json (stderr into NAME.err); a failed
# run is reported in the table, not fatal.
measure() {
    local name="$1"
    shift
    log "$name"
    "$openphone" bench "$@" "${timed[@]}" >"$out/$name.json" 2>"$out/$name.err" || true
}

status_args=(--tool openphone.device.status --params '{"reason": "benchmark"}')
screen_args=(--tool openphone.screen.get --params '{"reason": "benchmark", "include_screenshot": false}')
mcp_args=(--tool openphone_device_status --args '{"reason": "benchmark"}' --connections "$connections")

measure ws-status-daemon invoke --url "$ws_url" --token "$token" --pid "$daemon_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-status-null invoke --url "$null_url" --token "$token" --pid "$null_pid" \
    --connections "$connections" "${status_args[@]}"
measure ws-screen-daemon invoke --url "$ws_url" --token "$token" --pid "$daemon_pid" \
    --connections "$connections" "${screen_args[@]}"
measure mcp-2025-daemon mcp --url "$mcp_url" --token-file "$work/data/mcp.token" \
    --pid "$daemon_pid" --era 2025-11-25 "${mcp_args[@]}"
measure mcp-2026-daemon mcp --url "$mcp_url" --token-file "$work/data/mcp.token" \
    --pid "$daemon_pid" --era 2026-07-28 "${mcp_args[@]}"
measure mcp-2025-ts mcp --url "$ts_url" --pid "$ts_pid" --era 2025-11-25 "${mcp_args[@]}"
measure bridge-read bridge --op read --concurrency "$concurrency" --dir "$work"
measure bridge-mutation bridge --op mutation --concurrency "$concurrency" --dir "$work"

# Storage: what the daemon's database grew by, per call it served, once it has stopped (its
# shutdown checkpoints the write-ahead log).
kill -TERM "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
db_after="$(db_size)"

log "done; reports in $out"
BENCH_BINARY="$openphone" python3 - "$out" "$idle_rss" "$db_before" "$db_after" "$secs" "$warmup" <<'EOF'
import json, os, sys

out, idle_rss, db_before, db_after, secs, warmup = sys.argv[1:]

def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

r = {n: load(n) for n in ["ws-status-daemon", "ws-status-null", "ws-screen-daemon",
                          "mcp-2025-daemon", "mcp-2026-daemon", "mcp-2025-ts",
                          "bridge-read", "bridge-mutation"]}

def fig(name):
    x = r[name]
    if x is None:
        return f"failed (see {name}.err)"
    errs = sum(x["errors"].values())
    text = f"{x['calls_per_sec']:,.0f} calls/s, p50 {x['p50_ms']:.2f} ms, p99 {x['p99_ms']:.2f} ms"
    if errs:
        text += f", {errs} errors {x['errors']}"
    return text

def rate(name):
    x = r[name]
    return x["calls_per_sec"] if x else None

def ratio(a, b):
    ra, rb = rate(a), rate(b)
    if not ra or not rb:
        return None
    return ra / rb

def verdict(ok):
    return "—" if ok is None else ("met" if ok else "NOT met")

def p99(name):
    return r[name]["p99_ms"] if r[name] else None

rows = []
q = ratio("ws-status-daemon", "ws-status-null")
ok = None if q is None else (q >= 0.25 and p99("ws-status-daemon") <= 2.0)
rows.append(("WS tools.invoke device.status", fig("ws-status-daemon"),
             "null server: " + fig("ws-status-null"),
             "—" if q is None else f"{q:.1%} of null", "≥ 25 % of null, p99 ≤ 2 ms", verdict(ok)))
q = ratio("ws-screen-daemon", "ws-status-null")
s = rate("ws-screen-daemon")
rows.append(("WS tools.invoke screen.get", fig("ws-screen-daemon"),
             "null server (its device.status answer)",
             "—" if q is None else f"{q:.1%} of null", "≥ 10,000 calls/s",
             verdict(None if s is None else s >= 10000)))
for era in ["2025", "2026"]:
    name = f"mcp-{era}-daemon"
    q = ratio(name, "mcp-2025-ts")
    ok = None if q is None else (q >= 3.0 and p99(name) <= 5.0)
    label = "2025-11-25" if era == "2025" else "2026-07-28"
    ref = "TS SDK 2025-11-25: " + fig("mcp-2025-ts") if era == "2025" else \
          "TS SDK 2025-11-25 (the SDK has no 2026-07-28 era)"
    rows.append((f"MCP tools/call {label}", fig(name), ref,
                 "—" if q is None else f"{q:.2f}× TS", "≥ 3× TS, p99 ≤ 5 ms", verdict(ok)))
for name, label, target in [("bridge-read", "bridge reads (device.status)", 30000),
                            ("bridge-mutation", "bridge mutations (clipboard.set)", 5000)]:
    s = rate(name)
    rows.append((label, fig(name), "—", "—", f"≥ {target:,} calls/s",
                 verdict(None if s is None else s >= target)))

served = sum(r[n]["calls_issued"] for n in ["ws-status-daemon", "ws-screen-daemon",
                                             "mcp-2025-daemon", "mcp-2026-daemon"] if r[n])
try:
    grown = int(db_after) - int(db_before)
    per_call = grown / served if served else None
except ValueError:
    per_call = None
rows.append(("storage per endpoint call (mixed reads)",
             "—" if per_call is None else f"{per_call:,.0f} bytes ({served:,} calls)", "—", "—",
             "≤ 300 bytes per keyless read", verdict(None if per_call is None else per_call <= 300)))
try:
    rss = int(idle_rss)
    rows.append(("daemon idle RSS", f"{rss / 1024:.1f} MB", "—", "—", "≤ 15 MB",
                 verdict(rss / 1024 <= 15)))
except ValueError:
    pass

print()
print(f"openphone benchmarks: {secs} s measured after {warmup} s of warm-up each, "
      f"{os.cpu_count()} cores, client and servers on one machine, "
      f"binary {os.environ.get('BENCH_BINARY', '?')}")
print()
print("| path | openphone | reference (same run) | ratio | target | |")
print("|---|---|---|---|---|---|")
for row in rows:
    print("| " + " | ".join(row) + " |")
EOF
