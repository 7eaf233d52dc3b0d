#!/usr/bin/env bash
# Builds `openphone` with its start-up code laid out side by side (docs/building.md, "Memory
# at idle"): the kernel maps a binary's code 64 KiB around every page it faults in, so the
# ~4.5 MB of functions the daemon runs at start-up and per call, scattered over a 36 MB text
# segment, kept ~21–24 MB of it resident; grouped, ~5 MB.
#
#   bash scripts/ordered-build.sh [PROFILE]      # PROFILE: dist (default) or release
#
# 1. builds the profile as usual;
# 2. runs that build's `openphone serve` (simulated phone, fresh data directory) under
#    valgrind's callgrind through start-up, 200 WebSocket calls and shutdown, and writes the
#    functions it ran, by their linker symbols, to target/PROFILE/openphone.link-order;
# 3. builds again with OPENPHONE_LINK_ORDER naming that file (crates/cli/build.rs hands it to
#    the linker); only the last link step reruns, with the same symbols.
#
# Needs valgrind, python3 and nm (binutils). OPENPHONE_LINK_RELR=1 in the environment adds
# packed relocations to both builds (glibc 2.36 or later at run time; see build.rs).
set -euo pipefail

profile="${1:-dist}"
case "$profile" in
dist | release) ;;
*)
    echo "usage: bash scripts/ordered-build.sh [dist|release]" >&2
    exit 2
    ;;
esac
for tool in valgrind python3 nm cargo; do
    command -v "$tool" >/dev/null || {
        echo "ordered-build: $tool is needed and not installed" >&2
        exit 1
    }
done
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# The benchmark config and waiting for the daemon, shared with bench/.
# shellcheck source=bench/daemon.sh
. "$root/bench/daemon.sh"
target="${CARGO_TARGET_DIR:-$root/target}"
binary="$target/$profile/openphone"
order="$target/$profile/openphone.link-order"

echo "ordered-build: 1/3 cargo build --profile $profile" >&2
# Without packed relocations (valgrind 3.19 cannot name the functions of a binary linked with
# them: "ob=???"); they change no symbol, so step 3 adds them when asked.
env -u OPENPHONE_LINK_ORDER -u OPENPHONE_LINK_RELR cargo build --locked --profile "$profile" -p openphone-cli
profiled="$(mktemp -d)"
trap 'rm -rf "$profiled"' EXIT
cp "$binary" "$profiled/openphone"

echo "ordered-build: 2/3 profiling start-up and calls under callgrind (about a minute)" >&2
token="$(bench_config "$profiled")"
valgrind --tool=callgrind --demangle=no --dump-instr=yes \
    --callgrind-out-file="$profiled/callgrind.out" \
    "$profiled/openphone" serve --data-dir "$profiled/data" --listen 127.0.0.1:0 \
    --config "$profiled/openphone.toml" >"$profiled/serve.log" 2>&1 &
daemon=$!
wait_endpoint "$profiled/data" "$profiled/serve.log" 1500 "$daemon" || exit 1
url="$(endpoint_field "$profiled/data" url)"
sleep 3
for tool in openphone.device.status openphone.screen.get; do
    "$profiled/openphone" bench invoke --url "$url" --token "$token" --connections 2 \
        --calls 50 --tool "$tool" --params '{"reason": "profile"}' --json >/dev/null
done
sleep 2
kill -INT "$daemon"
wait "$daemon" || true

python3 - "$profiled/callgrind.out" "$profiled/openphone" "$order" <<'EOF'
"""The binary's function symbols that callgrind saw run, in address order."""
import bisect, re, subprocess, sys

callgrind, binary, out = sys.argv[1:]
objects, current, last, addresses = {}, None, 0, set()
for line in open(callgrind, encoding="utf-8", errors="replace"):
    # Without its newline: a bare `ob=(7)` must not read as naming object 7 "".
    line = line.rstrip("\n")
    if line.startswith(("ob=", "cob=")):
        m = re.match(r"c?ob=\((\d+)\)(?:\s+(.*))?", line)
        if m.group(2) is not None:
            objects[m.group(1)] = m.group(2).strip()
        if line.startswith("ob="):
            current = objects.get(m.group(1))
        continue
    if not line or line[0] not in "+-*0123456789":
        continue
    token = line.split()[0]
    if token.startswith("0x"):
        last = int(token, 16)
    elif token[0] == "+":
        last += int(token[1:])
    elif token[0] == "-":
        last -= int(token[1:])
    elif token != "*":
        last = int(token)
    if current == binary:
        addresses.add(last)
symbols = []
nm = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True,
                    check=True)
for row in nm.stdout.splitlines():
    fields = row.split()
    if len(fields) == 4 and fields[2] in "tTwW":
        symbols.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
symbols.sort()
starts = [s[0] for s in symbols]
ran, size = {}, 0
for address in sorted(addresses):
    i = bisect.bisect_right(starts, address) - 1
    if i >= 0 and symbols[i][0] <= address < symbols[i][0] + max(symbols[i][1], 1):
        if symbols[i][2] not in ran:
            ran[symbols[i][2]] = True
            size += symbols[i][1]
if not ran:
    sys.exit("ordered-build: callgrind saw no function of the binary run")
with open(out, "w", encoding="utf-8") as f:
    f.writelines(name + "\n" for name in ran)
total = sum(s[1] for s in symbols)
print(f"ordered-build: {len(ran)} functions ran, {size / 1e6:.1f} MB of {total / 1e6:.1f} MB "
      f"of code; order in {out}", file=sys.stderr)
EOF

echo "ordered-build: 3/3 cargo build --profile $profile with OPENPHONE_LINK_ORDER" >&2
OPENPHONE_LINK_ORDER="$order" cargo build --locked --profile "$profile" -p openphone-cli
matched="$(nm --defined-only "$binary" | awk '{print $3}' | sort -u |
    comm -12 - <(sort -u "$order") | wc -l)"
echo "ordered-build: $binary: $matched of $(wc -l <"$order") ordered symbols found" \
    "(all of them, unless the sources changed between the two builds)" >&2
