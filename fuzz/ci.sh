#!/usr/bin/env bash
# The fuzzing smoke run for CI: the seed tests, then every fuzz target briefly; fails on a
# crash (or a seed that no longer means what its name says).
#
#   fuzz/ci.sh [SECONDS_PER_TARGET]      (default 15: four targets, one minute of fuzzing)
#
# With a nightly toolchain it runs cargo fuzz (libFuzzer, coverage-guided; cargo-fuzz is
# installed from crates.io when missing). Without one it falls back to `fuzz-stable`, a
# coverage-blind mutation loop over the same targets and seeds on the stable compiler.
# FUZZ_ENGINE=libfuzzer or FUZZ_ENGINE=stable forces one. Building comes first and is not
# counted in the time above. See docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TERM_COLOR=never
per_target=${1:-15}
targets=(endpoint_request canonical_params manifest_load scenario_load)

echo "== fuzz: format and lint (the package is outside the main workspace)"
cargo fmt --check
nice -n 10 cargo clippy --locked --all-targets --features stable -- -D warnings

echo "== fuzz: seed tests"
nice -n 10 cargo test --locked --release

have_nightly() {
  command -v rustup >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1
}

engine=${FUZZ_ENGINE:-auto}
if [ "$engine" = auto ]; then
  if have_nightly; then engine=libfuzzer; else engine=stable; fi
fi

failed=()
if [ "$engine" = libfuzzer ]; then
  if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== fuzz: installing cargo-fuzz"
    nice -n 10 cargo install cargo-fuzz --locked
  fi
  echo "== fuzz: building the targets (cargo +nightly fuzz build)"
  nice -n 10 cargo +nightly fuzz build --features libfuzzer --sanitizer "${FUZZ_SANITIZER:-none}"
  mkdir -p artifacts
  for target in "${targets[@]}"; do
    echo "== fuzz: $target for ${per_target}s (libFuzzer)"
    log="artifacts/$target.log"
    status=0
    ./run.sh "$target" "$per_target" >"$log" 2>&1 || status=$?
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' "$log" || true
    if [ "$status" -ne 0 ]; then
      tail -n 60 "$log"
      failed+=("$target")
    fi
  done
else
  echo "== fuzz: stable mutation loop (no nightly toolchain, or FUZZ_ENGINE=stable)"
  nice -n 10 cargo build --locked --release --features stable --bin fuzz-stable
  for target in "${targets[@]}"; do
    echo "== fuzz: $target for ${per_target}s (fuzz-stable)"
    nice -n 10 target/release/fuzz-stable "$target" "$per_target" "seeds/$target" || failed+=("$target")
  done
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: crash in ${failed[*]}; the inputs are in fuzz/artifacts/" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, 0 crashes"
