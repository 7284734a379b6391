"""Run the swe tools inside the sandbox; one JSON request and reply per line.

Runs with the container's own Python 3 (standard library only) for the lifetime of an episode,
so a step costs one round trip over the exec stream instead of one ``docker exec`` per tool.

Requests (stdin) and replies (stdout), one JSON object per line; a reply echoes its request's
``id``, so the host can tell the reply to its request from any other line (the request loop
and the process-limit count are the sandboxes' driver_runtime.py, copied beside this file):
  {"id": "...", "op": "tool", "tool": "read_file", "arguments": {...}, "timeout": 30}
      -> observation
  {"id": "...", "op": "observe", "orientation": true} -> observation (no tool ran)
  {"id": "...", "op": "apply_patch", "patch": "<unified diff>", "timeout": 60}
      -> {"files": [...]} (the patch is folded into the repository's one commit)
A request the driver could not serve gets {"id": "...", "driver_error": "..."}.
``python3 swe_driver.py --observe`` prints one observation and exits (the host's last look
into a sandbox whose driver stopped answering).

Observation: {"tool", "output" (stdout and stderr interleaved, as the agent sees them),
"exit_code" (run_shell_command and run_tests; None for the other tools and on a timeout),
"timed_out", "timeout_s", "error" (a tool-level error such as "old string not found"),
"git_status" (``git status --porcelain``), "git_diff_stat" (``git diff --stat``), "wall_s"
(the tool's own wall time), "output_dropped_bytes" (output past CAPTURE_BYTES not kept),
"forks_refused"}.

Isolation: the driver runs as root, is not dumpable, and gives none of its file descriptors to
a child, so nothing the agent runs can read its requests, write a reply or signal it. Every
tool runs in a child that has dropped to the unprivileged ``user`` before touching anything:
shell commands and the test runner are executed as that user in a process group of their own
(killed whole at the timeout); the file tools run their file operations in a forked child
that dropped privileges first, so they can read and write exactly what the user can.
"""

import collections
import contextlib
import ctypes
import fcntl
import json
import os
import pwd
import re
import select
import shlex
import signal
import stat
import subprocess
import sys
import time

import driver_runtime as runtime

USER = "user"
REPO = "/home/user/repo"
VENV_BIN = "/opt/swe-venv/bin"
RUN_TESTS = "/opt/worldtrace/run_tests.py"
REPO_INFO = "/opt/worldtrace/repo.json"
F_SETPIPE_SZ = 1031

FILE_HIT = re.compile(r"^(.+?):\d+:")
"""A hit of a search over several files: ``path:N:text``."""
SINGLE_FILE_HIT = re.compile(r"^\d+:")
CAPTURE_BYTES = 1 << 20
"""Most output bytes kept per tool call: the first and the last half; the middle is counted."""
EXIT_GRACE_S = 1.0
"""How long output is still read after a command exits while something it left holds the pipe."""
GIT_TIMEOUT_S = 10.0
"""Limit of each ``git`` run that reads the working tree's state after a tool."""
READ_LIMIT_BYTES = 8 << 20
"""Largest file read_file and str_replace open."""
BINARY_PROBE_BYTES = 8192
SEARCH_MAX_LINES = 200
SEARCH_MAX_LINE_CHARS = 500
CONTEXT_LINES = 3
"""Lines shown before and after an edit made by str_replace."""

ACCOUNT = pwd.getpwnam(USER)
GROUPS = os.getgrouplist(USER, ACCOUNT.pw_gid)
# The image's environment (its PATH with the venv first, its fixed git dates and hash seed), as
# the user: what a login in the sandbox would have, without the harness's variables.
USER_ENV = {
    **{key: value for key, value in os.environ.items() if not runtime.harness_variable(key, value)},
    # /home/user and /tmp are folders of the sandbox's own disk: without this, git outside a
    # repository says "Stopping at filesystem boundary", which no ordinary machine says there.
    "GIT_DISCOVERY_ACROSS_FILESYSTEM": "1",
    "HOME": ACCOUNT.pw_dir,
    "USER": USER,
    "LOGNAME": USER,
    "SHELL": "/bin/bash",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
}
if not USER_ENV.get("PATH", "").startswith(VENV_BIN + ":"):
    USER_ENV["PATH"] = f"{VENV_BIN}:{USER_ENV.get('PATH') or '/usr/local/bin:/usr/bin:/bin'}"
