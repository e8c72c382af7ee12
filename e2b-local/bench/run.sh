#!/usr/bin/env bash
# e2b-local benchmark: starts a release-built e2b-local on ephemeral ports, then drives it with
# the official JS and Python SDKs (tests/sdk-peers/*/bench): create -> first command latency, `true`
# round trip, and N concurrent sandboxes each running commands. Prints one JSON line per SDK.
# Needs root and the SDK peers (scripts/install-sdk-peers.sh).
# Usage: e2b-local/bench/run.sh [iterations=10] [concurrent=20] [commands each=5]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo build --release -p e2b-local --quiet
source scripts/e2b-local-server.sh
start_e2b_local e2b-local-bench
(cd tests/sdk-peers/js && node bench/bench.mjs "$@")
tests/sdk-peers/python/.venv/bin/python tests/sdk-peers/python/bench/bench.py "$@"
