"""Drive bash in a tmux pane from inside the sandbox; one JSON request and reply per line.

Runs with the container's own Python for the lifetime of an episode, so a step costs one
round trip over the exec stream instead of one ``docker exec`` per tmux command.

Requests (stdin) and replies (stdout), one JSON object per line; a reply echoes its request's
``id``, so the host can tell the reply to its request from any other line (the request loop,
the reply channel and the process-limit count are the sandboxes' driver_runtime.py, copied
beside this file):
  {"id": "...", "op": "start", "width": 160, "height": 40, "cwd": "/home/user"} -> observation
  {"id": "...", "op": "step", "keys": [...], "timeout": 30, "quiet": 0.5, "min_wait": 0,
   "settle": 0.1}
      -> observation
  {"id": "...", "op": "observe"} -> observation
``python3 tmux_driver.py --observe`` prints one observation of a running session and exits
(the host's last look into a sandbox whose driver stopped answering).
Observation: screen and new scrollback (with ANSI escapes), cursor, pane size, whether the
shell is at its prompt and whether a command completed during the step, the last exit status
and the cwd from the prompt hook, the foreground program, phase timings, and how many new
processes the container's process limit refused during the request.
Completion is the prompt hook's ``tmux wait-for`` signal. A program that has not given the
prompt back ends the step when its process state says it waits for the terminal's input (vim,
less, a REPL, ``read``, a command reading stdin: every process of the foreground job asleep,
one of them in a read or select of a terminal) and the pane has not changed for ``settle``
seconds; a job that sleeps, computes or waits on a pipe runs on to the step's timeout, however
silent (``sleep 0.8; echo late`` ends with ``late`` and the prompt on screen). Only a job whose
state cannot be read (a set-user-id program) ends the step once it and the pane have been
idle for ``quiet`` seconds.

Isolation: the driver keeps root's effective ids, is not dumpable, and gives none of its own
file descriptors to a child, so nothing the agent runs can read its requests or write a reply
(see become_driver). The shell, the tmux server and every tmux client the driver starts run as
the unprivileged ``user``: a root tmux client would obey the user's server (hooks and command
aliases the agent sets run in the client, and ``save-buffer`` there writes any file as the
client's user, root). The agent owns its terminal: it can drive its own tmux server, so what
the driver captures is what that server shows, as for any program on the screen. Files the
agent controls (the prompt hook's state file) are opened without following links and read
only when they are the user's regular files.
"""

import ctypes
import json
import os
import pwd
import re
import select
import signal
import stat
import sys
import time

import driver_runtime as runtime

SESSION = "%0"
"""The pane the agent's shell runs in: the first pane of the server (targeted by its id)."""
TMUX = "/usr/bin/tmux"
USER = "user"
# tmux's own default socket of the user, as for anyone who runs tmux (filled in with the uid).
SOCKET = "/tmp/tmux-{uid}/default"
# Where the prompt hook notes the last command's status: beside the socket (wt-shell.bashrc).
STATE_FILE = SOCKET + ".status"
STATE_MAX_BYTES = 65536
CHANNEL = "prompt"
SPLIT = "\x1e-wt-split-\x1e"
# tmux refuses client messages over 16 KB; stay well under it per invocation.
CHUNK = 4096
POLL_S = 0.03
SETTLE_S = 0.1
"""How long the pane must stay the same once the job waits for input (its last output lands)."""
# Device majors of terminals: /dev/tty and consoles (4, 5) and the ptys (136-143).
TERMINAL_MAJORS = frozenset({4, 5, *range(136, 144)})
# System calls a process waiting for a terminal sleeps in, by machine.
_SYSCALLS_BY_MACHINE = {
    "x86_64": {"read": {0, 19}, "select": {23, 270}, "poll": {7, 271, 232, 281, 441}},
    "aarch64": {"read": {63, 65}, "select": {72}, "poll": {73, 22, 441}},
}
SYSCALLS = _SYSCALLS_BY_MACHINE.get(os.uname().machine, _SYSCALLS_BY_MACHINE["x86_64"])
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# Same rule as collectors/terminal/actions.py (this file runs in the container and cannot
# import the package); tests/terminal/test_terminal_actions.py keeps the two in step.
NAMED_KEYS = {
    "Enter",
    "Escape",
    "Tab",
    "BTab",
    "BSpace",
    "Space",
    "Up",
    "Down",
    "Left",
    "Right",
    "Home",
    "End",
    "PageUp",
    "PageDown",
    "PPage",
    "NPage",
    "IC",
    "DC",
    "Insert",
    "Delete",
    *(f"F{n}" for n in range(1, 13)),
}
MODIFIED_KEY = re.compile(r"^(?:[CMS]-)+(?:[\x21-\x7e]|" + "|".join(sorted(NAMED_KEYS)) + r")$")


