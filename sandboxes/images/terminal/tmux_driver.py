"""Drive bash in a tmux pane from inside the sandbox; one JSON request and reply per line.

Runs with the container's own Python for the lifetime of an episode, so a step costs one
round trip over the exec stream instead of one ``docker exec`` per tmux command.

Requests (stdin) and replies (stdout), one JSON object per line:
  {"op": "start", "width": 160, "height": 40, "cwd": "/root"}  -> observation
  {"op": "step", "keys": [...], "timeout": 30, "quiet": 0.5, "min_wait": 0} -> observation
  {"op": "observe"} -> observation
Observation: screen and new scrollback (with ANSI escapes), cursor, whether the shell is at
its prompt and whether a command completed during the step, the last exit status and the cwd
from the prompt hook, the foreground program, and phase timings.
Completion is the prompt hook's ``tmux wait-for`` signal; programs that never give the prompt
back (vim, less, a REPL, a command reading stdin) end the step after ``quiet`` seconds with no
screen change and no CPU use by the foreground process.
"""

import json
import os
import re
import select
import subprocess
import sys
import time

SESSION = "wt"
STATE_FILE = "/run/.wt-state"
CHANNEL = "wt-prompt"
SPLIT = "\x1e-wt-split-\x1e"
# tmux refuses client messages over 16 KB; stay well under it per invocation.
CHUNK = 4096
POLL_S = 0.03
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# Same rule as collectors/terminal/actions.py (this file runs in the container and cannot
# import the package); tests/test_terminal_actions.py keeps the two in step.
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


def is_key_name(item):
    """Return True when ``item`` names a key (``Enter``, ``C-c``) rather than text to type."""
    return item in NAMED_KEYS or bool(MODIFIED_KEY.match(item))


