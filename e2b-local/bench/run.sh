#!/usr/bin/env bash
# e2b-local benchmark: starts a release-built e2b-local on ephemeral ports, then drives it with
# the official JS and Python SDKs (sdk-peers/*/bench): create -> first command latency, `true`
# round trip, and N concurrent sandboxes each running commands. Prints one JSON line per SDK.
# Needs root and the SDK peers (scripts/install-sdk-peers.sh).
# Usage: e2b-local/bench/run.sh [iterations=10] [concurrent=20] [commands each=5]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo build --release -p e2b-local --quiet
state=$(mktemp -d /var/tmp/e2b-local-bench.XXXXXX)
out=$(mktemp)
target/release/e2b-local serve --api-port 0 --envd-port 0 --state-dir "$state" >"$out" 2>"$state.log" &
server=$!
cleanup() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf "$state" "$state.log" "$out"
}
trap cleanup EXIT
for _ in $(seq 1 100); do grep -q '^# e2b-local ready' "$out" && break; sleep 0.1; done
grep -q '^# e2b-local ready' "$out" || { cat "$state.log" >&2; echo "bench: server did not start" >&2; exit 1; }
eval "$(grep '^export ' "$out")"
(cd sdk-peers/js && node bench/bench.mjs "$@")
sdk-peers/python/.venv/bin/python sdk-peers/python/bench/bench.py "$@"
