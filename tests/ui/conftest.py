"""The headless Chromium the browser tests share (tests/ui/test_ui_browser*.py): where it is, how it is
started, and one browser per test module. Playwright is imported only by the fixture, so the UI's
plain-HTTP tests need neither it nor Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("MEMORYD_TEST_CHROMIUM", "/usr/bin/chromium")
REBIND = "rebind.test"  # resolves to 127.0.0.1 in the browser: a DNS-rebinding host to refuse
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--host-resolver-rules=MAP {REBIND} 127.0.0.1"]
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        except Exception as exc:  # a Chromium too old or broken for this Playwright: say so, do not fail
            pytest.skip(f"Chromium at {CHROMIUM} does not start under Playwright: {str(exc)[:300]}")
        try:
            yield b
        finally:
            b.close()