GIT = ["git", "-c", "safe.directory=*", "--no-optional-locks"]
# Where tools run: the repository, or, if the agent removed it, the home folder (then /).
WORKDIRS = (REPO, ACCOUNT.pw_dir, "/")


CLONE_NEWNS = 0x00020000
VIEW_PID_FILE = "/dev/shm/view-init.pid"
"""Where the view's setup leaves its init's pid (sandboxes/view.py PID_FILE), root's alone."""
VIEW_PID = None
"""The agent's view's init (sandboxes/view.py), found at start; None in an image without one."""


def in_view(argv, cwd):
    """``argv`` run as the user inside the agent's view, or None when there is no view.

    nsenter (as root) enters the view's PID, mount, cgroup and time namespaces and setpriv
    then becomes the user for good: the agent's commands see its processes only, under its init.
    The working folder is named through the init's root: nsenter (util-linux 2.38) opens it
    before entering, and a folder of our own mounts is unreachable from the view's root.
    """
    if VIEW_PID is None:
        return None
    enter = [
        "nsenter",
        "-t",
        str(VIEW_PID),
        "-p",
        "-m",
        "-C",
        "-T",
        f"--wd=/proc/{VIEW_PID}/root{cwd}",
        "--",
    ]
    become = [
        "setpriv",
        f"--reuid={ACCOUNT.pw_uid}",
        f"--regid={ACCOUNT.pw_gid}",
        f"--groups={','.join(str(g) for g in GROUPS)}",
        "--",
    ]
    return [*enter, *become, *argv]


