"""Run the terminal's tmux driver on an SSH host; copied there beside ``tmux_driver.py``.

``tmux_driver.py`` is written for the terminal image: it starts as root and runs the shell as
the account ``user`` inside the sandbox's private view, keeps the tmux socket (and the prompt
hook's state file beside it) in ``/tmp/tmux-1000``, and relies on the image's
``/etc/tmux.conf`` and on the prompt hook appended to ``/etc/bash.bashrc``. None of that is
ours on someone else's machine, so this script points the same driver at a private folder
before it serves, changing nothing else:

- the socket and the state file live in ``--run-dir`` (made here, the shell's account alone
  may enter it);
- every tmux client reads the uploaded ``tmux.conf`` (``-f``), never the host's or the
  user's own configuration, so the pane, history and key timing are the image's;
- the shell is ``bash --rcfile RC -i``: RC sources the account's own ``~/.bashrc`` (its
  machine, its settings), then installs the image's prompt hook (``shell.bashrc``), which
  notes the state beside the socket, so the prompt and the completion signal are the image's.

Usage (one JSON request and reply per line on stdin and stdout, as ``tmux_driver.py``)::

    python3 ssh_driver.py --run-dir DIR [--user NAME] [--observe]

With ``--user`` the script runs as root (``reset: fresh_user``) and the driver drops to
``NAME`` exactly as in the image. Without it the shell runs as the login user this process
runs as, and the driver can only make itself non-dumpable (so the agent, the same user, cannot
trace it or read its memory; it can still signal it, which ends the episode as a lost sandbox).
``--observe`` prints one observation of the running session and exits (the last look).

This file runs on the host's own ``python3`` (3.9 or newer) and imports nothing of worldtrace
but its uploaded neighbours: ``tmux_driver.py`` and the ``driver_runtime.py`` that imports.
"""

import argparse
import json
import os
import pwd
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# No __pycache__ beside the driver: the folder is removed after the episode, by its owner.
sys.dont_write_bytecode = True

import tmux_driver as driver  # noqa: E402  (the uploaded neighbour, found through HERE)

CONF = os.path.join(HERE, "tmux.conf")
HOOK = os.path.join(HERE, "shell.bashrc")
# The hook notes the status beside the tmux socket it runs under (``$TMUX``'s path).
HOOK_STATE_FILE = '"${TMUX%%,*}.status"'
# What only the SSH session or sudo put in the environment; the shell has no use for it.
DROPPED_PREFIXES = ("SSH_", "SUDO_")


def parse_args(argv):
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--run-dir", required=True, help="private folder for socket and state")
    parser.add_argument("--user", help="run the shell as this account (needs root)")
    parser.add_argument("--observe", action="store_true", help="print one observation, exit")
    return parser.parse_args(argv)


def write_rcfile(run_dir, uid, gid):
    """Write the shell's rc file into ``run_dir``: the account's ~/.bashrc, then the hook."""
    with open(HOOK) as handle:
        hook = handle.read()
    if HOOK_STATE_FILE not in hook:
        raise RuntimeError(f"{HOOK} does not write {HOOK_STATE_FILE}; the driver cannot find it")
    rc = os.path.join(run_dir, "bashrc")
    text = (
        "# The account's own settings first; the worldtrace prompt hook below has the last word.\n"
        '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n'
        # A host whose /etc/bash.bashrc has the image's hook (a worldtrace image) hooked the
        # shell to the image's state file already; ours must win.
        "unset __prompt_hooked\n" + hook
    )
    with open(rc, "w") as handle:
        handle.write(text)
    os.chown(rc, uid, gid)
    return rc


def prepare(args):
    """Make the run folder and the rc file, and point the driver at them; return the account."""
    if args.user:
        account = pwd.getpwnam(args.user)
        if os.geteuid() != 0:
            raise SystemExit(f"--user {args.user} needs root")
    else:
        account = pwd.getpwuid(os.getuid())
    run_dir = os.path.abspath(args.run_dir)
    if not args.observe:
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
        os.chown(run_dir, account.pw_uid, account.pw_gid)
        os.chmod(run_dir, 0o700)
        rc = write_rcfile(run_dir, account.pw_uid, account.pw_gid)
    else:
        rc = os.path.join(run_dir, "bashrc")
    tmux = shutil.which("tmux")
    if tmux is None:
        raise SystemExit("tmux is not installed on this host")
    driver.TMUX = tmux
    driver.USER = account.pw_name
    driver.SOCKET = os.path.join(run_dir, "tmux")
    driver.STATE_FILE = driver.SOCKET + ".status"

    spawn, tmux_command = driver.spawn, driver.tmux

    def spawn_with_conf(args, stdout):
        # -f only matters to the invocation that starts the server; harmless on the others.
        return spawn(["-f", CONF, *args], stdout)

    def tmux_with_rcfile(*args):
        if args[:1] == ("new-session",) and args[-1] == "bash":
            args = (*args[:-1], "bash", "--rcfile", rc, "-i")
        return tmux_command(*args)

    driver.spawn = spawn_with_conf
    driver.tmux = tmux_with_rcfile
    return account


def become_login_user(account):
    """The driver's identity when the shell runs as this process's own user."""
    driver.runtime.forbid_inspection()
    driver.USER_UID, driver.USER_GID = account.pw_uid, account.pw_gid
    driver.USER_HOME = account.pw_dir
    env = {key: value for key, value in os.environ.items() if key not in ("PWD", "OLDPWD")}
    env.update(
        HOME=account.pw_dir,
        USER=account.pw_name,
        LOGNAME=account.pw_name,
        SHELL=account.pw_shell or "/bin/bash",
    )
    driver.USER_ENV = env
    os.chdir(account.pw_dir)


def clean_environment():
    """Drop the SSH session's and sudo's variables; a UTF-8 locale if none is set, as the image."""
    for key in list(os.environ):
        if key.startswith(DROPPED_PREFIXES):
            del os.environ[key]
    if not any(os.environ.get(name) for name in ("LC_ALL", "LC_CTYPE", "LANG")):
        os.environ["LANG"] = "C.UTF-8"
    os.environ.setdefault("TERM", "xterm-256color")


def main(argv):
    """Prepare, take the driver's identity, then serve (or observe once)."""
    args = parse_args(argv)
    clean_environment()
    account = prepare(args)
    if args.user:
        driver.become_driver()
    else:
        become_login_user(account)
    if args.observe:
        reply = driver.observe(driver.pane_pid(), returned=False, timed_out=False, timings={})
        print(json.dumps(reply))
    else:
        driver.main()


if __name__ == "__main__":
    main(sys.argv[1:])
