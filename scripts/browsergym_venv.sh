#!/usr/bin/env bash
# Idempotent: a virtual environment of its own holding BrowserGym's reference package
# (`browsergym-core==0.14.3`), against which tests/web/test_web_browsergym.py checks that the
# web domain's tree and bids are BrowserGym's, element for element.
#
# It cannot share .venv: browsergym-core pins playwright==1.44 while the project uses a newer
# Playwright. Playwright 1.44 looks for its own Chromium build (chromium-1117); we never run
# `playwright install` (it downloads from a browser vendor), so a browsers folder is laid out
# with chromium-1117/chrome-linux/chrome linked to Debian's Chromium binary, and the test points
# PLAYWRIGHT_BROWSERS_PATH at it. A second run only checks a stamp and takes well under a second.
#
# Usage (from the repository root, or anywhere): bash scripts/browsergym_venv.sh
set -euo pipefail

cd "$(dirname "$0")/.."

VENV=.venv-browsergym
STAMP="$VENV/.browsergym-installed"
WANTED="browsergym-core==0.14.3"
CHROMIUM=/usr/lib/chromium/chromium
BROWSERS="$VENV/playwright-browsers"

if [ "$(cat "$STAMP" 2>/dev/null || true)" = "$WANTED" ] && [ -x "$BROWSERS/chromium-1117/chrome-linux/chrome" ]; then
    echo "browsergym venv: up to date ($WANTED)"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "browsergym venv: creating $VENV"
    # browsergym-core 0.14.3 installs with Python 3.11 (field notes); prefer it when present.
    PYTHON="$(command -v python3.11 || command -v python3)"
    "$PYTHON" -m venv "$VENV"
fi
echo "browsergym venv: installing $WANTED"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WANTED"

# Playwright 1.44's Chromium revision is 1117; link Debian's Chromium binary in its place.
mkdir -p "$BROWSERS/chromium-1117/chrome-linux"
ln -sfn "$CHROMIUM" "$BROWSERS/chromium-1117/chrome-linux/chrome"
# Playwright checks for this marker file to decide a browser is fully installed.
touch "$BROWSERS/chromium-1117/INSTALLATION_COMPLETE"

# Written only after a successful install, so a failed one is retried next time.
echo "$WANTED" >"$STAMP"
echo "browsergym venv: installed ($WANTED)"
