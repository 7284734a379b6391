"""The ``worldtrace`` command line."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from worldtrace.collectors.episode import EpisodeResult

app = typer.Typer(
    help="Record real software environments into world-model training data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
sandboxes_app = typer.Typer(help="Build, list and clean up sandbox images and containers.")
app.add_typer(sandboxes_app, name="sandboxes")
console = Console(stderr=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


@app.command()
def doctor() -> None:
    """Report what is installed, running and missing, with the command that fixes it."""
    from worldtrace.flows.doctor import render, run_checks

    checks = run_checks()
    Console().print(render(checks))
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


class _ProgressBar:
    """Shows episodes done, steps, errors and steps per second while a run goes on."""

    def __init__(self, progress: Progress, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task("episodes", total=total, steps=0, errors=0, rate=0.0)
        self._steps = 0
        self._errors = 0
        self._started = time.monotonic()
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        rate = self._steps / max(time.monotonic() - self._started, 1e-9)
        self._progress.update(self._task, steps=self._steps, errors=self._errors, rate=rate)

    def on_step(self, episode_id: str, step: int, error: str | None) -> None:
        """Count a step."""
        with self._lock:
            self._steps += 1
            self._errors += error is not None
            self._refresh()

    def on_episode(self, result: EpisodeResult) -> None:
        """Count an episode."""
        with self._lock:
            self._progress.advance(self._task)
            self._refresh()


def _key_values(pairs: list[str]) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` flags; values are read as YAML, so numbers and booleans are typed."""
    import yaml

    from worldtrace.flows.config import ConfigError

    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"--env expects KEY=VALUE, got {pair!r}")
        parsed[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return parsed


def _quiet_prefect() -> None:
    # Prefect logs every task run; the progress bar says the same thing more briefly.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    logging.getLogger("prefect").setLevel(logging.WARNING)


@app.command()
def collect(
    domain: Annotated[str | None, typer.Argument(help="domain to collect, e.g. terminal")] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML collection config")
    ] = None,
    episodes: Annotated[int | None, typer.Option(help="number of episodes")] = None,
    workers: Annotated[int | None, typer.Option(help="episodes run at the same time")] = None,
    out: Annotated[Path | None, typer.Option(help="folder holding run directories")] = None,
    policy: Annotated[str | None, typer.Option(help="policy kind: script or explore")] = None,
    task: Annotated[
        list[str] | None, typer.Option("--task", help="scripted task name (repeatable)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the first episode")] = None,
    max_steps: Annotated[int | None, typer.Option(help="steps before truncation")] = None,
    step_timeout: Annotated[float | None, typer.Option(help="seconds allowed per step")] = None,
    run_name: Annotated[str | None, typer.Option(help="run directory name")] = None,
    site: Annotated[
        str | None, typer.Option(help="web: the site to visit (same as --env site=NAME)")
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="environment config field, KEY=VALUE (repeatable)"),
    ] = None,
    normalize: Annotated[
        bool, typer.Option("--normalize/--no-normalize", help="write transitions at the end")
    ] = True,
) -> None:
    """Collect episodes in real sandboxes; re-running the same command resumes the run."""
    from worldtrace.flows.config import ConfigError, load_config, validate_config

    flags: dict[str, Any] = {
        "domain": domain,
        "episodes": episodes,
        "workers": workers,
        "out": out,
        "seed": seed,
        "max_steps": max_steps,
        "step_timeout_s": step_timeout,
        "run_name": run_name,
    }
    overrides = {key: value for key, value in flags.items() if value is not None}
    if policy is not None or task:
        overrides["policy"] = {"kind": policy or "script", **({"tasks": task} if task else {})}
    if not normalize:
        overrides["normalize"] = False
    try:
        environment = _key_values(env or [])
        if site is not None:
            environment["site"] = site
        if environment:
            overrides["environment"] = environment
        if config_file is not None:
            config = load_config(config_file, overrides)
        else:
            if domain is None:
                raise ConfigError("give a domain (worldtrace collect terminal …) or --config")
            # --episodes 0 is an error like any invalid value, never "one episode".
            config = validate_config({"episodes": 1} | overrides)
    except (ConfigError, LookupError) as error:
        raise _fail(str(error)) from None

    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.progress import listening
    from worldtrace.sandboxes.docker import SandboxError

    _quiet_prefect()
    console.print(f"run directory: {config.run_dir}", highlight=False)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps {task.fields[steps]}"),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[rate]:.1f} steps/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as bar:
        listener = _ProgressBar(bar, config.episodes)
        try:
            with listening(listener):
                summary = run_collection(config)
        except SandboxError as error:
            raise _fail(str(error), code=1) from None
    _print_summary(summary)
    _exit_if_stopped()


