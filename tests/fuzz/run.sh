#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer's coverage instrumentation and runs each for a bounded
# time, starting from (and adding to) its corpus. See tests/fuzz/README.md.
#
#   tests/fuzz/run.sh [SECONDS] [TARGET…]   default: 20 s each, every target; 0: build only
#
# Stable toolchain, no cargo-fuzz: the instrumentation is LLVM's SanitizerCoverage through
# stable `-C` flags (no `-Z sanitizer`, so no AddressSanitizer: a Rust panic, an abort, a
# timeout or running out of memory is what counts as a crash). Its own target directory keeps
# the instrumented build from invalidating the workspace's; the `fuzz` profile (Cargo.toml:
# opt-level 1, no debug info) and dsh-fuzz's few dependencies (the decoders' own small crates)
# keep that build cheap enough for CI. scripts/test.sh builds with 0 while the tests run, then
# fuzzes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(manifest rest_body connect_request)

export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
target_dir="$root/target/fuzz"
bins=()
for target in "${targets[@]}"; do bins+=(--bin "$target"); done
cargo build --locked --profile fuzz -p dsh-fuzz --features libfuzzer "${bins[@]}" \
  --target-dir "$target_dir" --target x86_64-unknown-linux-gnu
[ "$seconds" -gt 0 ] || exit 0

# One target's bounded run; a non-zero status means it found a crash.
fuzz_one() {
  local target=$1
  local corpus="$root/tests/fuzz/corpus/$target"
  local work="$target_dir/corpus/$target"
  local artifacts="$target_dir/artifacts/$target/"
  mkdir -p "$work" "$artifacts"
  # New inputs go to target/fuzz (not the repository); -max_len bounds one input, -rss_limit_mb
  # and -timeout turn a runaway into a crash. A non-zero exit status means a crash was found.
  "$target_dir/x86_64-unknown-linux-gnu/fuzz/$target" "$work" "$corpus" \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$artifacts" -print_final_stats=1 >"$target_dir/$target.log" 2>&1
}

# The targets run side by side, each for its own SECONDS (libFuzzer runs one process on one core):
# the wall time is one target's, not the sum.
echo "tests/fuzz/run.sh: ${targets[*]} for ${seconds} s each, side by side"
pids=()
for target in "${targets[@]}"; do
  fuzz_one "$target" &
  pids+=($!)
done
crashed=0
for index in "${!targets[@]}"; do
  target=${targets[$index]}
  status=0
  wait "${pids[$index]}" || status=$?
  log="$target_dir/$target.log"
  echo "tests/fuzz/run.sh: $target"
  grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs)|^stat::number_of_executed_units|^stat::peak_rss_mb' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "tests/fuzz/run.sh: $target found a crash (exit $status); inputs in $target_dir/artifacts/$target/" >&2
    crashed=1
  fi
done
exit "$crashed"
