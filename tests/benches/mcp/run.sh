#!/usr/bin/env bash
# The `dsh mcp` benchmark (issue 10): the official MCP TypeScript SDK client drives, over stdio,
# a release-built `dsh mcp` and the peers as published on npm — @modelcontextprotocol/server-
# filesystem (read 1 KiB, write 1 KiB, edit, list 1,000 entries) and @wonderwhy-er/desktop-
# commander (start `true` and read its output; 100 MiB of output read to the end, with the peak
# RSS of `dsh mcp`) — then the same dsh scenario on a one-sandbox e2b-local composition, and the
# code runtime on both (issue 27: a binding call against a direct MCP call, cold start, an agent
# task tool by tool against one code_run; beside them the sandbox boundary's own round trip, by
# e2b-client's example boundary_round_trip); then
# world.mjs, the world-side operations (issue 25: grep over 1,000 files against `run grep -rn`,
# find_files and list_dir of 1,000 entries, e2b-local against local). Prints medians and ratios
# measured in the same run, and the verdicts against the issues' targets.
#
# Builds dsh and e2b-local in release, installs the pinned peers (tests/benches/mcp/package-lock.json,
# npm ci, install scripts off: no browser download, no install telemetry), starts its own
# e2b-local on ephemeral ports (needs root), runs bench.mjs, and stops the server.
#
# Usage: tests/benches/mcp/run.sh [--rounds N] [--batch K] [--bulk-runs R] [--bulk-mib M] [--quick]
#                           [--only toll|peers|code] [--json FILE]
#   --only LEG           bench.mjs runs one leg: toll (the per-call toll, issue 26: builds dsh and
#                        the local plugins only, no peers, no e2b-local, no world.mjs; about
#                        75 s), peers (against the npm peers, and e2b-local), code (issue 27)
#   DSH_BENCH_NO_E2B=1   skip the e2b-local leg (no root needed)
#   DSH_BENCH_DIR=DIR    where the local scratch files go (default $TMPDIR)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
bench="$root/tests/benches/mcp"
cd "$root"

for tool in node npm cargo; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench: '$tool' is required but not on PATH" >&2; exit 1; }
done

toll_only=
prev=
for arg in "$@"; do
  [ "$prev" = --only ] && [ "$arg" = toll ] && toll_only=1
  prev=$arg
done
if [ -n "$toll_only" ]; then
  echo "bench: building dsh (release)" >&2
  cargo build --release --quiet -p dsh-cli -p dsh-fs-local -p dsh-subprocess-local
else
  echo "bench: building dsh and e2b-local (release)" >&2
  cargo build --release --quiet -p dsh-cli -p dsh-fs-local -p dsh-subprocess-local \
  -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b -p e2b-local
  cargo build --release --quiet -p e2b-client --example boundary_round_trip
  export DSH_BENCH_BOUNDARY_BIN="$root/target/release/examples/boundary_round_trip"
fi

# The peers, pinned; reinstalled only when package.json / package-lock.json change.
stamp=$(sha256sum "$bench/package.json" "$bench/package-lock.json" | sha256sum | cut -d' ' -f1)
if [ -f "$bench/node_modules/.install-stamp" ] && [ "$(cat "$bench/node_modules/.install-stamp")" = "$stamp" ]; then
  echo "bench: peers up to date" >&2
else
  echo "bench: installing the peers (npm ci)" >&2
  (cd "$bench" && PUPPETEER_SKIP_DOWNLOAD=true npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  echo "$stamp" >"$bench/node_modules/.install-stamp"
fi

export DSH_BIN="$root/target/release/dsh"

if [ -n "$toll_only" ]; then
  (cd "$bench" && node bench.mjs "$@")
  exit
fi

if [ -n "${DSH_BENCH_NO_E2B:-}" ]; then
  (cd "$bench" && node bench.mjs "$@" && node world.mjs "$@")
  exit
fi

source scripts/e2b-local-server.sh
start_e2b_local dsh-bench-mcp-e2b
# The owner renews the sandbox's lease while dsh mcp runs, so the shipped manifest serves a run
# of any length.
export DSH_E2B_CONFIG="$root/config/e2b-local.yaml"
(cd "$bench" && node bench.mjs "$@" && node world.mjs "$@")
