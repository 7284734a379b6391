#!/usr/bin/env bash
# Idempotent: a virtual environment of its own holding OSWorld's reference package
# (`desktop-env==1.0.2`, the release whose `mm_agents/agent.py` writes the seven-column table),
# against which tests/os/test_os_osworld.py checks that the os domain's rows are OSWorld's.
#
# Only the package itself is installed (--no-deps): the tests load two of its files,
# `mm_agents/accessibility_tree_wrap/heuristic_retrieve.py` (the node filter) and the
# `linearize_accessibility_tree` function of `mm_agents/agent.py`, which need Pillow and the
# standard library only; the package's own requirements (model clients, cloud SDKs, torch...)
# are hundreds of megabytes the tree code never touches. Pillow comes with it.
# A second run only checks a stamp and takes well under a second.
#
# Usage (from the repository root, or anywhere): bash scripts/osworld_venv.sh
set -euo pipefail

cd "$(dirname "$0")/.."

VENV=.venv-osworld
STAMP="$VENV/.osworld-installed"
WANTED="desktop-env==1.0.2 pillow"

if [ "$(cat "$STAMP" 2>/dev/null || true)" = "$WANTED" ]; then
    echo "osworld venv: up to date ($WANTED)"
    exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "osworld venv: creating $VENV"
    PYTHON="$(command -v python3.11 || command -v python3)"
    "$PYTHON" -m venv "$VENV"
fi
echo "osworld venv: installing $WANTED (without desktop-env's dependencies)"
# Pillow first: pip's resolver then has nothing to say about the --no-deps install.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check pillow
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps desktop-env==1.0.2

# Written only after a successful install, so a failed one is retried next time.
echo "$WANTED" >"$STAMP"
echo "osworld venv: installed ($WANTED)"
