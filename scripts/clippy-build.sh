# Sourced by scripts/test.sh and scripts/lint.sh: compile the workspace's own crates through
# clippy-driver with warnings denied, so one real build both lints and produces the artifacts the
# tests run (what `cargo clippy` does, minus a second, check-only pass over every dependency).
# Dependencies are compiled by plain rustc, as under `cargo clippy`. Artifacts built this way
# are fresh only for commands run with the same two variables (and, for scripts/test.sh's, the same
# clean-build settings it exports).
# With DSH_RUSTDOC_IN_BUILD=1 (scripts/test.sh) each crate is also documented by rustdoc, warnings
# denied, right after clippy-driver compiles it (scripts/clippy-and-rustdoc.sh).
if [ "${DSH_RUSTDOC_IN_BUILD:-0}" = 1 ]; then
  RUSTC_WORKSPACE_WRAPPER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/clippy-and-rustdoc.sh"
else
  RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
fi
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
