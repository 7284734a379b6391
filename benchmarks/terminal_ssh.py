"""Step and reset time of the terminal environment on an SSH host against one in a container.

Run ``.venv/bin/python benchmarks/terminal_ssh.py [--steps N] [--rounds R]``.

The SSH host is the test suite's OpenSSH server (``tests/remote/conftest.py``: a container of
the ``test-sshd`` image on 127.0.0.1 with tmux and python3), so both sides run on this machine
and the difference is the path: paramiko, sshd and the driver shim against ``docker exec``'s
stream. Each round resets one environment of each kind (the SSH one with ``reset: command``
and with ``reset: fresh_user``) and times ``env.step`` for the same quick commands, the kinds
taking turns within the round so that load from elsewhere hits all alike. Numbers are printed
and written to ``benchmarks/results/terminal_ssh.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from common import loadavg, log, machine_info, write_report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.remote.conftest import running_sshd
from worldtrace.collectors.terminal import TerminalCollector
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig

COMMANDS = ("echo hello", "ls -la /etc | head -5", "pwd", "true", "cd /tmp && cd -")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values) * 1000, 2),
        "p90_ms": round(percentile(values, 0.9) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=40, help="steps per environment and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).parent / "results" / "terminal_ssh.json"
    )
    args = parser.parse_args()
    load_start = loadavg()
    collector = TerminalCollector()
    with tempfile.TemporaryDirectory() as folder, running_sshd(Path(folder)) as server:
        ssh = {
            "host": server.url,
            "key_file": str(server.key),
            "known_hosts": str(server.known_hosts),
        }
        configs = {
            "container": TerminalConfig(),
            "ssh-command": TerminalConfig.model_validate(
                {"ssh": {**ssh, "reset": "command", "reset_command": "rm -rf ~/work"}}
            ),
            "ssh-fresh-user": TerminalConfig.model_validate(
                {"ssh": {**ssh, "reset": "fresh_user"}}
            ),
        }
        environments = {name: collector.make_environment(c) for name, c in configs.items()}
        steps: dict[str, list[float]] = {name: [] for name in configs}
        resets: dict[str, list[float]] = {name: [] for name in configs}
        try:
            for round_index in range(args.rounds):
                for name, env in environments.items():
                    started = time.monotonic()
                    env.reset(seed=round_index, task=None)
                    resets[name].append(time.monotonic() - started)
                for index in range(args.steps):
                    action = command(COMMANDS[index % len(COMMANDS)])
                    for name, env in environments.items():
                        outcome = env.step(action, 20)
                        if outcome.error is not None:
                            raise RuntimeError(f"{name}: {outcome.error}")
                        steps[name].append(outcome.latency_s)
                log(f"round {round_index + 1}/{args.rounds} done, load {loadavg()}")
        finally:
            for env in environments.values():
                env.close()
    report = {
        "benchmark": "terminal_ssh",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(load_start),
        "command": " ".join(["benchmarks/terminal_ssh.py", *sys.argv[1:]]),
        "step": {name: summary(values) for name, values in steps.items()},
        "reset": {name: summary(values) for name, values in resets.items()},
    }
    for kind in ("step", "reset"):
        for name, numbers in report[kind].items():
            print(f"{kind:5} {name:15} median {numbers['median_ms']:8.1f} ms  "
                  f"p90 {numbers['p90_ms']:8.1f} ms  (n={numbers['n']})")  # fmt: skip
    write_report(args.output, report)


if __name__ == "__main__":
    main()
