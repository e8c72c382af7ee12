#!/usr/bin/env python3
"""CONTRIBUTING.md's rules that no compiler checks, over every workspace member.

Reads `cargo metadata --no-deps --format-version 1` on stdin; prints each broken rule with the
files that break it and exits 1 (0 when all hold). scripts/lint.sh runs it.

  forbid-unsafe   a package whose sources hold no `unsafe` says `#![forbid(unsafe_code)]` at the
                  root of each of its library and binary targets
  tests/it        a package's integration tests are one binary, `tests/it/main.rs`
  workspace deps  every dependency comes from `[workspace.dependencies]` (`workspace = true`)
"""

import json
import os
import re
import sys
import tomllib

FORBID = re.compile(r"^\s*#!\[forbid\(unsafe_code\)\]", re.MULTILINE)
# `unsafe` as code: a block, fn, impl, trait or attribute (`#[unsafe(no_mangle)]`), not in a
# comment (comments are stripped first) nor part of a longer word (`unsafe_code`).
UNSAFE = re.compile(r"\bunsafe\b")
LINE_COMMENT = re.compile(r"//.*")
DEPENDENCY_TABLES = ("dependencies", "dev-dependencies", "build-dependencies")


def rust_files(directory):
    for parent, _, files in os.walk(directory):
        for name in files:
            if name.endswith(".rs"):
                yield os.path.join(parent, name)


def has_unsafe(path):
    with open(path, encoding="utf-8") as file:
        return bool(UNSAFE.search(LINE_COMMENT.sub("", file.read())))


def forbid_unsafe(package, root):
    """Roots of lib/bin targets that lack the forbid in a package without unsafe code."""
    targets = [t for t in package["targets"] if set(t["kind"]) & {"lib", "cdylib", "rlib", "bin"}]
    sources = {path for t in targets for path in rust_files(os.path.dirname(t["src_path"]))}
    if any(has_unsafe(path) for path in sources):
        return []
    missing = []
    for target in targets:
        with open(target["src_path"], encoding="utf-8") as file:
            if not FORBID.search(file.read()):
                missing.append(os.path.relpath(target["src_path"], root))
    return missing


def tests_layout(package, root):
    """Integration test targets other than tests/it/main.rs."""
    expected = os.path.join(os.path.dirname(package["manifest_path"]), "tests", "it", "main.rs")
    return [
        os.path.relpath(t["src_path"], root)
        for t in package["targets"]
        if "test" in t["kind"] and os.path.normpath(t["src_path"]) != os.path.normpath(expected)
    ]


def dependency_tables(manifest):
    for table in DEPENDENCY_TABLES:
        yield table, manifest.get(table, {})
    for platform, tables in manifest.get("target", {}).items():
        for table in DEPENDENCY_TABLES:
            yield f"target.{platform}.{table}", tables.get(table, {})


def workspace_deps(package, root):
    """Dependencies of the package's manifest not taken from the workspace."""
    with open(package["manifest_path"], "rb") as file:
        manifest = tomllib.load(file)
    relative = os.path.relpath(package["manifest_path"], root)
    return [
        f"{relative}: [{table}] {name}"
        for table, dependencies in dependency_tables(manifest)
        for name, spec in dependencies.items()
        if not (isinstance(spec, dict) and spec.get("workspace") is True)
    ]


RULES = (
    (
        "crates without unsafe code say #![forbid(unsafe_code)] at every library and binary root",
        forbid_unsafe,
    ),
    ("integration tests are one binary, tests/it/main.rs (move these under tests/it)", tests_layout),
    (
        "dependencies come from [workspace.dependencies] (`name.workspace = true`; add the path "
        "or version there)",
        workspace_deps,
    ),
)


def main():
    metadata = json.load(sys.stdin)
    root = metadata["workspace_root"]
    members = set(metadata["workspace_members"])
    packages = [p for p in metadata["packages"] if p["id"] in members]
    broken = False
    for rule, check in RULES:
        found = [item for package in packages for item in check(package, root)]
        if found:
            broken = True
            print(f"lint: {rule}:", *found, sep="\n  ", file=sys.stderr)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
