"""Shared fixtures for dsh's own tests of the official E2B Python SDK against e2b-local.

The server comes from E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY, which e2b-local's Rust
harness sets when it runs this suite.
"""

import os
import time

import pytest
from e2b import Sandbox

for _name in ("E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY"):
    if not os.environ.get(_name):
        raise RuntimeError(
            f"{_name} is not set: run these tests through e2b-local's Rust harness "
            "(cargo nextest run -p e2b-local)"
        )


@pytest.fixture
def make_sandbox():
    """Creates sandboxes that are killed after the test, whatever its outcome."""
    created = []

    def make(**kwargs):
        kwargs.setdefault("timeout", 120)
        sbx = Sandbox.create(**kwargs)
        created.append(sbx.sandbox_id)
        return sbx

    yield make
    for sandbox_id in created:
        try:
            Sandbox.kill(sandbox_id)
        except Exception:  # noqa: BLE001 - teardown must try every sandbox
            pass


@pytest.fixture
def sbx(make_sandbox):
    return make_sandbox()


def eventually(check, timeout=10.0, what="condition"):
    """Polls `check` until it returns a truthy value or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
