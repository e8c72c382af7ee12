#!/usr/bin/env bash
# Installs the official SDKs that the peer tests drive (E2B's against e2b-local, MCP's against
# `dsh mcp`):
#   tests/sdk-peers/js      npm `e2b` (the newest release, and 2.29.1 as `e2b-2.29.1`),
#                     `@modelcontextprotocol/sdk`, pinned in package.json / package-lock.json
#                     (npm ci)
#   tests/sdk-peers/python  PyPI `e2b`, `mcp` + pytest pinned in requirements.txt, in
#                     tests/sdk-peers/python/.venv; `e2b` 2.29.1 + pytest in .venv-e2b-2.29.1
# Idempotent: a peer whose pinned inputs did not change since the last successful install is left
# alone. Uses only the npm and PyPI registries.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
js="$root/tests/sdk-peers/js"
py="$root/tests/sdk-peers/python"

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

# One venv per requirements file: `.venv` (requirements.txt: the newest `e2b`, `mcp`, pytest) and
# `.venv-e2b-2.29.1` (requirements-e2b-2.29.1.txt: the release e2b-local was first built against).
install_python() {
  install_venv requirements.txt .venv 'import e2b, mcp, pytest'
  install_venv requirements-e2b-2.29.1.txt .venv-e2b-2.29.1 'import e2b, pytest'
}

install_venv() {
  local requirements=$1 venv=$py/$2 check=$3
  local python=${PYTHON:-python3}
  need "$python"
  local stamp
  stamp=$(stamp_of "$py/$requirements")
  if [ -f "$venv/.install-stamp" ] && [ "$(cat "$venv/.install-stamp")" = "$stamp" ] \
    && "$venv/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "install-sdk-peers: python peer $2 up to date"
    return
  fi
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$py/$requirements"
  echo "$stamp" >"$venv/.install-stamp"
  echo "install-sdk-peers: python peer $2 installed ($("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("e2b"))'))"
}

case "${1:-all}" in
  js) install_js ;;
  python) install_python ;;
  all) install_js; install_python ;;
  *) echo "usage: scripts/install-sdk-peers.sh [js|python|all]" >&2; exit 2 ;;
esac
