"""Debian's Chromium through Playwright: one browser per worker thread, each in its own network.

Playwright's sync API is bound to the thread that started it, and a Prefect worker runs many
episodes one after another in the same thread. So each thread launches one browser the first
time it needs one and keeps it; an episode only opens (and closes) a fresh context, which is
cheap and shares nothing with the previous episode (cookies, storage, cache).

Isolation below the page: every browser runs inside its own network namespace
(:class:`worldtrace.sandboxes.websites.BrowserNetwork`), which holds nothing but a loopback
interface and
the site of the current episode. Chromium is started through a small wrapper that enters the
namespace (``nsenter --net=``) before it runs the real binary, and resolves only site names
(``*.test``) to that loopback. Whatever a page does — requests, WebSockets, WebRTC over UDP or
TCP — it reaches the site and nothing else: not the host's ports, not the host's addresses,
not the outside world. Playwright's request routing (in the environment) stays as the second
layer that records what was refused.

Isolation of the browser itself (:data:`JAIL_SCRIPT`): pages the agent reaches are untrusted, so
Chromium runs the way it is meant to, with its own sandbox on (renderers in user, PID and
network namespaces of their own, under seccomp-bpf), and the browser process is confined too.
The launch wrapper (run as root) puts itself in a memory cgroup of its own
(:class:`worldtrace.sandboxes.cgroups.MemoryCgroup`, capped at ``memory_mb``, no swap), enters
the network namespace, and starts a new mount, PID, IPC and UTS namespace in which it builds a
small root: the system's ``/usr`` and ``/etc`` read-only, a few device nodes, a ``/proc`` of
the new PID namespace, and a private ``/tmp`` (a tmpfs: the profile, ``HOME`` and Chromium's
``org.chromium.Chromium.*`` temporary folders live there and vanish with the namespace, however
the browser ends); no other host folder is visible. It then drops to :data:`BROWSER_UID`, an
account-less unprivileged uid, with no capabilities and ``no_new_privs``, enters a user namespace
of its own, and becomes Chromium (``exec``), which is PID 1 of its namespace: when it dies, the
kernel ends every process it left. Playwright's pipes are inherited file descriptors, so they
survive every step. When the pages' memory reaches the cap, the kernel kills the biggest process (a
renderer: Chromium gives renderers the highest ``oom_score_adj``) and counts it;
:meth:`ThreadBrowser.over_memory_cap` then turns the crash into a reason saying so.

No call into a page may hang a worker: Playwright gives ``evaluate``, key presses and mouse
events no timeout, so every step runs under :func:`deadline`, a watchdog that kills the
thread's browser (its whole process group) when the step overruns; the blocked Playwright call
then fails at once, the episode ends with the reason, and the thread's next episode launches a
new browser. :func:`kill_all_browsers` does the same for every browser of the process (on
SIGTERM or Ctrl-C).

Never run ``playwright install``: it downloads a browser from a vendor, which fails here. The
browser is the system's (``apt-get install chromium``) and is launched by path.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import itertools
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from playwright.sync_api import Browser, Playwright, sync_playwright

from worldtrace.sandboxes.cgroups import MemoryCapError, MemoryCgroup
from worldtrace.sandboxes.owners import pid_alive
from worldtrace.sandboxes.websites import BROWSER_HOST_RULES, BrowserNetwork
from worldtrace.schemas.errors import SetupError

CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
"""Where Debian puts the browser; ``/usr/bin/chromium`` is a shell wrapper around the first."""

CHROMIUM_FLAGS = (
    # No --no-sandbox: the browser runs unprivileged (see JAIL_SCRIPT) with its sandbox on.
    # Without these a headless browser on a closed network waits on services it cannot reach.
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    # HttpsUpgrades would turn a blocked http:// link into an https:// request in the record.
    # Overlay scrollbars off (and Playwright's --hide-scrollbars dropped at launch), as
    # BrowserGym launches Chromium: the page is laid out beside a classic scrollbar, so lines
    # wrap and elements sit where they do under BrowserGym, and the screenshot shows it.
    "--disable-features=Translate,MediaRouter,OptimizationHints,HttpsUpgrades,"
    "OverlayScrollbars,ExtendedOverlayScrollbars",
    "--disable-dev-shm-usage",
    # Site names resolve to the namespace's loopback; nothing else resolves.
    f"--host-resolver-rules={BROWSER_HOST_RULES}",
)

CLOSE_TIMEOUT_S = 10.0
"""How long closing a browser may take before it is killed instead."""

DEFAULT_MEMORY_MB = 2048
"""Memory cap of one browser, all its processes and its private ``/tmp`` together (MiB)."""

BROWSER_UID = 61184
"""The uid (and gid) the browser runs as: no account has it (the first id of the range systemd
keeps for dynamic service users), so it owns no file on the host and can read only what every
user may. A machine where an account holds it gets a clear error instead of a browser."""

BROWSER_ACCOUNT = "worldtrace-browser"
"""The one account name allowed to hold :data:`BROWSER_UID` (an administrator's choice)."""

JAIL_ROOT_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Host folders the browser sees, read-only (symbolic links, as merged ``/usr`` has, copied);
with the font cache (:data:`JAIL_OPTIONAL_DIRS`) that is all of the host it sees."""

JAIL_OPTIONAL_DIRS = ("/var/cache/fontconfig",)
"""Shown read-only when present: without the cache, every launch would rebuild it."""

JAIL_DEVICES = ("null", "zero", "full", "random", "urandom")
"""Device nodes the browser gets in its ``/dev`` (bound from the host's)."""

PASSED_ENVIRONMENT = ("TZ", "LANG", "LANGUAGE")
"""The only variables of ours the browser inherits (with ``LC_*``): what changes how a page
renders (time zone, locale); never tokens or paths of the host."""

JAIL_SCRIPT = r"""# The browser's jail, built as root inside new mount, PID, IPC and UTS
# namespaces (this shell is PID 1 of the new PID namespace until it execs Chromium).
# $1: mount point of the jail's root, $2: the browser's uid and gid, $3: size of /tmp and
# /dev/shm in MiB, $4: folders shown read-only (space-separated), then the browser's argv.
set -eu
root=$1 uid=$2 tmp_mb=$3 shown=$4
shift 4
mount -t tmpfs -o mode=0755,nosuid,nodev,size=1m browser-root "$root"
cd "$root"
for path in $shown; do
    if [ -L "$path" ]; then
        ln -s "$(readlink "$path")" ".$path"
    elif [ -d "$path" ]; then
        mkdir -p ".$path"
        mount --bind -o ro,nosuid,nodev "$path" ".$path"
    fi
done
mkdir dev proc tmp .old
for device in DEVICES; do
    touch "dev/$device"
    mount --bind "/dev/$device" "dev/$device"
done
ln -s /proc/self/fd dev/fd
ln -s /proc/self/fd/0 dev/stdin
ln -s /proc/self/fd/1 dev/stdout
ln -s /proc/self/fd/2 dev/stderr
mkdir dev/shm
mount -t tmpfs -o mode=1777,nosuid,nodev,size="$tmp_mb"m browser-shm dev/shm
mount -t proc -o nosuid,nodev,noexec proc proc
mount -t tmpfs -o mode=1777,nosuid,nodev,size="$tmp_mb"m browser-tmp tmp
# pivot_root, not chroot: a chrooted process may not make user namespaces, which Chromium's
# sandbox needs; and the host's tree is detached, not just out of sight.
pivot_root . .old
cd /
umount -l /.old
rmdir /.old
mkdir -m 0700 /tmp/home /tmp/profile
chown "$uid:$uid" /tmp/home /tmp/profile
mount -o remount,ro,bind /
# Playwright names a profile folder in its own /tmp; the browser's is /tmp/profile.
for arg; do
    shift
    case $arg in --user-data-dir=*) arg=--user-data-dir=/tmp/profile ;; esac
    set -- "$@" "$arg"
done
export HOME=/tmp/home TMPDIR=/tmp
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs \
    --bounding-set=-all --inh-caps=-all -- unshare --user --map-current-user -- "$@"
""".replace("DEVICES", " ".join(JAIL_DEVICES))
"""Builds the browser's root and starts it unprivileged (see the module's docstring)."""


class BrowserUnavailable(SetupError, RuntimeError):
    """Chromium or Playwright cannot be started; the message says how to fix it."""


@cache
def chromium_path() -> str:
    """Return the Chromium binary, or raise with the install command."""
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    raise BrowserUnavailable(
        "Chromium is not installed: run `make setup WORLDTRACE_DOMAINS=web` as root (or `apt-get "
        "install chromium`)"
    )


@cache
def chromium_version() -> str:
    """Return the browser's version string, e.g. ``Chromium 156.0.8078.79``."""
    result = subprocess.run(
        [chromium_path(), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    return result.stdout.strip() or "unknown"


@dataclass(eq=False)
class ThreadBrowser:
    """One worker thread's browser, the network namespace it runs in, and its process."""

    browser: Browser
    network: BrowserNetwork
    pid: int
    """The launcher (``unshare``, root, in the host's PID namespace), leader of the process
    group of the browser and its renderers and helpers; the browser is its only child."""
    folder: Path
    """Holds the launch wrapper, the jail script, its pid file and the jail's mount point."""
    cgroup: MemoryCgroup
    """The memory cgroup every process of the browser runs in, capped at ``memory_mb``."""
    memory_mb: int
    """The memory cap (MiB)."""
    main_pid: int | None = field(default=None)
    """Chromium's main process (PID 1 of the browser's PID namespace), if it was found."""
    killed: str | None = field(default=None)
    """Why the browser was killed (a step overran, the run was interrupted), else None."""
    oom_kills_seen: int = field(default=0)
    """Memory-cap kills already accounted for (before the current episode)."""

    def alive(self) -> bool:
        """Whether the browser was neither killed nor lost (cheap: no call to the browser).

        Chromium's own process is asked too: when it dies, Playwright hears of it only once
        the launcher, which holds the other end of its pipes, has seen the whole PID namespace
        go (up to a second on a busy machine).
        """
        return (
            self.killed is None
            and self.browser.is_connected()
            and (self.main_pid is None or _running(self.main_pid))
        )

    def usable(self) -> bool:
        """Whether the browser can take another episode (asks Docker about its network)."""
        return self.alive() and self.network.alive()

    def over_memory_cap(self) -> str | None:
        """Why a process of the browser died, if the memory cap killed one this episode.

        The kernel counts every process it kills in the browser's cgroup for reaching the cap;
        a crash with no such kill is not the cap's doing (None).
        """
        if self.cgroup.oom_kills() <= self.oom_kills_seen:
            return None
        return f"the page exceeded the browser's memory cap ({self.memory_mb} MiB)"

    def start_episode(self) -> None:
        """Account for earlier memory-cap kills, so they are not blamed on the next page."""
        self.oom_kills_seen = self.cgroup.oom_kills()

    def kill(self, reason: str) -> None:
        """Kill the browser's processes now, from any thread; its pending calls then fail."""
        with _launched_lock:
            # Stopped or killed before: its pid may belong to someone else by now.
            if self not in _launched or self.killed is not None:
                return
            self.killed = reason
        # Playwright starts the browser in a process group of its own (pgid = pid); the
        # cgroup holds whatever left the group. The browser is PID 1 of its namespace: its
        # death ends everything in it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.cgroup.kill()


_launched: set[ThreadBrowser] = set()
"""Every browser of this process that is not stopped yet, whichever thread launched it."""
_launched_lock = threading.Lock()

_local = threading.local()


@atexit.register
def _remove_launch_folders() -> None:
    # Playwright's driver exits when our end of its stdin pipe closes and takes its browser with
    # it, whichever thread started it; the namespaces' holders are sandboxes, removed at exit
    # like every other. What is left is the launch wrappers' folders and the memory cgroups.
    with _launched_lock:
        entries = list(_launched)
    for entry in entries:
        entry.cgroup.kill()
        entry.cgroup.remove(2.0)
        shutil.rmtree(entry.folder, ignore_errors=True)


def thread_browser(memory_mb: int = DEFAULT_MEMORY_MB) -> ThreadBrowser:
    """Return this thread's browser for a new episode, launching it when it has none.

    A new one replaces a browser that crashed or was killed, whose network reached its
    wall-clock limit, or whose memory cap is not ``memory_mb``.
    """
    current: ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None and current.usable() and current.memory_mb == memory_mb:
        current.start_episode()
        return current
    if current is not None:
        _local.browser = None
        _stop(current)
    playwright: Playwright | None = getattr(_local, "playwright", None)
    if playwright is None:
        try:
            playwright = sync_playwright().start()
        except Exception as error:
            raise BrowserUnavailable(f"cannot start Playwright: {error}") from error
        _local.playwright = playwright
    _local.browser = _launch(playwright, memory_mb)
    return _local.browser


_PF_EXITING = 0x4
"""The kernel's flag of a process that is being torn down (``flags`` in ``/proc/<pid>/stat``)."""


def _stat(pid: int) -> tuple[str, int, int] | None:
    """A process's state letter, parent pid and kernel flags; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0].decode(), int(fields[1]), int(fields[6])


def _running(pid: int) -> bool:
    # A killed PID 1 is not a zombie at once: it waits, exiting, for its namespace to empty.
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X") and not stat[2] & _PF_EXITING


def _main_process(launcher: int, cgroup: MemoryCgroup) -> int | None:
    """Chromium's main process: the launcher's one child in the browser's cgroup."""
    for pid in cgroup.pids():
        stat = _stat(pid)
        if stat is not None and stat[1] == launcher:
            return pid
    return None


def browser_uid() -> int:
    """Return :data:`BROWSER_UID`, or raise if an account (other than ours) holds it."""
    try:
        account = pwd.getpwuid(BROWSER_UID).pw_name
    except KeyError:
        return BROWSER_UID
    if account != BROWSER_ACCOUNT:
        raise BrowserUnavailable(
            f"uid {BROWSER_UID}, which the browser runs as, belongs to the account {account!r}: "
            f"the browser would own that account's files (rename it {BROWSER_ACCOUNT!r} "
            "if it exists only for the browser)"
        )
    return BROWSER_UID


def _jail_command(network: BrowserNetwork, folder: Path, cgroup: MemoryCgroup) -> str:
    """The launch wrapper Playwright runs: into the cgroup, the network, then the jail."""
    binary = chromium_path()
    shown = [*JAIL_ROOT_DIRS, *(path for path in JAIL_OPTIONAL_DIRS if Path(path).is_dir())]
    if not any(binary.startswith(path + "/") for path in JAIL_ROOT_DIRS):
        shown.append(str(Path(binary).parent))  # a browser installed elsewhere
    (folder / "root").mkdir()
    (folder / "jail.sh").write_text(JAIL_SCRIPT)
    jail_args = [
        str(folder / "root"),
        str(browser_uid()),
        str(cgroup.limit_bytes >> 20),
        " ".join(shown),
        binary,
    ]
    # `exec` keeps one pid from the shell to `unshare`, so the pid file names the launcher;
    # --kill-child: the browser dies with it, whoever kills it.
    return (
        "#!/bin/sh\n"
        f"echo $$ > {shlex.quote(str(folder / 'pid'))}\n"
        f"echo $$ > {shlex.quote(str(cgroup.procs_file))} || exit 70\n"
        f"exec nsenter --net={shlex.quote(network.path)} -- "
        "unshare --mount --pid --ipc --uts --fork --kill-child --propagation private -- "
        f"/bin/sh {shlex.quote(str(folder / 'jail.sh'))} "
        f'{" ".join(shlex.quote(arg) for arg in jail_args)} "$@"\n'
    )


# The value type is the one launch(env=…) declares (a dict, so no narrower value type passes).
def _browser_environment() -> dict[str, str | float | bool]:
    passed = {
        key: value
        for key, value in os.environ.items()
        if key in PASSED_ENVIRONMENT or key.startswith("LC_")
    }
    # The wrapper finds nsenter, unshare, mount and setpriv on this PATH.
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **passed}


def _remove_stale_folders() -> None:
    """Remove launch folders of processes that died without removing them (SIGKILL)."""
    for folder in Path(tempfile.gettempdir()).glob("worldtrace-browser-*-*"):
        try:
            pid = int(folder.name.split("-")[2])
        except (ValueError, IndexError):
            continue
        if not pid_alive(pid):
            shutil.rmtree(folder, ignore_errors=True)


def _launch(playwright: Playwright, memory_mb: int) -> ThreadBrowser:
    binary = chromium_path()
    if os.geteuid() != 0:
        raise BrowserUnavailable(
            "the browser is confined in namespaces and a memory cgroup of its own and started "
            "as an unprivileged user, which needs root (nsenter, unshare, cgroups)"
        )
    _remove_stale_folders()
    try:
        cgroup = MemoryCgroup("browser", memory_mb << 20)
    except MemoryCapError as error:
        raise BrowserUnavailable(str(error)) from None
    # A network that cannot start is a sandbox failure (SandboxError): the episode is retried.
    try:
        network = BrowserNetwork().start()
    except BaseException:
        cgroup.remove(0)
        raise
    folder = Path(tempfile.mkdtemp(prefix=f"worldtrace-browser-{os.getpid()}-"))
    wrapper = folder / "chromium"
    try:
        wrapper.write_text(_jail_command(network, folder, cgroup))
        wrapper.chmod(0o700)
        browser = playwright.chromium.launch(
            executable_path=str(wrapper),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            ignore_default_args=["--hide-scrollbars"],
            chromium_sandbox=True,  # else Playwright adds --no-sandbox
            env=_browser_environment(),
        )
    except Exception as error:
        network.close()
        cgroup.kill()
        cgroup.remove()
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(error, BrowserUnavailable):
            raise
        raise BrowserUnavailable(f"cannot launch {binary}: {error}") from error
    pid = int((folder / "pid").read_text())
    main_pid = _main_process(pid, cgroup)
    entry = ThreadBrowser(browser, network, pid, folder, cgroup, memory_mb, main_pid)
    with _launched_lock:
        _launched.add(entry)
    return entry


def close_thread_browser() -> None:
    """Close this thread's browser and its network, and stop its Playwright driver."""
    current: ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None:
        _local.browser = None
        _stop(current)
    playwright: Playwright | None = getattr(_local, "playwright", None)
    if playwright is not None:
        _local.playwright = None
        # Stopping from the wrong thread or after a crash raises; the process exits anyway.
        with contextlib.suppress(Exception):
            playwright.stop()


def _stop(entry: ThreadBrowser) -> None:
    # A browser that does not close in time is killed (the watchdog), so this cannot hang.
    # (Any error: a dead browser has nothing to close.)
    with deadline(entry, CLOSE_TIMEOUT_S, "closing took too long"), contextlib.suppress(Exception):
        entry.browser.close()
    with _launched_lock:
        _launched.discard(entry)
    # Closed or not, nothing of the browser may outlive it (its jail's /tmp goes with it).
    # The cgroup, not the process group: the launcher's pid may be reused once it is gone.
    entry.cgroup.kill()
    entry.cgroup.remove()
    entry.network.close()
    shutil.rmtree(entry.folder, ignore_errors=True)


def kill_all_browsers(reason: str) -> int:
    """Kill every browser this process launched, in every thread; return how many.

    Their blocked Playwright calls fail at once; each thread launches a new browser the next
    time it asks :func:`thread_browser` for one.
    """
    with _launched_lock:
        entries = list(_launched)
    for entry in entries:
        entry.kill(reason)
    return len(entries)


class _Watchdog:
    """One thread for the process that kills browsers whose deadline passed."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, tuple[ThreadBrowser, str]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, entry: ThreadBrowser, seconds: float, reason: str) -> int:
        with self._wake:
            token = next(self._tokens)
            self._armed[token] = (entry, reason)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="browser-watchdog")
                self._thread.daemon = True
                self._thread.start()
            self._wake.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._wake:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            due: list[tuple[ThreadBrowser, str]] = []
            with self._wake:
                now = time.monotonic()
                while self._heap and (
                    self._heap[0][0] <= now or self._heap[0][1] not in self._armed
                ):
                    _, token = heapq.heappop(self._heap)
                    armed = self._armed.pop(token, None)
                    if armed is not None:
                        due.append(armed)
                if not due:
                    self._wake.wait(self._heap[0][0] - now if self._heap else None)
            for entry, reason in due:
                entry.kill(reason)


_watchdog = _Watchdog()


@contextlib.contextmanager
def deadline(entry: ThreadBrowser, seconds: float, reason: str) -> Iterator[None]:
    """Kill ``entry``'s browser with ``reason`` if the block is still running after ``seconds``."""
    token = _watchdog.arm(entry, seconds, reason)
    try:
        yield
    finally:
        _watchdog.disarm(token)