def tmux(*args, check=True):
    """Run one tmux client invocation and return its stdout."""
    done = subprocess.run(["tmux", *args], capture_output=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"tmux {args[0]} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode("utf-8", errors="replace")


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
    """Send keys in as few tmux invocations as the message size limit allows."""
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
    if batch:
        tmux(*batch)


def read_state():
    """Return (exit_code, shell_pid, seq, cwd) written by the prompt hook, or None."""
    try:
        with open(STATE_FILE, encoding="utf-8", errors="replace") as handle:
            rc, pid, seq, cwd = handle.read().rstrip("\n").split("\t", 3)
        return int(rc), int(pid), int(seq), cwd
    except (OSError, ValueError):
        return None


def _proc_stat(pid):
    with open(f"/proc/{pid}/stat") as handle:
        raw = handle.read()
    # The command name may contain spaces; fields after the closing parenthesis are fixed.
    name = raw[raw.index("(") + 1 : raw.rindex(")")]
    return name, raw[raw.rindex(")") + 2 :].split()


def foreground(shell_pid):
    """Return (name, cpu_ticks, is_shell) of the pane's foreground process group, or None."""
    try:
        _, fields = _proc_stat(shell_pid)
        tpgid = int(fields[5])
        if tpgid <= 0 or tpgid == int(fields[2]):
            # The shell itself: it may still be busy reading a long line typed ahead.
            return "bash", int(fields[11]) + int(fields[12]), True
        name, fg_fields = _proc_stat(tpgid)
        return name, int(fg_fields[11]) + int(fg_fields[12]), False
    except (OSError, ValueError, IndexError):
        return None


def program_name(shell_pid):
    """Return the name of the program in the foreground, or None when it is the shell."""
    fg = foreground(shell_pid)
    return fg[0] if fg and not fg[2] else None


def pane_pid():
    """Return the pid of the shell in the pane."""
    return int(tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip())


CAPTURE = (
    "display-message", "-p", "-t", SESSION,
    "#{history_size} #{cursor_x} #{cursor_y} #{pane_dead}",
    ";", "capture-pane", "-p", "-e", "-t", SESSION, "-S", "-", "-E", "-1",
    ";", "display-message", "-p", "-t", SESSION, SPLIT,
    ";", "capture-pane", "-p", "-e", "-t", SESSION,
    # In the same batch: the server runs it without reading the pane in between, so no line
    # can scroll into the history after it was read and before it was cleared.
    ";", "clear-history", "-t", SESSION,
)  # fmt: skip


def capture(wait_for_prompt_line):
    """Capture screen, new scrollback and cursor, and clear the scrollback read."""
    histories = []
    for _ in range(50):
        head, rest = tmux(*CAPTURE).split("\n", 1)
        history, screen = rest.split(SPLIT + "\n", 1)
        history_size, cursor_x, cursor_y, dead = (int(v or 0) for v in head.split())
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


def _exits_within(process, timeout):
    """Return True if ``process`` ends within ``timeout`` seconds; wakes the moment it does."""
    # Popen.wait(timeout) polls with growing sleeps, adding milliseconds to every step;
    # a pidfd becomes readable exactly when the process exits.
    pidfd = os.pidfd_open(process.pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if ready:
        process.wait()
    return bool(ready)


def wait_for_completion(shell_pid, before, timeout, quiet, min_wait):
    """Wait for a new prompt, or a quiet screen with an idle foreground, or the timeout.

    Returns (prompt_returned, timed_out). Quiet means no screen change and no CPU used by the
    foreground process (the shell included: it may be reading a long line) for ``quiet``
    seconds; ``min_wait`` keeps a ``wait`` action from ending early. At the timeout, a step
    counts as timed out only if something was still changing.
    """
    before_key = (before or (None,) * 4)[1:3]

    def prompt_returned():
        state = read_state()
        return state is not None and state[1:3] != before_key

    started = time.monotonic()
    waiter = subprocess.Popen(["tmux", "wait-for", CHANNEL])
    last_screen, last_change, last_cpu = None, started, None
    try:
        while True:
            if _exits_within(waiter, POLL_S):
                if prompt_returned():
                    return True, False
                # A signal left over from an earlier prompt: listen again.
                waiter = subprocess.Popen(["tmux", "wait-for", CHANNEL])
                continue
            # The signal is the fast path; the state file is the truth. A listener killed at
            # the end of an earlier step can swallow a signal, so look at the file as well.
            if prompt_returned():
                return True, False
            now = time.monotonic()
            screen = tmux("capture-pane", "-p", "-t", SESSION)
            fg = foreground(shell_pid)
            cpu = fg[1] if fg else None
            if screen != last_screen or cpu != last_cpu:
                last_screen, last_change, last_cpu = screen, now, cpu
            quiet_for = now - last_change
            if now - started >= timeout:
                return False, quiet_for < quiet
            if quiet_for >= quiet and now - started >= min_wait:
                return False, False
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


def handle(request, session):
    """Execute one request and return its reply."""
    op = request["op"]
    if op == "start":
        tmux(
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            str(request.get("width", 160)),
            "-y",
            str(request.get("height", 40)),
            "-c",
            request.get("cwd", "/root"),
            "bash",
        )
        session["shell_pid"] = pane_pid()
        started = time.monotonic()
        prompt, timed_out = wait_for_completion(session["shell_pid"], None, 10.0, 10.0, 0)
        timings = {"send_s": 0.0, "wait_s": round(time.monotonic() - started, 6)}
        return observe(session["shell_pid"], prompt, timed_out, timings)
    if op == "step":
        before = read_state()
        started = time.monotonic()
        send_keys(request.get("keys", []))
        sent = time.monotonic()
        prompt, timed_out = wait_for_completion(
            session["shell_pid"],
            before,
            float(request.get("timeout", 30)),
            float(request.get("quiet", 0.5)),
            float(request.get("min_wait", 0)),
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
    """Serve requests from stdin until it closes."""
    session = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = handle(json.loads(line), session)
        except Exception as error:  # reply, never die: the host decides what an error means
            reply = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("TERM", "xterm-256color")
    main()
