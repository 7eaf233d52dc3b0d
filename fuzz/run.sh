#!/usr/bin/env bash
# Runs one fuzz target with cargo fuzz (libFuzzer) for a number of seconds:
#
#   fuzz/run.sh TARGET SECONDS [LIBFUZZER_ARGS...]
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). The
# committed seeds (seeds/TARGET) and dictionary (dicts/TARGET.dict) are read; what the fuzzer learns goes to corpus/TARGET and
# crashing inputs to artifacts/TARGET (both ignored by git). Exit status: 0 when no crash was
# found. FUZZ_SANITIZER picks the sanitizer (default none: the code under test is safe Rust;
# `address` finds memory errors in dependencies at about half the speed). The fuzzer runs
# niced: the machine is shared.
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -lt 2 ]; then
  echo "usage: fuzz/run.sh TARGET SECONDS [LIBFUZZER_ARGS...]" >&2
  exit 2
fi
target=$1
seconds=$2
shift 2
if [ ! -f "fuzz_targets/$target.rs" ]; then
  echo "no fuzz target $target (see fuzz/fuzz_targets/)" >&2
  exit 2
fi
mkdir -p "corpus/$target" "artifacts/$target"
dict=()
if [ -f "dicts/$target.dict" ]; then dict=(-dict="dicts/$target.dict"); fi
exec nice -n 10 cargo +nightly fuzz run --features libfuzzer \
  --sanitizer "${FUZZ_SANITIZER:-none}" "$target" "corpus/$target" "seeds/$target" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="artifacts/$target/" -print_final_stats=1 "${dict[@]}" "$@"
