# Sourced by the benchmark scripts (not run): `start_e2b_local NAME` starts the release-built
# `target/release/e2b-local` on ephemeral ports in the background (root needed), waits until it is
# ready, exports the E2B_* variables a client needs, and stops it and removes its state when the
# sourcing script exits. Run from the repository root, after building e2b-local in release.
start_e2b_local() {
  e2b_local_state=$(mktemp -d "/var/tmp/$1.XXXXXX")
  e2b_local_out="$e2b_local_state.out"
  target/release/e2b-local serve --api-port 0 --envd-port 0 --state-dir "$e2b_local_state" \
    >"$e2b_local_out" 2>"$e2b_local_state.log" &
  e2b_local_pid=$!
  trap stop_e2b_local EXIT
  for _ in $(seq 1 300); do
    grep -q '^# e2b-local ready' "$e2b_local_out" && break
    kill -0 "$e2b_local_pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^# e2b-local ready' "$e2b_local_out"; then
    cat "$e2b_local_state.log" >&2
    echo "bench: e2b-local did not start" >&2
    exit 1
  fi
  eval "$(grep '^export ' "$e2b_local_out")"
}

stop_e2b_local() {
  kill -TERM "$e2b_local_pid" 2>/dev/null || true
  wait "$e2b_local_pid" 2>/dev/null || true
  rm -rf "$e2b_local_state" "$e2b_local_state.log" "$e2b_local_out"
}
