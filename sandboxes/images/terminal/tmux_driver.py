"""Drive bash in a tmux pane from inside the sandbox; one JSON request and reply per line.

Runs with the container's own Python for the lifetime of an episode, so a step costs one
round trip over the exec stream instead of one ``docker exec`` per tmux command.

Requests (stdin) and replies (stdout), one JSON object per line:
  {"op": "start", "width": 160, "height": 40, "cwd": "/root"}  -> observation
  {"op": "step", "keys": [...], "timeout": 30, "quiet": 0.5, "min_wait": 0} -> observation
  {"op": "observe"} -> observation
Observation: screen and new scrollback (with ANSI escapes), cursor, whether the prompt came
back, exit code and cwd from the prompt hook, the foreground program, and phase timings.
Completion is the prompt hook's ``tmux wait-for`` signal; programs that never give the prompt
back (vim, less, a REPL, a command reading stdin) end the step after ``quiet`` seconds with no
screen change and no CPU use by the foreground process.
"""

import json
import os
import re
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


def send_keys(keys):
    """Send keys in as few tmux invocations as the message size limit allows."""
    batch, size = [], 0
    for item in keys:
        pieces = (
            [item]
            if is_key_name(item)
            else [item[i : i + CHUNK] for i in range(0, len(item), CHUNK)]
        )
        for piece in pieces:
            command = ["send-keys", "-t", SESSION]
            command += ["--", piece] if is_key_name(item) else ["-l", "--", _literal_arg(piece)]
            if batch and size + len(piece.encode()) > CHUNK:
                tmux(*batch)
                batch, size = [], 0
            batch += ([";"] if batch else []) + command
            size += len(piece.encode())
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
    """Return (name, cpu_ticks) of the pane's foreground process group, None if the shell."""
    try:
        _, fields = _proc_stat(shell_pid)
        tpgid = int(fields[5])
        if tpgid <= 0 or tpgid == int(fields[2]):
            return None
        name, fg_fields = _proc_stat(tpgid)
        return name, int(fg_fields[11]) + int(fg_fields[12])
    except (OSError, ValueError, IndexError):
        return None


def pane_pid():
    """Return the pid of the shell in the pane."""
    return int(tmux("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip())


def capture(wait_for_prompt_line):
    """Capture screen, new scrollback and cursor, then clear the scrollback already read."""
    for _ in range(50):
        out = tmux(
            "display-message",
            "-p",
            "-t",
            SESSION,
            "#{history_size} #{cursor_x} #{cursor_y} #{pane_dead}",
            ";",
            "capture-pane",
            "-p",
            "-e",
            "-t",
            SESSION,
            "-S",
            "-",
            "-E",
            "-1",
            ";",
            "display-message",
            "-p",
            "-t",
            SESSION,
            SPLIT,
            ";",
            "capture-pane",
            "-p",
            "-e",
            "-t",
            SESSION,
        )
        head, rest = out.split("\n", 1)
        history, screen = rest.split(SPLIT + "\n", 1)
        history_size, cursor_x, cursor_y, dead = (int(v or 0) for v in head.split())
        lines = screen.split("\n")
        cursor_line = ANSI.sub("", lines[cursor_y]) if cursor_y < len(lines) else ""
        # The hook signals just before bash draws PS1; wait the few ms until it is drawn.
        # capture-pane trims trailing blanks, so pad the line back out to the cursor.
        drawn = cursor_line.ljust(cursor_x)[:cursor_x].endswith(("$ ", "# "))
        if not wait_for_prompt_line or drawn or dead:
            break
        time.sleep(0.002)
    if history_size:
        tmux("clear-history", "-t", SESSION)
    return {
        "screen": screen,
        "scrollback": history if history_size else "",
        "cursor": [cursor_x, cursor_y],
        "exited": bool(dead),
    }


def observe(shell_pid, prompt, timed_out, timings):
    """Build the observation reply."""
    started = time.monotonic()
    state = read_state()
    reply = capture(wait_for_prompt_line=prompt)
    fg = foreground(shell_pid)
    reply.update(
        prompt=prompt,
        timed_out=timed_out,
        exit_code=state[0] if state and prompt else None,
        cwd=state[3] if state else None,
        foreground=fg[0] if fg else None,
    )
    timings["capture_s"] = round(time.monotonic() - started, 6)
    reply["timings"] = timings
    return reply


def wait_for_completion(shell_pid, before, timeout, quiet, min_wait):
    """Wait for a new prompt, a quiet screen with an idle foreground, or the timeout."""
    before_key = (before or (None,) * 4)[1:3]

    def prompt_returned():
        state = read_state()
        return state is not None and state[1:3] != before_key

    started = time.monotonic()
    waiter = subprocess.Popen(["tmux", "wait-for", CHANNEL])
    last_screen, last_change, last_cpu = None, started, None
    try:
        while True:
            try:
                waiter.wait(timeout=POLL_S)
                if prompt_returned():
                    return True, False
                # A signal left over from an earlier prompt: listen again.
                waiter = subprocess.Popen(["tmux", "wait-for", CHANNEL])
                continue
            except subprocess.TimeoutExpired:
                pass
            # The signal is the fast path; the state file is the truth. A listener killed at
            # the end of an earlier step can swallow a signal, so look at the file as well.
            if prompt_returned():
                return True, False
            now = time.monotonic()
            if now - started >= timeout:
                return False, True
            screen = tmux("capture-pane", "-p", "-t", SESSION)
            fg = foreground(shell_pid)
            cpu = fg[1] if fg else None
            if screen != last_screen or cpu != last_cpu:
                last_screen, last_change, last_cpu = screen, now, cpu
            elif now - last_change >= quiet and now - started >= min_wait:
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
        return observe(session["shell_pid"], False, False, {})
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
