#!/usr/bin/env bash
# Installs the official SDKs that the peer tests drive (E2B's against e2b-local, MCP's against
# `dsh mcp`):
#   sdk-peers/js      npm `e2b`, `@modelcontextprotocol/sdk` pinned in package.json /
#                     package-lock.json (npm ci)
#   sdk-peers/python  PyPI `e2b`, `mcp` + pytest pinned in requirements.txt, in
#                     sdk-peers/python/.venv
# Idempotent: a peer whose pinned inputs did not change since the last successful install is left
# alone. Uses only the npm and PyPI registries.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
js="$root/sdk-peers/js"
py="$root/sdk-peers/python"

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "install-sdk-peers: '$1' is required but not on PATH" >&2; exit 1; }
}

stamp_of() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

install_js() {
  need node
  need npm
  local stamp
  stamp=$(stamp_of "$js/package.json" "$js/package-lock.json")
  if [ -f "$js/node_modules/.install-stamp" ] && [ "$(cat "$js/node_modules/.install-stamp")" = "$stamp" ]; then
    echo "install-sdk-peers: js peer up to date"
    return
  fi
  (cd "$js" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$stamp" >"$js/node_modules/.install-stamp"
  echo "install-sdk-peers: js peer installed ($(node -p "require('$js/node_modules/e2b/package.json').version"))"
}

install_python() {
  local python=${PYTHON:-python3}
  need "$python"
  local stamp
  stamp=$(stamp_of "$py/requirements.txt")
  if [ -f "$py/.venv/.install-stamp" ] && [ "$(cat "$py/.venv/.install-stamp")" = "$stamp" ] \
    && "$py/.venv/bin/python" -c 'import e2b, mcp, pytest' >/dev/null 2>&1; then
    echo "install-sdk-peers: python peer up to date"
    return
  fi
  if [ ! -x "$py/.venv/bin/python" ]; then
    "$python" -m venv "$py/.venv"
  fi
  "$py/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$py/requirements.txt"
  echo "$stamp" >"$py/.venv/.install-stamp"
  echo "install-sdk-peers: python peer installed ($("$py/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("e2b"))'))"
}

case "${1:-all}" in
  js) install_js ;;
  python) install_python ;;
  all) install_js; install_python ;;
  *) echo "usage: scripts/install-sdk-peers.sh [js|python|all]" >&2; exit 2 ;;
esac
