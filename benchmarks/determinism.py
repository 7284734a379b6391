"""Benchmark of determinism: two runs with the same seed and policy, compared row by row.

Run ``.venv/bin/python benchmarks/determinism.py`` (every sandboxed domain and web, the
default policy) or, e.g., ``--domain terminal --domain swe --policy explore --episodes 3``.
Web is measured on every site (``--site`` picks some), each a row ``web/SITE``; mcp on
its default server set, or per server with ``--per-server`` (rows ``mcp/SERVER``). ``--env
KEY=VALUE`` passes an environment config field to every collection.

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
import contextlib
import difflib
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from worldtrace.collectors.mcp.servers import SERVERS
from worldtrace.sandboxes.sites import SITES
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
    """Pairs that differ even after masking."""
    volatile_examples: list[str] = field(default_factory=list)
    """Pairs that differ only in declared volatile spans."""

    def share(self, count: int) -> float:
        """``count`` as a share of the pairs compared."""
        return count / self.pairs if self.pairs else 0.0


@dataclass(frozen=True)
class Target:
    """One thing the benchmark collects twice: a domain, with the config fields that vary."""

    domain: str
    env: tuple[str, ...] = ()
    """``KEY=VALUE`` config fields of this target (a web site, an mcp server)."""
    label: str = ""

    @property
    def name(self) -> str:
        """The row's name: the domain, or ``domain/variant``."""
        return f"{self.domain}/{self.label}" if self.label else self.domain


def targets(args: argparse.Namespace) -> list[Target]:
    """What to collect: each domain, web once per site, mcp once per server if asked."""
    chosen: list[Target] = []
    for domain in args.domain or DOMAINS:
        if domain == "web":
            # Sites differ in what they render (datasette's timings, Trac's ages): one row each.
            sites = args.site or list(SITES)
            chosen += [Target("web", (f"site={site}",), site) for site in sites]
        elif domain == "mcp" and (args.per_server or args.server):
            servers = args.server or list(SERVERS)
            chosen += [Target("mcp", (f"server={server}",), server) for server in servers]
        else:
            chosen.append(Target(domain))
    return chosen


def collect(target: Target, out: Path, args: argparse.Namespace) -> Path:
    """Collect one run with the benchmark's command; return its run folder."""
    run_name = target.name.replace("/", "-")
    command = [
        str(WORLDTRACE),
        "collect",
        target.domain,
        "--episodes",
        str(args.episodes),
        "--seed",
        str(args.seed),
        "--policy",
        args.policy,
        "--out",
        str(out),
        "--run-name",
        run_name,
    ]
    if args.max_steps:
        command += ["--max-steps", str(args.max_steps)]
    env = list(target.env) + list(args.env or ())
    if target.domain == "web":
        env.append("screenshot=false")
    for field_value in env:
        command += ["--env", field_value]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed:\n{finished.stdout[-2000:]}{finished.stderr[-2000:]}"
        )
    return out / run_name


def observations(run: Path) -> dict[tuple[int, int], Observation]:
    """The run's next observations by (episode seed, step); failed episodes are reported."""
    table = pl.read_parquet(run / "episodes.parquet")
    if "status" in table.columns:
        for row in table.filter(pl.col("status") == "failed").iter_rows(named=True):
            # An episode that never started (a site too slow to answer) has no rows to pair.
            error = str(row.get("error") or "").splitlines()[0][:200]
            print(f"  {run.name}: episode seed {row['seed']} failed: {error}", flush=True)
    episodes = table.select("episode_id", "seed")
    if not list((run / "transitions").glob("*/*.parquet")):
        return {}
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
            result.examples.append(f"seed {key[0]} step {key[1]}: " + _diff(a, b, masked=True))
        elif a.text != b.text and len(result.volatile_examples) < show:
            # Masked alike: what the declared spans hid, so a reader can judge the patterns.
            result.volatile_examples.append(
                f"seed {key[0]} step {key[1]} (volatile only): " + _diff(a, b, masked=False)
            )
    return result


def _diff(a: Observation, b: Observation, masked: bool) -> str:
    """The changed lines of two observations' texts (masked or not), on one line."""
    first, second = (a.masked_text(), b.masked_text()) if masked else (a.text, b.text)
    diff = difflib.unified_diff(first.splitlines(), second.splitlines(), lineterm="", n=0)
    lines = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    return " | ".join(line[:300] for line in lines[:6])


def main() -> None:
    """Collect each domain twice and print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", action="append", choices=DOMAINS, help="repeatable")
    parser.add_argument("--policy", default="script", choices=("script", "explore"))
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-steps", type=int, default=0, help="0: the domain's default")
    parser.add_argument("--show", type=int, default=3, help="differing pairs printed per domain")
    parser.add_argument(
        "--site", action="append", choices=sorted(SITES), help="web: this site only (repeatable)"
    )
    parser.add_argument(
        "--per-server", action="store_true", help="mcp: one row per server of the image"
    )
    parser.add_argument(
        "--server", action="append", choices=list(SERVERS), help="mcp: this server (repeatable)"
    )
    parser.add_argument(
        "--env", action="append", metavar="KEY=VALUE", help="config field for every collection"
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="keep the run folders in DIR (to read the rows)"
    )
    args = parser.parse_args()
    results = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            folder = str(args.keep)
        else:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="wt-determinism-"))
        for target in targets(args):
            runs = [collect(target, Path(folder) / name, args) for name in ("a", "b")]
            result = compare(target.name, *runs, show=args.show)
            results.append(result)
            # Each row as soon as it is known: a long benchmark shows its progress.
            print(
                f"{target.name}: collected twice, {result.identical}/{result.pairs} identical, "
                f"{result.identical_masked} after masking",
                flush=True,
            )
    print(f"\npolicy {args.policy}, {args.episodes} episodes, seed {args.seed}")
    print(f"{'domain':<18}{'pairs':>7}{'identical':>11}{'masked':>9}{'unpaired':>10}  target")
    for result in results:
        web = result.domain.startswith("web")
        target = "100% masked" if web else f"{BYTE_TARGET:.0%} / 100% masked"
        print(
            f"{result.domain:<18}{result.pairs:>7}{result.share(result.identical):>11.1%}"
            f"{result.share(result.identical_masked):>9.1%}{result.unpaired:>10}  {target}"
        )
    for result in results:
        for example in [*result.examples, *result.volatile_examples]:
            print(f"  {result.domain}: {example}")


if __name__ == "__main__":
    main()