# Filled in by become_driver(): the user's uid, home and environment.
USER_UID = None
USER_GID = None
USER_HOME = None
USER_ENV = None


def become_driver():
    """Keep root's effective ids, take the user's as real ids, and become non-dumpable.

    Real ids are what ``posix_spawn(resetids=True)`` gives a child as its effective ids, and
    exec makes them its saved ids too: every tmux client runs as the user with no way back to
    root, started by a vfork (a fork of a Python process costs a millisecond more per step).
    The price: the user may signal this process (killing it ends the episode as a lost
    sandbox); it still cannot trace it, read its memory or reach its file descriptors.
    """
    global USER_UID, USER_GID, USER_HOME, USER_ENV, SOCKET, STATE_FILE
    account = pwd.getpwnam(USER)
    os.setgroups([])
    os.setresgid(account.pw_gid, 0, 0)
    os.setresuid(account.pw_uid, 0, 0)
    runtime.forbid_inspection()
    USER_UID, USER_GID, USER_HOME = account.pw_uid, account.pw_gid, account.pw_dir
    SOCKET = SOCKET.format(uid=USER_UID)
    STATE_FILE = STATE_FILE.format(uid=USER_UID)
    # The tmux server passes its environment on to the shell: the user's, not the driver's,
    # and nothing of the harness in it.
    env = {
        key: value for key, value in os.environ.items() if not runtime.harness_variable(key, value)
    }
    env.update(HOME=USER_HOME, USER=USER, LOGNAME=USER, SHELL=account.pw_shell or "/bin/bash")
    env.setdefault("TERM", "xterm-256color")
    # /home/user and /tmp are folders of the sandbox's own disk: without this, git outside a
    # repository says "Stopping at filesystem boundary", which no ordinary machine says there.
    env["GIT_DISCOVERY_ACROSS_FILESYSTEM"] = "1"
    USER_ENV = env
    os.chdir(USER_HOME)


def in_view(argv, cwd):
    """``argv`` run as the user inside the agent's view (unchanged when there is none).

    nsenter (as root) enters the view's PID, mount, cgroup and time namespaces, and setpriv then
    becomes the user for good, so the process and its children are the agent's kind. The
    working folder is named through the init's root: nsenter (util-linux 2.38) opens it
    before entering, and a folder of our own mounts is unreachable from the view's root.
    Last, ``setarch -R`` turns address-space randomization off for the process and all it
    starts (the sandbox's seccomp profile allows it: sandboxes/seccomp.py), so what a process
    measures of itself (``ps``'s RSS) is the same in every run of an episode.
    """
    pid = VIEW_PID
    if pid is None:
        return argv, True
    enter = ["nsenter", "-t", str(pid), "-p", "-m", "-C", "-T", f"--wd=/proc/{pid}/root{cwd}", "--"]
    become = ["setpriv", f"--reuid={USER_UID}", f"--regid={USER_GID}", "--init-groups", "--"]
    return [*enter, *become, *FIXED_LAYOUT, *argv], False


FIXED_LAYOUT = ["setarch", "-R", "--"]
"""Runs a command without address-space randomization (util-linux; nothing of it stays)."""


