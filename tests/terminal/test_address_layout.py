"""The agent's processes are laid out alike in every run: ``ps`` measures the same RSS.

With address-space randomization on, the same ``sleep 300`` had an RSS of 2352 kB in one run
of an episode and 2344 kB in the other (docs/determinism.md), and the exploring policy's
``ps aux`` kept that line on screen for many steps. Docker's default seccomp profile refused
``personality(ADDR_NO_RANDOMIZE)``; a private view's sandbox now gets Docker's profile with
that one value allowed (sandboxes/seccomp.py), and the driver starts the agent's tmux server
under ``setarch -R``. Checked on the real terminal: several processes of one episode and of two
episodes measure the same, and nothing else of the sandbox's rules changed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import docker
import pytest

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.sandboxes import page_cache

pytestmark = pytest.mark.docker

# Four processes of the same program, each measured once it sleeps; then what the shell's own
# personality says, and whether a flag Docker's profile refuses is still refused. (Each value is
# printed through a variable, so the command's own echo on the screen never matches a line.)
PROBE = (
    'for i in 1 2 3 4; do sleep 300 & sleep 0.3; echo "rss=$(ps -o rss= -p $!)"; kill $!; '
    'done 2>/dev/null; echo "pers=$(cat /proc/self/personality)"; '
    'v=refused; setarch -L true 2>/dev/null && v=allowed; echo "uname26=$v"'
)


def measured(image: str) -> tuple[list[int], dict[str, str]]:
    """The RSS values (kB) and the other values :data:`PROBE` printed, in a fresh episode."""
    environment = TerminalEnvironment(TerminalConfig(image=image))
    try:
        environment.reset(0, None)
        outcome = environment.step(command(PROBE), timeout_s=30)
    finally:
        environment.close()
    screen = plain_screen(outcome.observation["screen"])
    values = [int(value) for value in re.findall(r"^rss=\s*(\d+)\s*$", screen, re.MULTILINE)]
    assert len(values) == 4, screen
    return values, dict(re.findall(r"^(pers|uname26)=(\w+)\s*$", screen, re.MULTILINE))


def test_processes_measure_the_same_in_every_run(terminal_image: str) -> None:
    first, shown = measured(terminal_image)
    second, _ = measured(terminal_image)
    assert len(set(first)) == 1, first  # randomized, four processes rarely agree
    assert first == second
    assert shown["pers"] == "00040000", shown  # ADDR_NO_RANDOMIZE, inherited by the shell
    # Only ADDR_NO_RANDOMIZE was added: Docker's refusals stand (UNAME26, setarch -L).
    assert shown["uname26"] == "refused", shown


MEASURE_IN_A_NEW_PROCESS = (
    "import json, sys; from tests.terminal.test_address_layout import measured; "
    "print(json.dumps(measured(sys.argv[1])[0]))"
)


def measured_in_a_new_process(image: str) -> list[int]:
    """:func:`measured` in a fresh ``python``, as a new ``worldtrace collect`` would be."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE_IN_A_NEW_PROCESS, image],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def image_files(image: str) -> list[str]:
    """The image's programs and libraries, in its layer folders on this machine."""
    folders = page_cache.layer_folders(docker.from_env().images.get(image))
    assert folders, "the engine here stores images in overlay2 folders"
    return [path for folder in folders for path in page_cache.mapped_files(folder)]


def test_what_other_processes_of_the_machine_read_does_not_change_what_ps_shows(
    terminal_image: str,
) -> None:
    """Before, the kernel mapped whatever neighbouring library pages others had cached: the
    same ``sleep`` measured 2376 kB with the image's files evicted and 2384 kB once another
    process had read them all."""
    files = image_files(terminal_image)
    for path in files:  # as after memory pressure: the image's pages leave the cache
        with open(path, "rb") as file:
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    before = measured_in_a_new_process(terminal_image)
    for path in files:  # as another sandbox of the machine reading them would
        with open(path, "rb") as file:
            while file.read(1 << 20):
                pass
    assert measured_in_a_new_process(terminal_image) == before