def _exit_if_stopped() -> None:
    """After a run stopped by a signal: say how to resume, and exit with 128 + the signal."""
    from worldtrace.flows.stopping import stopped_by

    signum = stopped_by()
    if signum is not None:
        console.print(
            "[yellow]stopped: unfinished episodes were set aside; run the same command again "
            "to resume[/yellow]"
        )
        raise typer.Exit(128 + signum)


def _print_summary(summary: dict[str, Any]) -> None:
    table = Table(title="collection", show_header=False)
    for key, value in summary.items():
        table.add_row(key.replace("_", " "), str(value))
    Console().print(table)
    if summary.get("failed"):
        console.print(
            f"[yellow]{summary['failed']} episode(s) failed; they are kept and marked "
            "'failed' in episodes.parquet[/yellow]"
        )


@app.command()
def normalize(
    run_dir: Annotated[Path, typer.Argument(help="a run directory under runs/")],
    rows_per_shard: Annotated[int, typer.Option(help="rows per parquet shard")] = 50_000,
) -> None:
    """Rebuild a run's transitions and episodes table from its raw episodes."""
    from worldtrace.normalizers import normalize_run

    try:
        report = normalize_run(run_dir, rows_per_shard)
    except (FileNotFoundError, LookupError) as error:
        raise _fail(str(error)) from None
    Console().print(
        f"{report.episodes} episodes, {report.transitions} transitions, "
        f"{len(report.shards)} shard(s), {len(report.quarantined)} quarantined"
    )
    for item in report.quarantined:
        console.print(f"[yellow]quarantined[/yellow] {item['file']}: {item['reason']}")


@app.command()
def curate(
    source: Annotated[Path, typer.Argument(help="a run directory or a folder of runs")],
    out: Annotated[Path, typer.Option(help="corpus folder to write")],
    config_file: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML curation config")
    ] = None,
    workers: Annotated[int, typer.Option(help="datatrove tasks run at the same time")] = 1,
    executor: Annotated[str, typer.Option(help="local or ray")] = "local",
) -> None:
    """Deduplicate, filter, scrub and decontaminate transitions with datatrove (resumable)."""
    from worldtrace.curation.config import CurationConfig, load_curation_config
    from worldtrace.curation.pipeline import curate as run_curation

    config = load_curation_config(config_file) if config_file else CurationConfig()
    report = run_curation(source, out, config, workers=workers, executor=executor)
    Console().print(report)


@app.command()
def publish(
    corpus: Annotated[Path, typer.Argument(help="a curated corpus folder")],
    to: Annotated[Path | None, typer.Option("--to", help="write the Hub layout here")] = None,
    repo: Annotated[str | None, typer.Option(help="upload to this Hub dataset repo")] = None,
    private: Annotated[bool, typer.Option(help="create the repo private")] = False,
    revision: Annotated[str | None, typer.Option(help="branch to upload to")] = None,
    shard_size_mb: Annotated[int, typer.Option(help="target parquet shard size")] = 500,
    force: Annotated[bool, typer.Option(help="publish over a different schema")] = False,
    uncurated: Annotated[
        bool,
        typer.Option(help="publish a folder that was not curated (the card says so)"),
    ] = False,
) -> None:
    """Write a curated corpus as a Hugging Face dataset folder, and optionally upload it."""
    from worldtrace.publishing.hub import push_to_hub
    from worldtrace.publishing.layout import PublishError, publish_folder

    if to is None and repo is None:
        raise _fail("give --to DIR, --repo org/name, or both")
    # Without --to the folder is staged inside the corpus, where a killed run's copy is
    # replaced by the next publish (publish_folder sweeps its leftovers) instead of piling up.
    folder = to or corpus / ".publish" / "dataset"
    try:
        report = publish_folder(corpus, folder, shard_size_mb=shard_size_mb, uncurated=uncurated)
    except PublishError as error:
        raise _fail(str(error)) from None
    Console().print(report)
    if repo is not None:
        Console().print(push_to_hub(folder, repo, private=private, revision=revision, force=force))


