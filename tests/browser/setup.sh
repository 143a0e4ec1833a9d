#!/usr/bin/env bash
# What the browser tests (tests/browser) need, installed only when missing:
#   Debian's chromium (/usr/bin/chromium) and the Python package playwright,
#   which drives that Chromium (no `playwright install`: the tests pass
#   executable_path, so no browser is downloaded).
# Idempotent: a second run installs nothing. CI runs it before pytest.
#   PYTHON=python3.11 bash tests/browser/setup.sh     (default: python3)
set -euo pipefail

PYTHON="${PYTHON:-python3}"
CHROMIUM="${SWEEP_CHROMIUM:-/usr/bin/chromium}"
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

if [ -x "$CHROMIUM" ]; then
    echo "chromium: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM") (already installed)"
else
    echo "chromium: installing Debian's package"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
    "$CHROMIUM" --version
fi

if "$PYTHON" -c "import playwright.sync_api" >/dev/null 2>&1; then
    echo "playwright: $("$PYTHON" -m pip show playwright 2>/dev/null | sed -n 's/^Version: //p') (already installed)"
else
    echo "playwright: installing from PyPI"
    "$PYTHON" -m pip install --quiet "playwright>=1.40"
fi