def outer_pid(inner):
    """Return our pid of the view's process ``inner`` (the pid its own namespace knows)."""
    if VIEW_PID is None:
        return inner
    # The view is the only PID namespace below ours (a user's /proc/<pid>/ns is not ours to
    # read), so a second pid in NSpid is a pid of the view.
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as handle:
                ids = next((line.split()[1:] for line in handle if line.startswith("NSpid:")), [])
            if len(ids) == 2 and int(ids[1]) == inner:
                return int(entry)
        except (OSError, ValueError):
            continue
    raise RuntimeError(f"no process {inner} in the agent's view")


VIEW_PID_FILE = "/dev/shm/view-init.pid"
"""Where the view's setup leaves its init's pid (sandboxes/view.py PID_FILE), root's alone."""
VIEW_PID = None


def spawn(args, stdout, as_user=True, raw=False):
    """Start ``tmux -S SOCKET args`` as the user; return its pid and its stderr's read end.

    The client gets /dev/null as stdin, ``stdout`` as stdout, and no other descriptor of ours
    (ours are close-on-exec; our stdin and stdout are the host's channel). ``raw``: ``args``
    is the whole command line; ``as_user=False``: it keeps root (it becomes the user itself).
    """
    err_read, err_write = os.pipe()
    try:
        pid = os.posix_spawn(
            "/usr/bin/" + args[0] if raw else TMUX,
            list(args) if raw else ["tmux", "-S", SOCKET, *args],
            USER_ENV,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, stdout, 1),
                (os.POSIX_SPAWN_DUP2, err_write, 2),
            ],
            resetids=as_user,
        )
    except BaseException:
        os.close(err_read)
        raise
    finally:
        os.close(err_write)
    return pid, err_read


def _reap(pid, stderr_fd, what):
    """Wait for a finished client and raise with its message if it failed."""
    with os.fdopen(stderr_fd, "rb") as stderr:
        message = stderr.read().decode(errors="replace").strip()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"tmux {what} failed: {message or f'exit status {code}'}")


def is_key_name(item):
    """Return True when ``item`` names a key (``Enter``, ``C-c``) rather than text to type."""
    return item in NAMED_KEYS or bool(MODIFIED_KEY.match(item))


def tmux(*args):
    """Run one tmux client invocation as the user and return its stdout."""
    out_read, out_write = os.pipe()
    try:
        pid, err_read = spawn(args, out_write)
    except BaseException:
        os.close(out_read)
        raise
    finally:
        os.close(out_write)
    with os.fdopen(out_read, "rb") as out:
        output = out.read()
    _reap(pid, err_read, args[0])
    return output.decode("utf-8", errors="replace")


def _literal_arg(text):
    # tmux ends a command at an argument ending in ';' unless it is written '\;'.
    return text[:-1] + "\\;" if text.endswith(";") else text


def _chunks(text):
    """Split text into pieces of at most CHUNK bytes of UTF-8, never inside a character."""
    pieces, piece, size = [], [], 0
    for char in text:
        width = len(char.encode())
        if size + width > CHUNK:
            pieces.append("".join(piece))
            piece, size = [], 0
        piece.append(char)
        size += width
    pieces.append("".join(piece))
    return pieces


def send_keys(keys):
    """Send keys in as few tmux invocations as the message size limit allows.

    The last batch is returned unsent, for the caller to send when it is ready to wait.
    """
    batch, size = [], 0
    for item in keys:
        key = is_key_name(item)
        for piece in [item] if key else _chunks(item):
            command = ["send-keys", "-t", SESSION]
            command += ["--", piece] if key else ["-l", "--", _literal_arg(piece)]
            width = len(piece.encode())
            if batch and size + width > CHUNK:
                tmux(*batch)
                batch, size = [], 0
            batch += ([";"] if batch else []) + command
            size += width
    return batch


