#!/usr/bin/env bash
# The project's test command (the README's, and what .ci/run calls).
#
# On a fresh Debian 12 machine, as root, it brings what the tests need (system packages, the
# official E2B SDK peers, the lint tools), enforces the house rules (scripts/lint.sh: fmt,
# house-rules.py, clippy, rustdoc, cargo-deny) while it builds the workspace once (plugins are
# cdylibs the tests load from beside their executables, target/debug/deps; clippy and rustdoc run
# on each crate as the build compiles it, scripts/clippy-and-rustdoc.sh), runs every test with
# nextest (the fuzz corpus is replayed there), builds and tests the provider template, and fuzzes
# each decoder of hostile input for a bounded time (tests/fuzz/run.sh; DSH_FUZZ_SECONDS, default
# 20 per target, the targets side by side, 0 skips it). The provider template's build and the fuzz
# targets' instrumented build run while the tests do, at the lowest CPU priority: most tests wait
# on sandboxes and processes, so the builds take cores the tests leave idle.
# Tests that need real E2B credentials are ignored without E2B_API_KEY and run when it is set.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Built for one clean run (each a measured saving of work on this 2-core machine; Cargo.toml's dev
# profile keeps all three for local, incremental builds, and the caller's values win): no
# incremental data, which would only be written; no line tables for the workspace's own crates
# (242 instead of 269 CPU-seconds for them; a failing test still names its line, and nothing in
# the suite reads a backtrace); 16 codegen units instead of 256 (dsh-cli's binaries and tests from
# nothing: 336 CPU-seconds against 389; 329 with 4).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-false}
export CARGO_PROFILE_DEV_CODEGEN_UNITS=${CARGO_PROFILE_DEV_CODEGEN_UNITS:-16}

# Each phase says how long it took (CI's log shows where the time goes).
phase_start=$SECONDS
phase() {
  echo "test.sh: $1 took $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}

"$root/scripts/setup.sh" --without-peers
phase "setup"
# The SDK peers (npm, PyPI) download while the workspace builds; the tests wait for them.
peers_log=$(mktemp)
"$root/scripts/install-sdk-peers.sh" >"$peers_log" 2>&1 &
peers=$!

# Lint and build in one pass: every target of the workspace is compiled through clippy-driver
# (warnings denied), and the tests run those very artifacts (same environment below).
# rustdoc too, in the same pass (no second, metadata-only build of every dependency for it).
export DSH_RUSTDOC_IN_BUILD=1
source "$root/scripts/clippy-build.sh"
"$root/scripts/lint.sh" --clippy-by-build
phase "lint and build"
if ! wait "$peers"; then
  cat "$peers_log" >&2
  echo "test.sh: installing the SDK peers failed" >&2
  exit 1
fi
cat "$peers_log"
rm -f "$peers_log"
phase "waiting for the SDK peers"

# The provider template builds as written outside the workspace (its own workspace and lock, dsh
# by path) and passes the kit by manifest. It builds in a target directory of its own: sharing the
# workspace's would save little (its feature sets differ from the workspace's, so most of its
# dependencies are built again: ~95 CPU-seconds either way) and would have to wait for the tests,
# since a package with a cdylib keeps its artifacts under names without a hash, and the template's
# builds of the local plugins would replace the ones the tests load from target/debug/deps. The
# sandbox helper it links (dsh-supervisor, a release build nested in dsh-supervisor-client's build
# script) is the one the workspace build made, found in the directory both name.
template=(--offline --locked --manifest-path "$root/examples/provider-template/Cargo.toml")
template_env=(DSH_SUPERVISOR_TARGET_DIR="$root/target/supervisor" CARGO_TARGET_DIR="$root/target/template")
# Three targets side by side on two cores: 20 s each is about the CPU 15 s each one after
# another had, in a third of the wall time.
fuzz_seconds=${DSH_FUZZ_SECONDS:-20}

# While the tests run, niced so that the tests keep the CPU whenever they want it, side by side:
# the template's build then its kit test (which mostly waits: niced only with its session, below),
# and the fuzz targets' instrumented build, in its own target directory (no test waits on a cargo
# lock). The fuzz targets' own workspace crates go through the same wrapper (clippy and rustdoc,
# warnings denied).
background_builds() {
  set -e
  (
    nice -n 19 env "${template_env[@]}" cargo test --no-run "${template[@]}"
    env "${template_env[@]}" cargo test "${template[@]}"
  ) &
  local template_job=$! fuzz_ok=0
  if [ "$fuzz_seconds" -gt 0 ]; then nice -n 19 "$root/tests/fuzz/run.sh" 0 || fuzz_ok=$?; fi
  # Both are waited for, whichever failed, so that nothing of them outlives this function.
  wait "$template_job"
  return "$fuzz_ok"
}
host_state() { find /tmp -maxdepth 1 \( -name 'dsh-*' -o -name 'tpl-ctx-*' \) 2>/dev/null | sort || true; }
state_before=$(host_state)
builds_log=$(mktemp)
# Its own session, so that one kill ends it and every process it started. Where the scheduler
# groups each session's processes (autogroup, as on CI's machines), `nice` orders processes only
# within their session, and this session would get the CPU as much as the tests': the session
# itself is niced (its autogroup; written from inside, once it is the new session).
setsid bash -c "echo 19 >/proc/self/autogroup 2>/dev/null || true;
  $(declare -p root fuzz_seconds template template_env); $(declare -f background_builds);
  background_builds" >"$builds_log" 2>&1 &
builds=$!
# A failed test run ends the script; the builds end with it.
trap 'kill -- "-$builds" 2>/dev/null || true' EXIT

if [ -n "${E2B_API_KEY:-}" ]; then
  cargo nextest run --workspace --locked --run-ignored all "$@"
else
  cargo nextest run --workspace --locked "$@"
fi
phase "tests (building the test targets included)"

builds_ok=0
wait "$builds" || builds_ok=$?
trap - EXIT
cat "$builds_log"
rm -f "$builds_log"
if [ "$builds_ok" -ne 0 ]; then
  echo "test.sh: the provider template's build or kit test, or the fuzz targets' build, failed" >&2
  exit 1
fi
# What the tests' worlds keep on the host under /tmp (spill files, runner programs, build
# contexts) must go with them: anything new there once every test (the template's too) has
# ended is a leak, and fails the run. (It assumes no other test run shares this machine's /tmp
# meanwhile, as on CI.)
left=$(comm -13 <(echo "$state_before") <(host_state))
if [ -n "$left" ]; then
  echo "test.sh: the tests left this behind on the host:" >&2
  echo "$left" >&2
  exit 1
fi
phase "finishing the template's build and kit test and the fuzz targets' build"

if [ "$fuzz_seconds" -gt 0 ]; then
  "$root/tests/fuzz/run.sh" "$fuzz_seconds"
  phase "fuzzing"
fi
