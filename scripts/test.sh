#!/usr/bin/env bash
# The project's test command (the README's, and what .ci/run calls).
#
# On a fresh Debian 12 machine, as root, it brings what the tests need (system packages, the
# official E2B SDK peers, the lint tools), enforces the house rules (scripts/lint.sh: fmt,
# clippy, rustdoc, cargo-deny), builds the workspace once (plugins are cdylibs the tests load
# from target/debug) and runs every test with nextest. Tests that need real E2B credentials are
# ignored without E2B_API_KEY and run when it is set.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

"$root/scripts/setup.sh"
"$root/scripts/lint.sh"

cargo build --workspace --locked
if [ -n "${E2B_API_KEY:-}" ]; then
  cargo nextest run --workspace --locked --run-ignored all "$@"
else
  cargo nextest run --workspace --locked "$@"
fi
