"""Fixtures for tests that open generated pages in headless Chromium (Debian's chromium).

Chromium is found at $SWEEP_CHROMIUM, else /usr/bin/chromium (or chromium on
PATH); it is driven by Playwright's Python package (pip install playwright),
given that executable, so no `playwright install` download is needed. Without
either the tests skip, unless SWEEP_REQUIRE_BROWSER=1, when they fail saying
what is missing. `bash tests/browser/setup.sh` installs both.

Every test collected under tests/browser/ gets the `browser` marker.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

HERE = Path(__file__).resolve().parent
SETUP = HERE / "setup.sh"

# This machine's closed network refuses Chromium's background connections: start
# it with none of them, and with a fresh profile (launch_persistent_context's
# user_data_dir) every time.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def require_browser() -> bool:
    return os.environ.get("SWEEP_REQUIRE_BROWSER", "") == "1"


def _unavailable(reason: str) -> None:
    if require_browser():
        pytest.fail(f"SWEEP_REQUIRE_BROWSER=1 but {reason}", pytrace=False)
    pytest.skip(f"{reason} (bash {SETUP} installs it)")


def find_chromium() -> str | None:
    env = os.environ.get("SWEEP_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for c in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if c and os.access(c, os.X_OK):
            return c
    return None


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        where = os.environ.get("SWEEP_CHROMIUM") or "/usr/bin/chromium"
        _unavailable(f"no Chromium at {where} (set SWEEP_CHROMIUM, or apt-get install chromium)")
    return path


@pytest.fixture(scope="session")
def playwright_api() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed (pip install playwright)")
    with sync_playwright() as p:
        yield p


@pytest.fixture
def browser_context(playwright_api: Any, chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh headless Chromium profile; pages open with a 1280 px wide viewport."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    ctx = playwright_api.chromium.launch_persistent_context(
        str(profile), executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": 1280, "height": 900}, offline=True, timeout=60_000)
    try:
        yield ctx
    finally:
        ctx.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
