# Shared by bench/run.sh, bench/instructions.sh, bench/profile.sh and bench/writes.sh (sourced,
# not run): the daemon's benchmark configuration, starting it and waiting for it.

# bench_config DIR: writes DIR/openphone.toml — a runtime `bench` with a fresh token and every
# grant, the rate limiter raised out of the way — and prints the token.
bench_config() {
    local token
    token="bench-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    cat >"$1/openphone.toml" <<CONF
[[runtimes]]
id = "bench"
token = "$token"
grants = ["safe_read", "private_read", "dangerous"]

[limits]
rate_per_sec = 1000000.0
rate_burst = 1000000.0
CONF
    echo "$token"
}

# wait_endpoint DATA_DIR LOG TENTHS [PID]: waits up to TENTHS × 0.1 s for
# DATA_DIR/endpoint.json (at once no longer when the process PID has ended); prints LOG and
# fails when it does not appear.
wait_endpoint() {
    for _ in $(seq "$3"); do
        [ -s "$1/endpoint.json" ] && return 0
        if [ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "the daemon did not start:" >&2
    cat "$2" >&2
    return 2
}

# start_daemon TENTHS COMMAND...: starts `COMMAND... serve` (the openphone binary, or a wrapper
# and its arguments before it, as valgrind) on `work`/data with the configuration bench_config
# wrote to `work`, waits up to TENTHS × 0.1 s for it and sets daemon_pid, ws_url and mcp_url;
# exits the script when it does not start.
start_daemon() {
    local tenths="$1"
    shift
    "$@" serve --data-dir "$work/data" --listen 127.0.0.1:0 --config "$work/openphone.toml" \
        >"$work/daemon.log" 2>&1 &
    daemon_pid=$!
    wait_endpoint "$work/data" "$work/daemon.log" "$tenths" "$daemon_pid" || exit 2
    ws_url="$(endpoint_field "$work/data" url)"
    mcp_url="$(endpoint_field "$work/data" mcp_url)"
}

# endpoint_field DATA_DIR NAME: one member of DATA_DIR/endpoint.json (url, mcp_url, …).
endpoint_field() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/endpoint.json" "$2"
}

# release_binary ROOT: $OPENPHONE_BIN, else a release build of openphone (built now); printed.
release_binary() {
    if [ -n "${OPENPHONE_BIN:-}" ]; then
        echo "$OPENPHONE_BIN"
        return
    fi
    echo "building (release): openphone" >&2
    cargo build --release --locked --quiet -p openphone-cli >&2
    echo "$1/target/release/openphone"
}

# callgrind_results ROOT NAME: checks that valgrind's callgrind tools are installed (else exits
# 2, saying so), then sets `out` to ROOT/target/bench-results/NAME, made if missing. Several runs
# may share it: each reads only its own daemon's files, and callgrind files of runs older than
# two hours go.
callgrind_results() {
    command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
    command -v callgrind_control >/dev/null || { echo "callgrind_control is needed (valgrind)" >&2; exit 2; }
    out="$1/target/bench-results/$2"
    mkdir -p "$out"
    find "$out" -name 'callgrind.out.*' -mmin +120 -delete 2>/dev/null || true
}

# with_workdir ROOT NAME: makes the directory `work` under $BENCH_DIR (default ROOT/target);
# at exit the daemon `daemon_pid` (when set) is stopped and `work` removed.
with_workdir() {
    mkdir -p "$1/target"
    work="$(mktemp -d "${BENCH_DIR:-$1/target}/$2.XXXXXX")"
    daemon_pid=""
    trap 'if [ -n "$daemon_pid" ]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM
}

# with_servers_workdir ROOT NAME: makes the directory `work` under $BENCH_DIR (default
# ROOT/target) and the array `pids`; at exit every process in `pids` is stopped and `work`
# removed. For the scripts that start several servers (run.sh, floor-work.sh).
with_servers_workdir() {
    mkdir -p "$1/target"
    work="$(mktemp -d "${BENCH_DIR:-$1/target}/$2.XXXXXX")"
    pids=()
    trap stop_servers EXIT
    trap 'exit 130' INT TERM
}

stop_servers() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}

# listening FILE WHAT [PID]: waits up to 30 s until FILE holds a line `listening on URL` (what
# the null servers and the TypeScript SDK server print) and prints URL; else — or at once when
# the process PID has ended — prints FILE and fails.
listening() {
    local file="$1" what="$2" pid="${3:-}" url=""
    for _ in $(seq 300); do
        url="$(sed -n 's/^listening on //p' "$file" 2>/dev/null | head -n1)"
        [ -n "$url" ] && { echo "$url"; return; }
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
        sleep 0.1
    done
    echo "$what did not start:" >&2
    cat "$file" >&2
    exit 2
}

# find_node ROOT: sets `node_bin` to the Node 24 of tests/conformance/install.sh
# (ROOT/.cache/node24) when installed, else `node`; fails when there is none.
find_node() {
    node_bin=node
    if [ -x "$1/.cache/node24/shim/node" ]; then
        node_bin="$1/.cache/node24/shim/node"
    fi
    command -v "$node_bin" >/dev/null || { echo "node is needed for the TypeScript SDK server" >&2; exit 2; }
}

# build_references ROOT: builds the null server (release) and installs the TypeScript SDK
# server's packages; sets `null_server` to the null server's binary.
build_references() {
    cargo build --release --locked --quiet --manifest-path "$1/bench/null-server/Cargo.toml"
    (cd "$1/bench/ts-sdk-server" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    null_server="$1/bench/null-server/target/release/openphone-null-server"
}
