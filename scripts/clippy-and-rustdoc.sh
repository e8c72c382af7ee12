#!/usr/bin/env bash
# RUSTC_WORKSPACE_WRAPPER of scripts/test.sh's build (scripts/clippy-build.sh with
# DSH_RUSTDOC_IN_BUILD=1): compiles a workspace crate through clippy-driver, as the plain wrapper
# does, then documents the same crate with rustdoc, warnings denied, against the dependencies this
# very build compiled.
#
# Why: `cargo doc --workspace --no-deps` compiles every dependency a second time, metadata-only
# (cargo's check mode), before documenting anything — 270 CPU-seconds of a CI run (measured on this
# 2-core machine: 231 s user, 40 s system) for what the build below already has. rustdoc reads
# the rlibs and rmeta files of this build as well as cargo doc's.
#
# What is documented is what `cargo doc --workspace --no-deps` documents among the targets the
# build compiles: libraries, and binaries with their private items (as cargo does for binaries);
# not tests, benches, examples or build scripts. Differences, all stricter: a binary named like its
# package's library, and a target marked `doc = false`, are documented too. The HTML goes to
# `<profile dir>/doc-check/` (read by nobody; the check is that rustdoc passes).
#
# Arguments: the rustc path, then rustc's arguments, as cargo passes them to a wrapper.
set -euo pipefail
rustc=$1
shift
# Cargo's queries (`-vV`, `--print`) compile no crate: nothing to document.
if [[ " $* " != *" --crate-name "* || " $* " == *" --print"* ]]; then
  exec "$(dirname "$rustc")/clippy-driver" "$rustc" "$@"
fi
"$(dirname "$rustc")/clippy-driver" "$rustc" "$@"

crate_name='' crate_type='' out_dir='' metadata='' test=false
doc_args=()
while [ $# -gt 0 ]; do
  arg=$1
  shift
  case "$arg" in
    --test) test=true ;;
    --crate-name) crate_name=$1; doc_args+=("$arg" "$1"); shift ;;
    --crate-type) crate_type=$1; doc_args+=("$arg" "$1"); shift ;;
    --out-dir) out_dir=$1; shift ;;
    # Options rustdoc takes as rustc does, with their values.
    --cfg | --check-cfg | -L | --extern | --cap-lints | --target | -W | -D | -A | -F | --warn | \
      --deny | --allow | --forbid | --force-warn)
      doc_args+=("$arg" "$1"); shift ;;
    -C)
      case "$1" in
        metadata=*) metadata=${1#metadata=}; doc_args+=("$arg" "$1") ;;
      esac
      shift ;;
    --edition=* | --error-format=* | --json=* | --diagnostic-width=* | --cap-lints=* | \
      --warn=* | --deny=* | --allow=* | --forbid=* | --force-warn=* | --target=*)
      doc_args+=("$arg") ;;
    --edition | --error-format | --json | --diagnostic-width)
      doc_args+=("$arg" "$1"); shift ;;
    # Codegen and output options: rustdoc generates no code.
    --emit=* | -Cmetadata=*) [[ $arg == -Cmetadata=* ]] && metadata=${arg#-Cmetadata=} ;;
    --emit | -o | -l) shift ;;
    -l*) ;;
    -C*) ;;
    -*)
      echo "clippy-and-rustdoc.sh: unexpected rustc option $arg for ${crate_name:-a crate}" \
        "(teach the script whether rustdoc takes it)" >&2
      exit 2 ;;
    *.rs) doc_args+=("$arg") ;;
    *)
      echo "clippy-and-rustdoc.sh: unexpected rustc argument $arg" >&2
      exit 2 ;;
  esac
done

# Only what cargo doc would document: a library or a binary, not a test harness, an example or a
# build script.
[ "$test" = false ] || exit 0
case "$crate_name" in build_script_*) exit 0 ;; esac
case "$out_dir" in */examples) exit 0 ;; esac
case "$crate_type" in
  lib | rlib | dylib | cdylib | staticlib | proc-macro) ;;
  # A binary target (cargo names it in CARGO_BIN_NAME; a test or bench without a harness has none).
  # With its private items, whose links to each other cargo does not warn about either.
  bin)
    [ -n "${CARGO_BIN_NAME:-}" ] || exit 0
    doc_args+=(--document-private-items -A rustdoc::private-intra-doc-links) ;;
  *) exit 0 ;;
esac

exec "$(dirname "$rustc")/rustdoc" "${doc_args[@]}" \
  -o "$(dirname "$out_dir")/doc-check/$crate_name-$metadata" \
  --crate-version "${CARGO_PKG_VERSION:?cargo sets it}" -D warnings
