#!/usr/bin/env bash
# The scripted agent episode (issue 26; tests/sdk-peers/python/mcp_peer/episode.py) on release
# builds: the official MCP Python SDK drives `dsh mcp` over stdio through a small Python task —
# create a package with a bug, grep, read, failing tests, edit, pyright's diagnostics, passing
# tests, a dev server in the background (its log, a fetch, stop), a Python REPL in a terminal —
# once on the local composition (in a fresh temporary directory) and once on a one-sandbox
# e2b-local composition, and prints for each the calls, the characters returned to the model and
# the wall time, in all and per step. The test build runs the same episode in CI
# (crates/cli/tests/it/episode.rs).
#
# Builds dsh, its plugins and e2b-local in release (the packages tests/benches/mcp/run.sh builds),
# installs the Python SDK peer (scripts/install-sdk-peers.sh python), starts its own e2b-local on
# ephemeral ports (needs root), and stops it at the end.
#
# Usage: tests/benches/mcp/episode.sh
#   DSH_BENCH_NO_E2B=1   only the local composition (no root needed)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
cd "$root"

echo "episode: building dsh and e2b-local (release)" >&2
cargo build --release --quiet -p dsh-cli -p dsh-fs-local -p dsh-subprocess-local \
  -p dsh-e2b-owner -p dsh-fs-e2b -p dsh-subprocess-e2b -p e2b-local
scripts/install-sdk-peers.sh python >&2

python="$root/tests/sdk-peers/python/.venv/bin/python"
episode="$root/tests/sdk-peers/python/mcp_peer/episode.py"

# Runs the episode against `dsh mcp ARGS…` in a fresh directory and prints its figures (its log of
# calls too when it fails).
run_episode() {
  local label=$1
  shift
  local dir log
  dir=$(mktemp -d)
  log="$dir.log"
  local argv
  argv=$("$python" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$root/target/release/dsh" mcp "$@")
  if ! (cd "$dir" && DSH_MCP_COMMAND="$argv" DSH_EPISODE_LABEL="$label" "$python" "$episode" >/dev/null 2>"$log"); then
    cat "$log" >&2
    rm -rf "$dir" "$log"
    echo "episode: the $label episode failed" >&2
    exit 1
  fi
  grep -E '^(episode \(|  )' "$log"
  rm -rf "$dir" "$log"
}

run_episode local
if [ -z "${DSH_BENCH_NO_E2B:-}" ]; then
  source scripts/e2b-local-server.sh
  start_e2b_local dsh-episode-e2b
  run_episode e2b-local --config "$root/config/e2b-local.yaml"
fi