def read_state():
    """Return (exit_code, shell_pid, seq, cwd) written by the prompt hook, or None.

    The file is the agent's to write: a link, a FIFO or another user's file is ignored.
    """
    try:
        fd = os.open(STATE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != USER_UID:
            return None
        raw = os.read(fd, STATE_MAX_BYTES).decode("utf-8", errors="replace")
        rc, pid, seq, cwd = raw.rstrip("\n").split("\t", 3)
        return int(rc), int(pid), int(seq), cwd
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _proc_stat(pid):
    with open(f"/proc/{pid}/stat") as handle:
        raw = handle.read()
    # The command name may contain spaces; fields after the closing parenthesis are fixed.
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    return name, raw[raw.rindex(")") + 2 :].split()


def _group_activity(pgid):
    """Return what changes while a process group works: its members and their CPU time.

    Every member counts, not only the leader: in ``yes | head`` the leader may sit blocked
    while the others run. CPU is the scheduler's nanosecond count (``schedstat``), plus the
    clock ticks of children already reaped, so a short burst is seen too.
    """
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            _, fields = _proc_stat(entry)
            if int(fields[2]) != pgid:
                continue
            with open(f"/proc/{entry}/schedstat") as handle:
                running_ns = int(handle.read().split()[0])
            reaped = int(fields[13]) + int(fields[14])
        except (OSError, ValueError, IndexError):
            continue  # gone while we looked
        members.append((int(entry), running_ns, reaped))
    return tuple(sorted(members))


class _UserFsIds:
    """Use the user's ids for file access while inside (``setfsuid``/``setfsgid``).

    /proc/<pid>/syscall and /proc/<pid>/fd of the user's processes are open to a process
    whose file-system ids are theirs (the kernel's ptrace read check); the driver has no
    CAP_SYS_PTRACE, and root's ids alone do not pass it.
    """

    libc = None

    def __enter__(self):
        if _UserFsIds.libc is None:
            _UserFsIds.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.setfsgid(USER_GID)
        self.libc.setfsuid(USER_UID)
        return self

    def __exit__(self, *exc):
        self.libc.setfsuid(0)
        self.libc.setfsgid(0)


def _is_terminal(pid, fd):
    """Whether the process's descriptor ``fd`` is a terminal (a pty, /dev/tty, a console)."""
    try:
        info = os.stat(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return False
    return stat.S_ISCHR(info.st_mode) and os.major(info.st_rdev) in TERMINAL_MAJORS


def _waits_on_terminal(pid):
    """Whether a sleeping process is blocked reading (or polling) a terminal; None: unknown.

    The syscall it sleeps in (/proc/<pid>/syscall) says what it waits for: a read of a
    terminal descriptor (``read``, bash's ``read``, less, cat), or a select over descriptors
    that include one (vim, the Python REPL, top, readline), or a poll while holding one.
    """
    with _UserFsIds():
        try:
            with open(f"/proc/{pid}/syscall") as handle:
                fields = handle.read().split()
        except PermissionError:
            return None  # not the user's to inspect (a set-user-id program)
        except OSError:
            return False  # gone
        if not fields or fields[0] == "running" or not fields[0].lstrip("-").isdigit():
            return False
        number = int(fields[0])
        args = [int(value, 16) for value in fields[1:7]]
        if number in SYSCALLS["read"]:
            return _is_terminal(pid, args[0])
        if number in SYSCALLS["select"]:
            return any(_is_terminal(pid, fd) for fd in range(min(args[0], 1024)))
        if number in SYSCALLS["poll"]:
            try:
                fds = [int(fd) for fd in os.listdir(f"/proc/{pid}/fd")]
            except OSError:
                return False
            return any(_is_terminal(pid, fd) for fd in fds)
        return False


def job_waits_for_input(pgid):
    """Whether the foreground job waits for the terminal: True, False, or None if unknown.

    True when every live process of the group sleeps and at least one of them sleeps reading
    the terminal (``yes | less``: yes blocked on the full pipe, less reading the keyboard).
    False when one runs or waits on the disk, or when all sleep on something else (a timer,
    a pipe, a child): the job is still at work however quiet it is.
    """
    readers, unknown, members = 0, 0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            _, fields = _proc_stat(entry)
        except (OSError, ValueError):
            continue
        if len(fields) < 3 or int(fields[2]) != pgid or fields[0] in ("Z", "X", "x"):
            continue
        members += 1
        if fields[0] != "S":
            return False  # running (R), in the disk (D), stopped or traced
        verdict = _waits_on_terminal(int(entry))
        readers += verdict is True
        unknown += verdict is None
    if readers:
        return True
    return None if unknown or not members else False


def foreground(shell_pid):
    """Return (name, pgid, is_shell) of the pane's foreground process group, or None."""
    try:
        _, fields = _proc_stat(shell_pid)
        tpgid = int(fields[5])
        if tpgid <= 0 or tpgid == int(fields[2]):
            # The shell itself: it may still be busy reading a long line typed ahead.
            return "bash", int(fields[2]), True
    except (OSError, ValueError, IndexError):
        return None
    try:
        name, _ = _proc_stat(tpgid)
    except (OSError, ValueError, IndexError):
        # The group's leader is gone (``seq 200 | less``: seq has exited): name a live member.
        members = _group_activity(tpgid)
        if not members:
            return None
        try:
            name, _ = _proc_stat(members[-1][0])
        except (OSError, ValueError, IndexError):
            return None
    return name, tpgid, False


def program_name(shell_pid):
    """Return the name of the program in the foreground, or None when it is the shell."""
    fg = foreground(shell_pid)
    return fg[0] if fg and not fg[2] else None


def pane_pid():
    """Return the pid (ours, not the view's) of the shell in the pane."""
    return outer_pid(int(tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip()))


def start_server(width, height, cwd):
    """Start the tmux server with the shell in its one pane, inside the agent's view.

    Its command line is what a person would type: the server is the first client's child and
    keeps its arguments (``tmux new-session -d -x 160 -y 40 bash``), on tmux's default socket.
    """
    if VIEW_PID is None:
        # No view (an SSH host, an older image): an ordinary client as the user.
        tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-c", cwd or USER_HOME,
             "bash")  # fmt: skip
        return
    argv, as_user = in_view(
        ["tmux", "new-session", "-d", "-x", str(width), "-y", str(height), "bash"],
        cwd or USER_HOME,
    )
    out_read, out_write = os.pipe()
    try:
        pid, err_read = spawn(argv, out_write, as_user=as_user, raw=True)
    finally:
        os.close(out_write)
    os.close(out_read)
    _reap(pid, err_read, "new-session")


CAPTURE = (
    "display-message", "-p", "-t", SESSION,
    "#{history_size} #{cursor_x} #{cursor_y} #{pane_dead} #{pane_width} #{pane_height}",
    ";", "capture-pane", "-p", "-e", "-t", SESSION, "-S", "-", "-E", "-1",
    ";", "display-message", "-p", "-t", SESSION, SPLIT,
    ";", "capture-pane", "-p", "-e", "-t", SESSION,
    # In the same batch: the server runs it without reading the pane in between, so no line
    # can scroll into the history after it was read and before it was cleared.
    ";", "clear-history", "-t", SESSION,
)  # fmt: skip

# While waiting: the screen, and how much history it has, so output that leaves the screen
# as it was (`yes` prints the same line forever) still counts as a change.
PEEK = (
    "display-message", "-p", "-t", SESSION, "#{history_size} #{history_bytes}",
    ";", "capture-pane", "-p", "-t", SESSION,
)  # fmt: skip


def capture(wait_for_prompt_line):
    """Capture screen, new scrollback, cursor and pane size, and clear the scrollback read."""
    histories = []
    for _ in range(50):
        head, rest = tmux(*CAPTURE).split("\n", 1)
        history, screen = rest.split(SPLIT + "\n", 1)
        history_size, cursor_x, cursor_y, dead, columns, rows = (int(v or 0) for v in head.split())
        if history_size:
            histories.append(history)
        lines = screen.split("\n")
        cursor_line = ANSI.sub("", lines[cursor_y]) if cursor_y < len(lines) else ""
        # capture-pane trims trailing blanks, so pad the line back out to the cursor.
        at_prompt = cursor_line.ljust(cursor_x)[:cursor_x].endswith(("$ ", "# "))
        # The hook signals just before bash draws PS1; wait the few ms until it is drawn.
        if not wait_for_prompt_line or at_prompt or dead:
            break
        time.sleep(0.002)
    return {
        "screen": screen,
        "scrollback": "".join(histories),
        "cursor": [cursor_x, cursor_y],
        "columns": columns,
        "rows": rows,
        "exited": bool(dead),
        "at_prompt": at_prompt and not dead,
    }


def observe(shell_pid, returned, timed_out, timings):
    """Build the observation reply; ``returned`` says the prompt came back in this step."""
    started = time.monotonic()
    state = read_state()
    reply = capture(wait_for_prompt_line=returned)
    program = program_name(shell_pid)
    at_prompt = reply.pop("at_prompt")
    prompt = returned or (at_prompt and program is None)
    reply.update(
        # At the prompt: it came back during the step, or the shell sits idle at it.
        prompt=prompt,
        # A command finished during this step (its exit status is news, not history).
        completed=returned,
        timed_out=timed_out,
        exit_code=state[0] if state and prompt else None,
        cwd=state[3] if state else None,
        foreground=program,
    )
    timings["capture_s"] = round(time.monotonic() - started, 6)
    reply["timings"] = timings
    return reply


class Listener:
    """A tmux client that runs the commands ``first``, then waits for the prompt signal.

    It exits when the prompt hook signals the channel (or at once if ``first`` fails).
    """

    def __init__(self, first=()):
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            command = [*first, *([";"] if first else []), "wait-for", CHANNEL]
            self.pid, self._stderr = spawn(command, null)
        finally:
            os.close(null)
        # A pidfd becomes readable exactly when the process exits; Popen.wait(timeout) polls
        # with growing sleeps, which added milliseconds to every step.
        self._pidfd = os.pidfd_open(self.pid)
        self._running = True

    def exited_within(self, timeout):
        """Return True if the client ended within ``timeout`` s; raise if it failed."""
        ready, _, _ = select.select([self._pidfd], [], [], timeout)
        if not ready:
            return False
        self._running = False
        os.close(self._pidfd)
        _reap(self.pid, self._stderr, "wait-for")
        return True

    def stop(self):
        """End the client if it is still waiting."""
        if self._running:
            self._running = False
            os.kill(self.pid, signal.SIGKILL)
            os.close(self._pidfd)
            os.close(self._stderr)
            os.waitpid(self.pid, 0)


def wait_for_completion(shell_pid, before, waiter, timeout, quiet, min_wait, settle=SETTLE_S):
    """Wait for a new prompt, or a foreground job waiting for terminal input, or the timeout.

    ``waiter`` is the :class:`Listener` started with the step's keys.

    Returns (prompt_returned, timed_out). A job that has not given the prompt back ends the
    step only when the process state says it waits for the terminal (see
    :func:`job_waits_for_input`: an editor, a pager, a REPL, ``read``, a command reading
    stdin) and the pane has not changed for ``settle`` seconds; a job that sleeps, computes
    or reads a pipe keeps the step going to the timeout, however silent it is. Only a job
    whose state cannot be read (a set-user-id program) falls back to silence: ``quiet``
    seconds with the same screen, no new history and no CPU use. ``min_wait`` keeps a
    ``wait`` action from ending early. At the timeout, a step counts as timed out when its
    job was neither waiting for input nor, for a ``wait`` action, silent.
    """
    before_key = (before or (None,) * 4)[1:3]

    def prompt_returned():
        state = read_state()
        return state is not None and state[1:3] != before_key

    started = time.monotonic()
    last_job, last_pane, last_change, pane_change = None, None, started, started
    try:
        while True:
            if waiter.exited_within(POLL_S):
                if prompt_returned():
                    return True, False
                # A signal left over from an earlier prompt: listen again.
                waiter = Listener()
                continue
            # The signal is the fast path; the state file is the truth. A listener killed at
            # the end of an earlier step can swallow a signal, so look at the file as well.
            if prompt_returned():
                return True, False
            now = time.monotonic()
            fg = foreground(shell_pid)
            job = fg and (fg[1], _group_activity(fg[1]))
            if job != last_job:
                last_job, last_change = job, now
            waiting = job_waits_for_input(fg[1]) if fg else None
            if waiting is not False:
                # Waiting for input, or not knowable: both need the pane to have settled
                # (output written just before the read may still be on its way to tmux).
                pane = tmux(*PEEK)
                if pane != last_pane:
                    last_pane, last_change, pane_change = pane, now, now
            quiet_for = now - last_change
            waited_enough = now - started >= min_wait
            if waiting and now - pane_change >= settle and waited_enough:
                return False, False
            if waiting is None and quiet_for >= quiet and waited_enough:
                return False, False
            if now - started >= timeout:
                if min_wait >= timeout:
                    # A wait action ran its course: a timeout only if the job still worked.
                    return False, quiet_for < quiet and not waiting
                return False, not waiting
    finally:
        waiter.stop()


def handle(request, session):
    """Execute one request and return its reply."""
    op = request["op"]
    if op == "start":
        start_server(request.get("width", 160), request.get("height", 40), request.get("cwd"))
        session["shell_pid"] = pane_pid()
        started = time.monotonic()
        prompt, timed_out = wait_for_completion(session["shell_pid"], None, Listener(), 10, 10, 0)
        timings = {"send_s": 0.0, "wait_s": round(time.monotonic() - started, 6)}
        return observe(session["shell_pid"], prompt, timed_out, timings)
    if op == "step":
        before = read_state()
        started = time.monotonic()
        last = send_keys(request.get("keys", []))
        if last:
            # Sent and taken by the server before the listening starts, so that the time a
            # job has been seen waiting for input counts from keys it has really received (a
            # shell that has not yet read the command line also sleeps reading the terminal).
            # A prompt signalled in between is still seen: the state file is read as well.
            tmux(*last)
        sent = time.monotonic()
        waiter = Listener()
        prompt, timed_out = wait_for_completion(
            session["shell_pid"],
            before,
            waiter,
            float(request.get("timeout", 30)),
            float(request.get("quiet", 0.5)),
            float(request.get("min_wait", 0)),
            float(request.get("settle", SETTLE_S)),
        )
        timings = {
            "send_s": round(sent - started, 6),
            "wait_s": round(time.monotonic() - sent, 6),
        }
        return observe(session["shell_pid"], prompt, timed_out, timings)
    if op == "observe":
        return observe(session["shell_pid"], returned=False, timed_out=False, timings={})
    raise ValueError(f"unknown op {op!r}")


def main():
    """Serve requests from stdin until it closes or the host goes.

    A step during which the process limit refused forks (a fork bomb) is reported as such
    (``forks_refused``, and its error says so): the sandbox cannot be trusted to run the next.
    """
    session = {}
    # The replies go to stdout itself: no child of the driver gets it (spawn gives them none).
    runtime.serve(lambda request: handle(request, session), 1, error_key="error", count_forks=True)


if __name__ == "__main__":
    become_driver()
    # The view's init, as sandboxes/view.py (PID_FILE) left it; none without a view.
    if os.path.exists(VIEW_PID_FILE):
        with open(VIEW_PID_FILE) as pid_file:
            VIEW_PID = int(pid_file.read())
    if sys.argv[1:] == ["--observe"]:
        print(json.dumps(observe(pane_pid(), returned=False, timed_out=False, timings={})))
    else:
        main()
