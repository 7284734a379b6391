#!/usr/bin/env bash
# One idempotent setup step for `make demo`, `make test` and CI (.ci/run).
#
# Run as root on Debian 12 from the repository root. Each step checks first and does nothing
# when its work is already done, so a second run takes a few seconds:
#   1. python3-venv, then .venv with the project installed by uv (reinstalled when
#      pyproject.toml or setup.py changes)
#   2. the Debian packages worldtrace needs (docker.io, debootstrap, e2fsprogs) and those of the
#      domains named by $WORLDTRACE_DOMAINS (chromium for web), as
#      `worldtrace doctor --debian-packages --domains …` lists them
#   3. a running Docker engine (started here: there is no systemd)
#   4. the base and clock images, and the images of the domains named by $WORLDTRACE_DOMAINS
#      (built when missing or stale)
# $WORLDTRACE_DOMAINS: unset or empty, none (a domain's images are then built the first time
# `worldtrace collect` uses them; a domain with Debian packages of its own, web, needs
# `make setup WORLDTRACE_DOMAINS=web` once); "all", every registered domain (the tests); or
# domain names, e.g. WORLDTRACE_DOMAINS="terminal web".
set -euo pipefail

cd "$(dirname "$0")/.."

VENV=.venv
STAMP="$VENV/.worldtrace-installed"
DOCKERD_LOG=/var/log/worldtrace-dockerd.log
# Where worldtrace keeps its logs (flows/logs.py), the venv install's among them.
LOG_DIR="${WORLDTRACE_LOG_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/worldtrace/logs}"
UV_VERSION=0.13.9

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: $1 needs root; rerun as root (e.g. sudo make setup)" >&2
        exit 1
    fi
}

install_debian() {
    local missing=()
    for package in "$@"; do
        # `dpkg -s` exits 0 for removed-but-configured packages too; the Status line is the truth.
        if ! dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q ' installed$'; then
            missing+=("$package")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "debian packages: installed ($*)"
        return
    fi
    need_root "installing ${missing[*]}"
    # One line per step (`make demo` prints little): it is finished when the step is.
    printf 'debian packages: installing %s … ' "${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    echo "installed"
}

# --- 1. virtualenv --------------------------------------------------------------------------
install_debian python3-venv
if [ ! -x "$VENV/bin/python" ]; then
    printf 'python venv: creating %s … ' "$VENV"
    python3 -m venv "$VENV"
    echo "created"
fi
wanted="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" = "$wanted" ]; then
    echo "python venv: up to date"
else
    printf "python venv: installing the project (uv pip install -e '.[dev]') … "
    started=$SECONDS
    mkdir -p "$LOG_DIR"
    install_log="$LOG_DIR/setup-venv.log"
    # uv resolves and installs the same versions as pip from the same registry in about a
    # tenth of the time (11 s against 108 s for a fresh venv, measured 2026-12-01); it is a
    # bootstrap tool, not a dependency, so it is pinned here. Its output goes to a log, shown
    # on failure: pip's own lines (a machine's index warnings) would bury the demo's.
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check "uv==$UV_VERSION" &&
        "$VENV/bin/uv" pip install --python "$VENV/bin/python" -e '.[dev]'; } >"$install_log" 2>&1; then
        echo "failed; the last lines of $install_log:"
        tail -n 30 "$install_log" >&2
        exit 1
    fi
    # Written only after a successful install, so a failed one is retried next time.
    echo "$wanted" >"$STAMP"
    echo "installed in $((SECONDS - started)) s"
fi

# --- 2. Debian packages of worldtrace and the named domains -------------------------------------
# Only the named domains': Chromium and its 160 dependencies are 195 MB more to fetch and about
# 90 s more on a fresh machine, for a demo that collects in a terminal.
read -r -a packages <<<"$("$VENV/bin/worldtrace" doctor --debian-packages --domains "${WORLDTRACE_DOMAINS:-none}")"
install_debian "${packages[@]}"

# --- 3. Docker engine -----------------------------------------------------------------------
if docker info >/dev/null 2>&1; then
    echo "docker engine: running"
else
    need_root "starting dockerd"
    printf 'docker engine: starting dockerd (log: %s) … ' "$DOCKERD_LOG"
    # setsid + nohup + closed stdio: the daemon outlives this script and `make`, ignores the
    # terminal's Ctrl-C, and does not hold make's or CI's output pipe open.
    # --bridge=none: containers get loopback only (network_mode none/host), no iptables rules.
    setsid nohup dockerd --bridge=none --iptables=false --ip-forward=false \
        </dev/null >>"$DOCKERD_LOG" 2>&1 &
    for _ in $(seq 1 120); do
        if docker info >/dev/null 2>&1; then
            break
        fi
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        echo "failed"
        echo "docker engine: did not come up within 60 s; last lines of $DOCKERD_LOG:" >&2
        tail -n 20 "$DOCKERD_LOG" >&2 || true
        exit 1
    fi
    echo "running"
fi

# --- 4. sandbox images ----------------------------------------------------------------------
# One line per image; builds only what is missing or stale (see sandboxes/images.py), each
# build's output in a log file under ~/.local/state/worldtrace/logs.
case "${WORLDTRACE_DOMAINS:-}" in
    "" | none) "$VENV/bin/worldtrace" sandboxes build --base-only ;;
    all) "$VENV/bin/worldtrace" sandboxes build ;;
    # Unquoted on purpose: a list of domain names, one argument each.
    # shellcheck disable=SC2086
    *) "$VENV/bin/worldtrace" sandboxes build $WORLDTRACE_DOMAINS ;;
esac