@app.command()
def inspect(
    path: Annotated[str, typer.Argument(help="corpus, published folder or hf://datasets/…")],
) -> None:
    """Print rows, episodes, domains, environment versions, lengths and rates."""
    from worldtrace.publishing.inspect import render, summarize

    for table in render(summarize(path)):
        Console().print(table)


@app.command()
def export(
    source: Annotated[Path, typer.Argument(help="published folder or corpus")],
    format_: Annotated[str, typer.Option("--format", help="agentworld or openai")],
    out: Annotated[Path, typer.Option(help="folder for the JSONL files")],
    history: Annotated[int | None, typer.Option(help="past turns to include")] = None,
) -> None:
    """Export transitions to a world-model SFT format."""
    from worldtrace.exports import EXPORTERS

    if format_ not in EXPORTERS:
        raise _fail(f"unknown format {format_!r} (available: {', '.join(EXPORTERS)})")
    counts = EXPORTERS[format_](source, out, history=history)
    for domain, rows in counts.items():
        Console().print(f"{domain}: {rows} rows")


@app.command()
def run(
    pipeline_file: Annotated[Path, typer.Argument(help="pipeline YAML: collect, curate, publish")],
) -> None:
    """Collect, curate and publish as one Prefect flow; re-running resumes every stage."""
    from worldtrace.collectors.registry import get_collector
    from worldtrace.flows.config import ConfigError
    from worldtrace.flows.pipeline import file_sha256, load_pipeline_config, pipeline
    from worldtrace.sandboxes.docker import SandboxError

    try:
        sha256 = file_sha256(pipeline_file)
        config = load_pipeline_config(pipeline_file, sha256)
    except (ConfigError, OSError) as error:
        raise _fail(str(error)) from None
    collector = get_collector(config.collect.domain)
    _quiet_prefect()
    try:
        collector.preflight(collector.environment_config.model_validate(config.collect.environment))
        summary = pipeline(str(pipeline_file.resolve()), sha256)
    except SandboxError as error:
        raise _fail(str(error), code=1) from None
    _print_summary(summary["collect"])
    _exit_if_stopped()
    Console().print(summary["curate"])
    Console().print(summary["publish"])


@app.command()
def tasks(domain: Annotated[str, typer.Argument(help="domain")] = "terminal") -> None:
    """List the scripted tasks of a domain."""
    from worldtrace.collectors.registry import get_collector

    try:
        library = get_collector(domain).task_library()
    except LookupError as error:
        raise _fail(str(error.args[0])) from None
    if not library:
        raise _fail(f"no task library for {domain!r}")
    table = Table("name", "category", "steps", "instruction")
    for item in library:
        steps = str(len(getattr(item, "steps", ())))
        table.add_row(item.name, getattr(item, "category", ""), steps, item.instruction)
    Console().print(table)


@sandboxes_app.command("build")
def sandboxes_build(
    force: Annotated[bool, typer.Option(help="rebuild even if current")] = False,
) -> None:
    """Build the base image and every sandbox image whose definition changed."""
    from worldtrace.sandboxes.docker import SandboxError
    from worldtrace.sandboxes.images import build_all

    try:
        built = build_all(force=force, progress=lambda line: console.print(line, highlight=False))
    except SandboxError as error:
        raise _fail(str(error), code=1) from None
    for name, image_id in built.items():
        Console().print(f"{name}: {image_id[:19]}")


@sandboxes_app.command("list")
def sandboxes_list() -> None:
    """List running and leftover worldtrace containers."""
    from worldtrace.sandboxes.docker import live_sandboxes, owner_alive

    table = Table("container", "image", "status", "owner pid", "orphaned")
    for container in live_sandboxes():
        labels = container.labels
        table.add_row(
            container.short_id,
            str(labels.get("worldtrace.domain", "")),
            container.status,
            labels.get("worldtrace.owner_pid", "?"),
            str(not owner_alive(labels)),
        )
    Console().print(table)


@sandboxes_app.command("gc")
def sandboxes_gc(
    all_: Annotated[bool, typer.Option("--all", help="also remove sandboxes still in use")] = False,
) -> None:
    """Remove sandboxes left behind by crashed runs (or every sandbox with --all)."""
    from worldtrace.sandboxes.docker import SandboxError, gc

    try:
        removed = gc(everything=all_)
    except SandboxError as error:
        raise _fail(str(error), code=1) from None
    Console().print(f"removed {len(removed)} sandbox(es)")


def main() -> None:
    """Entry point for ``python -m worldtrace.flows.cli``."""
    app()


if __name__ == "__main__":
    sys.exit(main())