def enter_view_files():
    """Join the view's mount namespace (in a child, as root): the files the agent sees."""
    if VIEW_PID is None:
        return
    fd = os.open(f"/proc/{VIEW_PID}/ns/mnt", os.O_RDONLY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns into the agent's view failed")
    finally:
        os.close(fd)


def drop_privileges():
    """Become ``user`` for good (in a child): groups, then gid, then uid."""
    os.setgroups(GROUPS)
    os.setgid(ACCOUNT.pw_gid)
    os.setuid(ACCOUNT.pw_uid)


class Capture:
    """Output kept within CAPTURE_BYTES: the first half, the last half, and a count between."""

    def __init__(self):
        self.head = bytearray()
        self.tail = collections.deque()
        self.tail_size = 0
        self.dropped = 0

    def add(self, chunk):
        """Keep ``chunk`` (or the part that fits)."""
        half = CAPTURE_BYTES // 2
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        excess = self.tail_size - half
        while excess > 0:
            first = self.tail[0]
            cut = min(len(first), excess)
            if cut == len(first):
                self.tail.popleft()
            else:
                self.tail[0] = first[cut:]
            self.tail_size -= cut
            self.dropped += cut
            excess -= cut

    def text(self):
        """The kept output as text, with a marker where bytes were not kept."""
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = b"".join(self.tail).decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[... {self.dropped} bytes of output not kept ...]\n{tail}"
        return head + tail


def _kill_group(pgid):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _drain(read_fd, capture, until):
    """Read what is left in the pipe until EOF or ``until`` (monotonic time)."""
    while True:
        remaining = until - time.monotonic()
        if remaining <= 0:
            return
        ready, _, _ = select.select([read_fd], [], [], remaining)
        if not ready:
            return
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return
        capture.add(chunk)


def run_as_user(argv, timeout, stdin_data=None, env=None, viewed=False):
    """Run ``argv`` as the user in the repository, in a process group of its own.

    Stdout and stderr share one pipe (interleaved as written). Returns
    (capture, exit_code, timed_out): see :func:`collect`. ``viewed``: inside the agent's
    view (the agent's own commands), else beside it (git, grep and the test runner, which the
    agent never sees running).
    """
    return collect(*start_as_user(argv, stdin_data, env, viewed), timeout)


def start_as_user(argv, stdin_data=None, env=None, viewed=False):
    """Start ``argv`` as the user in the repository in a new process group.

    Returns the process and the read end of the one pipe its stdout and stderr share.
    """
    read_fd, write_fd = os.pipe()
    stdin = subprocess.DEVNULL
    if stdin_data is not None:
        stdin, feed = os.pipe()
        fcntl.fcntl(feed, F_SETPIPE_SZ, max(len(stdin_data), 65536))
        os.write(feed, stdin_data)
        os.close(feed)
    try:
        for folder in WORKDIRS:
            viewed_argv = in_view(argv, folder) if viewed else None
            # In the view, setpriv becomes the user (nsenter needs root to enter).
            ids = {} if viewed_argv else {
                "user": ACCOUNT.pw_uid, "group": ACCOUNT.pw_gid, "extra_groups": GROUPS
            }  # fmt: skip
            try:
                process = subprocess.Popen(
                    viewed_argv or argv,
                    cwd=folder,
                    env={**USER_ENV, **(env or {})},
                    stdin=stdin,
                    stdout=write_fd,
                    stderr=write_fd,
                    process_group=0,
                    close_fds=True,
                    **ids,
                )
                break
            except (FileNotFoundError, NotADirectoryError) as error:
                if error.filename != folder or folder == WORKDIRS[-1]:
                    raise
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
        if stdin_data is not None:
            os.close(stdin)
    return process, read_fd


def collect(process, read_fd, timeout):
    """Read a started process's output until it ends; return (capture, exit_code, timed_out).

    At the timeout the whole process group is killed and exit_code is None. A command that
    exits while something it started still holds the pipe gets EXIT_GRACE_S more for output;
    then its group is killed and the pipe abandoned, so nothing the command leaves behind can
    hold the driver.
    """
    capture = Capture()
    pidfd = os.pidfd_open(process.pid)
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        exited_at = None
        eof = False
        while not (eof and exited_at is not None):
            now = time.monotonic()
            limit = deadline if exited_at is None else min(deadline, exited_at + EXIT_GRACE_S)
            if now >= limit:
                timed_out = exited_at is None
                _kill_group(process.pid)
                _drain(read_fd, capture, time.monotonic() + 0.2)
                break
            watched = ([] if eof else [read_fd]) + ([pidfd] if exited_at is None else [])
            ready, _, _ = select.select(watched, [], [], limit - now)
            if read_fd in ready:
                chunk = os.read(read_fd, 65536)
                if chunk:
                    capture.add(chunk)
                else:
                    eof = True
            if pidfd in ready:
                exited_at = time.monotonic()
        process.wait()
    finally:
        os.close(pidfd)
        os.close(read_fd)
        if process.returncode is None:
            _kill_group(process.pid)
            process.wait()
    code = process.returncode
    exit_code = None if timed_out else (128 - code if code < 0 else code)
    return capture, exit_code, timed_out


def in_user_child(function, args, timeout):
    """Run ``function(*args)`` in a forked child that became the user; return its dict.

    The child answers through a pipe with one JSON object; it is killed at the timeout.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(read_fd)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            enter_view_files()
            drop_privileges()
            for folder in WORKDIRS:
                try:
                    os.chdir(folder)
                    break
                except OSError:
                    continue
            data = json.dumps(function(*args)).encode()
            while data:
                data = data[os.write(write_fd, data) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([read_fd], [], [], remaining)
            if ready:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return {"output": "", "error": f"timed out after {timeout:g}s", "timed_out": True}
    if os.waitstatus_to_exitcode(status) != 0 or not chunks:
        raise RuntimeError(f"the tool's child failed (status {status})")
    return json.loads(b"".join(chunks))


# --- the file tools (run in the user's child) ---------------------------------------------------


def _problem(path, error):
    return f"{path}: {error.strerror or error}"


def _open_regular(path, flags):
    """Open a regular file without blocking on a FIFO; return (fd, size) or raise OSError."""
    fd = os.open(path, flags | os.O_NONBLOCK)
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise IsADirectoryError(21, "Is a directory")
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(0, "Not a regular file")
    return fd, info.st_size


def _read_all(fd, size):
    if size > READ_LIMIT_BYTES:
        raise OSError(0, f"File too large ({size} bytes; at most {READ_LIMIT_BYTES} are read)")
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if sum(map(len, chunks)) > READ_LIMIT_BYTES:
            raise OSError(0, f"File too large (more than {READ_LIMIT_BYTES} bytes)")


def _split_lines(text):
    """Lines as ``cat -n`` counts them: split at newlines, no empty line after a final one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _numbered(lines, first):
    return "".join(f"{number:6}\t{line}\n" for number, line in enumerate(lines, first))


def _read_regular(path):
    """The bytes of the regular file at ``path`` (OSError for anything else)."""
    fd, size = _open_regular(path, os.O_RDONLY)
    try:
        return _read_all(fd, size)
    finally:
        os.close(fd)


def read_file(path, start_line, end_line):
    """The file's lines start_line..end_line, numbered like ``cat -n``."""
    try:
        data = _read_regular(path)
    except IsADirectoryError:
        return {"output": "", "error": f"{path}: Is a directory (use list_dir)"}
    except OSError as error:
        return {"output": "", "error": _problem(path, error)}
    if b"\x00" in data[:BINARY_PROBE_BYTES]:
        return {"output": "", "error": f"{path}: binary file ({len(data)} bytes), not shown"}
    lines = _split_lines(data.decode("utf-8", errors="replace"))
    first = start_line or 1
    if first > max(len(lines), 1):
        return {
            "output": "",
            "error": f"{path}: start_line {first} is past the end of the file ({len(lines)} lines)",
        }
    last = min(end_line or len(lines), len(lines))
    return {"output": _numbered(lines[first - 1 : last], first), "error": None}


def write_file(path, content):
    """Create or overwrite ``path`` with ``content``, making its folders."""
    data = content.encode("utf-8")
    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, 0o666)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(0, "Not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as error:
        return {"output": "", "error": _problem(path, error)}
    return {"output": f"Wrote {len(data)} bytes to {path}\n", "error": None}


def str_replace(path, old, new):
    """Replace the one occurrence of ``old``; an error, file untouched, for none or several."""
    try:
        data = _read_regular(path)
    except OSError as error:
        return {"output": "", "error": _problem(path, error)}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"output": "", "error": f"{path}: not UTF-8 text, cannot edit"}
    count = text.count(old)
    if count == 0:
        return {"output": "", "error": f"old string not found in {path}"}
    if count > 1:
        return {
            "output": "",
            "error": f"old string occurs {count} times in {path}; it must occur exactly once "
            "(include more of the surrounding text)",
        }
    at = text.index(old)
    edited = text[:at] + new + text[at + len(old) :]
    try:
        # In place: the file keeps its inode, owner and mode.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NONBLOCK)
        try:
            view = memoryview(edited.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as error:
        return {"output": "", "error": _problem(path, error)}
    lines = _split_lines(edited)
    first_edited = text.count("\n", 0, at) + 1
    last_edited = first_edited + new.count("\n")
    first = max(1, first_edited - CONTEXT_LINES)
    last = min(len(lines), last_edited + CONTEXT_LINES)
    snippet = _numbered(lines[first - 1 : last], first)
    return {"output": f"Edited {path}:\n{snippet}", "error": None}


def list_dir(path):
    """The folder's entries, sorted, folders with a trailing ``/``, ``.git`` hidden."""
    try:
        with os.scandir(path) as entries:
            names = []
            for entry in entries:
                if entry.name == ".git":
                    continue
                name = os.fsencode(entry.name).decode("utf-8", errors="replace")
                try:
                    folder = entry.is_dir()
                except OSError:
                    folder = False
                names.append(name + "/" if folder else name)
    except OSError as error:
        return {"output": "", "error": _problem(path, error)}
    names.sort()
    return {"output": "".join(f"{name}\n" for name in names), "error": None}


def snapshot_times():
    """The (atime, mtime) in nanoseconds of every path in the repository, its .git included."""
    times = {}
    for folder, folders, files in os.walk("."):
        for name in [*folders, *files]:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            times[path] = [info.st_atime_ns, info.st_mtime_ns]
    info = os.lstat(".")
    times["."] = [info.st_atime_ns, info.st_mtime_ns]
    return {"output": times, "error": None}


def restore_times(times, reference):
    """Set every path's times back to ``times``; a new path gets the ``reference`` time.

    Every path is touched, deepest first, so that the change time (which nothing can set) of
    the patched files is one among all the others, not the newest.
    """
    for folder, folders, files in os.walk(".", topdown=False):
        for name in [*files, *folders]:
            path = os.path.join(folder, name)
            os.utime(path, ns=tuple(times.get(path, reference)), follow_symlinks=False)
    os.utime(".", ns=tuple(times["."]), follow_symlinks=False)
    return {"output": "", "error": None}


# --- tools run as processes -------------------------------------------------------------------


def search(pattern, path, glob, timeout):
    """``grep -rnIE`` as the user, capped at SEARCH_MAX_LINES lines."""
    argv = ["grep", "-rnIE", "--color=never", "--exclude-dir=.git"]
    if glob:
        argv += ["--include", glob]
    argv += ["-e", pattern, "--"]
    # With no file operand grep searches the working folder and names files without "./".
    if path != ".":
        argv.append(path)
    capture, code, timed_out = run_as_user(argv, timeout)
    if timed_out:
        return {
            "output": capture.text(),
            "error": f"timed out after {timeout:g}s",
            "timed_out": True,
        }
    lines = in_file_order(capture.text().splitlines())
    shown = [
        line if len(line) <= SEARCH_MAX_LINE_CHARS else line[:SEARCH_MAX_LINE_CHARS] + " [...]"
        for line in lines[:SEARCH_MAX_LINES]
    ]
    if len(lines) > SEARCH_MAX_LINES:
        shown.append(f"[... {len(lines) - SEARCH_MAX_LINES} more lines not shown ...]")
    output = "".join(f"{line}\n" for line in shown)
    if code == 1 and not lines:
        return {"output": "No matches found.\n", "error": None}
    if code not in (0, 1):
        messages = [line for line in lines if line.startswith("grep: ")]
        error = messages[-1][len("grep: ") :] if messages else f"grep exited {code}"
        return {"output": output, "error": error}
    return {"output": output, "error": None}


def in_file_order(lines):
    """Hits sorted by file, each file's in line order, grep's own messages last.

    ``grep -r`` walks folders in the file system's order, which differs between two fresh
    containers of the same image: the same search in the same state would print its hits in
    another order. A search of one file prints ``N:text`` lines, already in order.
    """
    if all(SINGLE_FILE_HIT.match(line) for line in lines):
        return lines

    def key(line):
        hit = FILE_HIT.match(line)
        return (0, hit.group(1)) if hit else (1, "")

    return sorted(lines, key=key)  # stable: line order within a file is kept


def run_command(argv, timeout, viewed=False):
    """A shell command or the test runner: its output, exit code and whether it timed out."""
    capture, code, timed_out = run_as_user(argv, timeout, viewed=viewed)
    return {
        "output": capture.text(),
        "exit_code": code,
        "timed_out": timed_out,
        "output_dropped_bytes": capture.dropped,
        "error": None,
    }


def git_texts(*commands):
    """The outputs of git commands run at once as the user (a failure's text is its output)."""
    started = [start_as_user([*GIT, *args]) for args in commands]
    texts = []
    for args, (process, read_fd) in zip(commands, started, strict=True):
        capture, _, timed_out = collect(process, read_fd, GIT_TIMEOUT_S)
        text = capture.text()
        if timed_out:
            text += f"[git {args[0]} timed out after {GIT_TIMEOUT_S:g}s]\n"
        texts.append(text)
    return texts


def bounded(part):
    """A file tool's result with its output kept within CAPTURE_BYTES, as a command's is."""
    data = part["output"].encode("utf-8")
    if len(data) <= CAPTURE_BYTES:
        return part
    capture = Capture()
    capture.add(data)
    return {**part, "output": capture.text(), "output_dropped_bytes": capture.dropped}


def run_tool(tool, arguments, timeout):
    """Run one tool and return its part of the observation."""
    if tool == "run_shell_command":
        return run_command(["bash", "-c", arguments["command"]], timeout, viewed=True)
    if tool == "run_tests":
        try:
            selectors = shlex.split(arguments.get("selector") or "")
        except ValueError as error:
            return {"output": "", "error": f"selector: {error}"}
        return run_command(["python3", RUN_TESTS, *selectors], timeout)
    if tool == "search":
        return search(arguments["pattern"], arguments["path"], arguments.get("glob"), timeout)
    if tool == "read_file":
        args = (arguments["path"], arguments.get("start_line"), arguments.get("end_line"))
        return bounded(in_user_child(read_file, args, timeout))
    if tool == "write_file":
        return in_user_child(write_file, (arguments["path"], arguments["content"]), timeout)
    if tool == "str_replace":
        args = (arguments["path"], arguments["old"], arguments["new"])
        return in_user_child(str_replace, args, timeout)
    if tool == "list_dir":
        return in_user_child(list_dir, (arguments["path"],), timeout)
    raise ValueError(f"unknown tool {tool!r}")


def repo_info():
    """The repository's facts from the image (name, version …), or {} if absent."""
    try:
        with open(REPO_INFO) as handle:
            info = json.load(handle)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def orientation():
    """What an agent is shown first: the repository, its git status and its top level."""
    info = repo_info()
    name = info.get("name", os.path.basename(REPO))
    version = info.get("version")
    title = f"{name} {version}" if version else name
    listing = in_user_child(list_dir, (".",), GIT_TIMEOUT_S)
    return (
        f"Repository {title} in {REPO} (a git repository).\n\n"
        f"$ git status\n{git_texts(('status',))[0]}\n"
        f"$ ls\n{listing['output'] or listing['error']}"
    )


def observation(tool, part, timeout, wall_s):
    """The reply for one tool call (or none): its part plus the working tree's state."""
    # Both at once: a step waits for the slower, not for the two in turn.
    status, diff_stat = git_texts(("status", "--porcelain"), ("diff", "--stat"))
    return {
        "tool": tool,
        "output": part.get("output", ""),
        "exit_code": part.get("exit_code"),
        "timed_out": bool(part.get("timed_out", False)),
        "timeout_s": timeout,
        "error": part.get("error"),
        "git_status": status,
        "git_diff_stat": diff_stat,
        "wall_s": round(wall_s, 6),
        "output_dropped_bytes": part.get("output_dropped_bytes", 0),
    }


def git_output(args, timeout, env=None, stdin_data=None):
    """The output of a git command that must succeed, as the user in the repository."""
    capture, code, _ = run_as_user([*GIT, *args], timeout, stdin_data, env)
    if code != 0:
        raise RuntimeError(f"git {args[0]} failed: {capture.text().strip()[-500:]}")
    return capture.text()


def read_logs():
    """The repository's reflog files (path -> text)."""
    logs = {}
    for folder, _, names in os.walk(".git/logs"):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                logs[path] = handle.read()
    return {"output": logs, "error": None}


def write_logs(logs):
    """Write reflog files back (as read_logs returned them, edited)."""
    for path, text in logs.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    return {"output": "", "error": None}


def apply_patch(patch, timeout):
    """Apply a patch as the user and fold it into the one commit, leaving no trace of it.

    ``timeout`` limits the whole. The commit keeps its message, author, committer and dates;
    the replaced commit and its objects are pruned and the reflog reads as before with the new
    commit id; every path in the repository keeps its access and modification times (new ones
    get the time of ``.git/HEAD``) and gets a new change time. So neither ``git status``, ``git
    diff``, ``git log``, ``git reflog``, ``git fsck`` nor a listing by time tells the patched
    code from the original.
    """
    deadline = time.monotonic() + timeout

    def left():
        # Every step gets what is left of the whole patch's time.
        return max(deadline - time.monotonic(), 0.1)

    data = patch.encode("utf-8")
    numstat = git_output(["apply", "--numstat", "-"], left(), stdin_data=data)
    files = [line.split("\t", 2)[2] for line in numstat.splitlines() if line.count("\t") >= 2]
    times = in_user_child(snapshot_times, (), left())["output"]
    capture, code, _ = run_as_user([*GIT, "apply", "-"], left(), data)
    if code != 0:
        raise RuntimeError(f"git apply failed: {capture.text().strip()[-500:]}")
    old = git_output(["rev-parse", "HEAD"], left()).strip()
    logs = in_user_child(read_logs, (), left())["output"]
    committer = git_output(["log", "-1", "--format=%cn%n%ce%n%cI"], left()).splitlines()
    # --amend keeps the author and the author date; the committer is set back as it was.
    env = {
        "GIT_COMMITTER_NAME": committer[0],
        "GIT_COMMITTER_EMAIL": committer[1],
        "GIT_COMMITTER_DATE": committer[2],
    }
    git_output(["commit", "--quiet", "--all", "--amend", "--no-edit", "--no-verify"], left(), env)
    git_output(["reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all"], left())
    git_output(["prune", "--expire=now"], left())
    if any(name.endswith(".pack") for name in os.listdir(f"{REPO}/.git/objects/pack")):
        # The original objects may sit in a pack, where prune does not reach them.
        git_output(["gc", "--quiet", "--prune=now"], left())
    new = git_output(["rev-parse", "HEAD"], left()).strip()
    in_user_child(
        write_logs, ({path: text.replace(old, new) for path, text in logs.items()},), left()
    )
    # New objects and reflogs get the time of the commit's own files.
    in_user_child(restore_times, (times, times["./.git/HEAD"]), left())
    return {"files": files}


def handle(request):
    """Execute one request and return its reply."""
    op = request.get("op")
    if op == "tool":
        timeout = float(request["timeout"])
        started = time.monotonic()
        part = run_tool(request["tool"], request["arguments"], timeout)
        return observation(request["tool"], part, timeout, time.monotonic() - started)
    if op == "observe":
        started = time.monotonic()
        output = orientation() if request.get("orientation") else ""
        return observation(None, {"output": output}, None, time.monotonic() - started)
    if op == "apply_patch":
        return apply_patch(request["patch"], float(request["timeout"]))
    raise ValueError(f"unknown op {op!r}")


def main():
    """Serve requests from stdin until it closes or the host goes.

    A request the driver could not serve gets ``driver_error``, which says first when the
    process limit refused forks during it (a fork bomb): the sandbox cannot be trusted.
    """
    # The replies go to stdout itself: the forked children point it at /dev/null at once.
    runtime.serve(handle, 1, error_key="driver_error", count_forks=True)


if __name__ == "__main__":
    runtime.forbid_inspection()
    # The view's init, as sandboxes/view.py (PID_FILE) left it; none without a view.
    if os.path.exists(VIEW_PID_FILE):
        with open(VIEW_PID_FILE) as pid_file:
            VIEW_PID = int(pid_file.read())
    if sys.argv[1:] == ["--observe"]:
        print(json.dumps(observation(None, {"output": ""}, None, 0.0)))
    else:
        main()
