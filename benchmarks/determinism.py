"""Benchmark of determinism: two runs with the same seed and policy, compared row by row.

Run ``.venv/bin/python benchmarks/determinism.py`` (every sandboxed domain and web, the
default policy) or, e.g., ``--domain terminal --domain swe --policy explore --episodes 3``.

Each domain is collected twice with exactly the same command (``worldtrace collect DOMAIN
--episodes N --seed S --policy P``, the real CLI, real sandboxes), into two run folders. The
transitions of the two runs are paired by (episode seed, step) and their next observations
compared: the share that is byte-identical, and the share identical once the spans the domain
declares volatile (``Observation.volatile``, e.g. a measured duration) are masked. Targets
(issue 23): at least 95% byte-identical for terminal, swe, mcp, search and os; 100% after
masking in every domain. For each domain the first differing pairs are printed as a line diff,
so a miss shows what varied. Numbers and how to read them: docs/determinism.md.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from worldtrace.schemas import Observation

DOMAINS = ("terminal", "swe", "mcp", "search", "os", "web")
BYTE_TARGET = 0.95
"""Byte-identical share required of every domain but web (which renders live measurements)."""
WORLDTRACE = Path(sys.executable).with_name("worldtrace")


@dataclass
class Comparison:
    """How the two runs of one domain compare."""

    domain: str
    pairs: int = 0
    identical: int = 0
    identical_masked: int = 0
    unpaired: int = 0
    examples: list[str] = field(default_factory=list)

    def share(self, count: int) -> float:
        """``count`` as a share of the pairs compared."""
        return count / self.pairs if self.pairs else 0.0


def collect(domain: str, out: Path, args: argparse.Namespace) -> Path:
    """Collect one run with the benchmark's command; return its run folder."""
    command = [
        str(WORLDTRACE),
        "collect",
        domain,
        "--episodes",
        str(args.episodes),
        "--seed",
        str(args.seed),
        "--policy",
        args.policy,
        "--out",
        str(out),
        "--run-name",
        domain,
    ]
    if args.max_steps:
        command += ["--max-steps", str(args.max_steps)]
    if domain == "web":
        command += ["--env", "screenshot=false"]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{finished.stdout[-2000:]}")
    return out / domain


def observations(run: Path) -> dict[tuple[int, int], Observation]:
    """The run's next observations by (episode seed, step)."""
    episodes = pl.read_parquet(run / "episodes.parquet").select("episode_id", "seed")
    rows = (
        pl.read_parquet(run / "transitions" / "*" / "*.parquet")
        .join(episodes, on="episode_id")
        .select("seed", "step", "next_observation")
    )
    return {
        (seed, step): Observation.model_validate(
            {**value, "meta": {}, "screenshot": None, "volatile": value["volatile"] or []}
        )
        for seed, step, value in rows.iter_rows()
    }


def compare(domain: str, first: Path, second: Path, show: int) -> Comparison:
    """Pair the two runs' rows and count what agrees."""
    one, two = observations(first), observations(second)
    result = Comparison(domain, unpaired=len(one.keys() ^ two.keys()))
    for key in sorted(one.keys() & two.keys()):
        a, b = one[key], two[key]
        result.pairs += 1
        result.identical += a.text == b.text
        result.identical_masked += a.masked_text() == b.masked_text()
        if a.masked_text() != b.masked_text() and len(result.examples) < show:
            diff = difflib.unified_diff(
                a.masked_text().splitlines(), b.masked_text().splitlines(), lineterm="", n=0
            )
            lines = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            result.examples.append(f"seed {key[0]} step {key[1]}: " + " | ".join(lines[:6]))
    return result


def main() -> None:
    """Collect each domain twice and print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", action="append", choices=DOMAINS, help="repeatable")
    parser.add_argument("--policy", default="script", choices=("script", "explore"))
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-steps", type=int, default=0, help="0: the domain's default")
    parser.add_argument("--show", type=int, default=3, help="differing pairs printed per domain")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="wt-determinism-") as folder:
        for domain in args.domain or DOMAINS:
            runs = [collect(domain, Path(folder) / name, args) for name in ("a", "b")]
            results.append(compare(domain, *runs, show=args.show))
            print(f"{domain}: collected twice", flush=True)
    print(f"\npolicy {args.policy}, {args.episodes} episodes, seed {args.seed}")
    print(f"{'domain':<10}{'pairs':>7}{'identical':>11}{'masked':>9}{'unpaired':>10}  target")
    for result in results:
        target = "100% masked" if result.domain == "web" else f"{BYTE_TARGET:.0%} / 100% masked"
        print(
            f"{result.domain:<10}{result.pairs:>7}{result.share(result.identical):>11.1%}"
            f"{result.share(result.identical_masked):>9.1%}{result.unpaired:>10}  {target}"
        )
    for result in results:
        for example in result.examples:
            print(f"  {result.domain}: {example}")


if __name__ == "__main__":
    main()
