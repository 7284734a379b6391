"""The ``worldtrace`` command line.

One error boundary: a :class:`~worldtrace.schemas.errors.WorldtraceError` anywhere below a
command is printed as ``error: <message>`` (no traceback) and the command exits with the
error's code, 2 for bad input and 1 for a machine that cannot run what was asked. Quiet by
default: progress bars and summary tables on the screen, library logs in a log file
(``--verbose`` shows them too; see :mod:`worldtrace.flows.logs`).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from worldtrace.flows import server
from worldtrace.flows.deploy import register as register_deploy_commands

if TYPE_CHECKING:  # the libraries read their log settings at import: not before the options
    # typer 0.29 vendors its own click: its groups' invoke takes that click's Context.
    from typer._click.core import Context as TyperClickContext

    from worldtrace.collectors.episode import EpisodeResult

REAPED_COMMANDS = frozenset({"collect", "run"})
"""Commands whose helper processes (Prefect's temporary API, browsers) end with them, even
when they are killed (:mod:`worldtrace.flows.reaper`). Not ``worker``, whose flow runs are
meant to be finished by the next worker, nor ``server start``, whose server outlives it."""

console = Console(stderr=True)
"""Progress, warnings and errors (stderr); results and tables go to stdout."""


class _ErrorBoundary(TyperGroup):
    """Turns every user-facing error below a command into a message and an exit status."""

    def invoke(self, ctx: TyperClickContext) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as error:
            # Imported only now: the schemas import libraries that read their log settings
            # on import, which the options callback (run by invoke) sets first.
            from worldtrace.schemas.errors import WorldtraceError

            if _disk_full(error):
                logging.getLogger("worldtrace").exception("the disk is full")
                console.print(
                    Text.assemble(
                        ("error: ", "red"),
                        f"no space left on the disk being written ({error}); free some and "
                        "run the same command again: it goes on where it stopped",
                    ),
                    soft_wrap=True,
                )
                raise typer.Exit(2) from None
            if not isinstance(error, WorldtraceError):
                raise
            # Text, not markup: messages quote paths and values that may hold [brackets].
            console.print(Text.assemble(("error: ", "red"), str(error)), soft_wrap=True)
            raise typer.Exit(error.exit_code) from None


def _disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk (or the user's quota) is full.

    pyarrow's writers raise an OSError without ``errno``, naming it in the message only.
    """
    return isinstance(error, OSError) and (
        error.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(error)
    )


app = typer.Typer(
    cls=_ErrorBoundary,
    help="Record real software environments into world-model training data.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
sandboxes_app = typer.Typer(help="Build, list and clean up sandbox images and containers.")
app.add_typer(sandboxes_app, name="sandboxes")
server.register(app)
register_deploy_commands(app)

_log_file: Path | None = None


@app.callback()
def _options(
    ctx: typer.Context,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="show the libraries' logs on screen too")
    ] = False,
) -> None:
    """Record real software environments into world-model training data."""
    from worldtrace.flows.logs import configure

    global _log_file
    _log_file = configure(ctx.invoked_subcommand or "worldtrace", verbose)
    # Before anything imports Prefect: the managed server when it runs, else the temporary API.
    api = server.select_api()
    if ctx.invoked_subcommand in server.FLOW_COMMANDS:
        console.print(Text(api, style="dim"), soft_wrap=True)
    if ctx.invoked_subcommand in REAPED_COMMANDS:
        from worldtrace.flows.reaper import reap_on_exit

        reap_on_exit()


def _summary(title: str, rows: dict[str, Any]) -> None:
    """Print a two-column summary table."""
    table = Table(title=title, show_header=False, title_justify="left")
    for key, value in rows.items():
        table.add_row(key.replace("_", " "), str(value))
    Console().print(table)


def _say_where_the_log_is() -> None:
    if _log_file is not None:
        console.print(f"[dim]log: {_log_file}[/dim]", highlight=False)


@app.command()
def doctor(
    debian_packages: Annotated[
        bool,
        typer.Option(
            "--debian-packages", help="print the Debian packages setup installs, and nothing else"
        ),
    ] = False,
    domains: Annotated[
        str,
        typer.Option(
            "--domains",
            help="with --debian-packages: the core's packages and those of these domains "
            "('all', 'none', or names such as 'terminal web')",
        ),
    ] = "all",
    policy_config: Annotated[
        Path | None,
        typer.Option(
            "--policy-config",
            help="a collection config (or its llm policy block): ask its model endpoint for "
            "its model list, once, say whether the model answers, and check nothing else",
        ),
    ] = None,
) -> None:
    """Report what is installed, running and missing, with the command that fixes it."""
    from worldtrace.flows import doctor as checks_module

    if debian_packages:
        print(" ".join(checks_module.debian_packages(domains)))
        return
    if policy_config is not None:
        params = checks_module.policy_params(policy_config)
        print(checks_module.check_policy_endpoint(params))
        return
    checks = checks_module.run_checks()
    Console().print(checks_module.render(checks))
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

    from worldtrace.schemas.errors import ConfigError

    parsed: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"--env expects KEY=VALUE, got {pair!r}")
        try:
            parsed[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as error:  # e.g. a !!python tag: values are plain YAML only
            problem = getattr(error, "problem", None) or str(error)
            raise ConfigError(f"--env {key.strip()}: not a plain YAML value: {problem}") from None
    return parsed


def _collecting_progress(total: int) -> tuple[Progress, _ProgressBar]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps {task.fields[steps]}"),
        TextColumn("errors {task.fields[errors]}"),
        TextColumn("{task.fields[rate]:.1f} steps/s"),
        TimeElapsedColumn(),
    )
    bar = Progress(*columns, console=console)
    return bar, _ProgressBar(bar, total)


def _say_raw(text: str) -> None:
    """Write ``text`` to the screen as it is: a build's line is finished when the build is."""
    sys.stderr.write(text)
    sys.stderr.flush()


def _first_use_builds(collector: Any) -> Any:
    """A context in which the domain's preflight builds the images it asks for, if needed."""
    from worldtrace.flows.logs import log_dir
    from worldtrace.sandboxes.images import building_on_first_use

    return building_on_first_use(collector.requirements.images, log_dir(), _say_raw)


def _build_used_images(config: Any) -> None:
    """Build the images this collection uses that are missing or stale, one line each.

    Run before the progress bar, so the lines are not drawn under it. Only for this machine's
    engine: on a sandbox host ``run_collection`` builds the domain's images there.
    """
    from worldtrace.sandboxes import remote
    from worldtrace.sandboxes.images import image_status

    if config.sandbox_host or remote.current_host():
        return
    collector = config.collector()  # the one the config was checked with
    try:
        if all(image_status(d) == "current" for d in collector.requirements.images):
            return  # the usual case: no second preflight
    except Exception:
        pass  # no engine, say: the preflight below says so as it always has
    with _first_use_builds(collector):
        collector.preflight(collector.environment_config.model_validate(config.environment))


@app.command()
def collect(
    domain: Annotated[str | None, typer.Argument(help="domain to collect, e.g. terminal")] = None,
    config_file: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML collection config")
    ] = None,
    episodes: Annotated[int | None, typer.Option(help="number of episodes")] = None,
    workers: Annotated[int | None, typer.Option(help="episodes run at the same time")] = None,
    out: Annotated[
        str | None,
        typer.Option(help="folder holding run directories (a path or an fsspec URL)"),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="policy kind: script, explore, replay or llm")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="llm: the model id (same as policy.params.model)")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(help="llm: the OpenAI-compatible endpoint (policy.params.base_url)"),
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="task the episodes play, any policy (repeatable)"),
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
    sandbox_host: Annotated[
        str | None,
        typer.Option(
            help="another machine's Docker engine for the sandboxes: ssh://user@host[:port] or "
            "tcp://host:port (TLS); default: $WORLDTRACE_SANDBOX_HOST, else this machine's"
        ),
    ] = None,
) -> None:
    """Collect episodes in real sandboxes; re-running the same command resumes the run."""
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import check_run_location, load_config, validate_config
    from worldtrace.flows.progress import listening
    from worldtrace.schemas.errors import ConfigError

    flags: dict[str, Any] = {
        "domain": domain,
        "episodes": episodes,
        "workers": workers,
        "out": out,
        "seed": seed,
        "max_steps": max_steps,
        "step_timeout_s": step_timeout,
        "run_name": run_name,
        "sandbox_host": sandbox_host,
    }
    overrides = {key: value for key, value in flags.items() if value is not None}
    model_params = {
        key: value for key, value in (("model", model), ("base_url", base_url)) if value
    }
    if policy is not None or task or model_params:
        overrides["policy"] = {
            **({"kind": policy} if policy else {}),
            **({"tasks": task} if task else {}),
            **({"params": model_params} if model_params else {}),
        }
    if not normalize:
        overrides["normalize"] = False
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

    check_run_location(config)
    console.print(f"run directory: {config.run_location}", highlight=False)
    _build_used_images(config)
    bar, listener = _collecting_progress(config.episodes)
    with bar, listening(listener):
        summary = run_collection(config)
    _print_collection(summary)
    _say_where_the_log_is()
    _exit_if_stopped()


def _exit_if_stopped() -> None:
    """After a run stopped by a signal: say how to resume, and exit with 128 + the signal."""
    from worldtrace.flows.stopping import stopped_by

    signum = stopped_by()
    if signum is not None:
        server.kill_temporary_api()
        console.print(
            "[yellow]stopped: unfinished episodes were set aside; run the same command again "
            "to resume[/yellow]"
        )
        raise typer.Exit(128 + signum)


def _print_collection(summary: dict[str, Any]) -> None:
    rows = dict(summary)
    usage = rows.pop("model_usage", None)
    if usage is not None:  # an llm run's totals, short: four rows
        rows["model_calls"] = f"{usage['calls']:,}"
        rows["tokens"] = (
            f"{usage['prompt_tokens']:,} prompt, {usage['completion_tokens']:,} completion, "
            f"{usage['cached_tokens']:,} cached, {usage['reasoning_tokens']:,} reasoning"
        )
        rows["model_time"] = f"{usage['latency_s']:,.2f} s"
        if usage["cost_usd"] is not None:
            rows["cost"] = f"{usage['cost_usd']:,.6f} USD"
    _summary("collection", rows)
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

    report = normalize_run(run_dir, rows_per_shard)
    _summary(
        "normalization",
        {
            "episodes": report.episodes,
            "transitions": report.transitions,
            "shards": len(report.shards),
            "quarantined": len(report.quarantined),
        },
    )
    for item in report.quarantined:
        console.print(f"[yellow]quarantined[/yellow] {item['file']}: {item['reason']}")


@app.command()
def curate(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="runs or corpora of any domains, folders of runs, or globs (quoted); "
            "local paths or fsspec URLs",
            show_default=False,
        ),
    ],
    out: Annotated[str, typer.Option(help="corpus folder to write (a path or an fsspec URL)")],
    config_file: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML curation config")
    ] = None,
    workers: Annotated[int, typer.Option(help="datatrove tasks run at the same time")] = 1,
    executor: Annotated[str, typer.Option(help="local or ray")] = "local",
) -> None:
    """Curate runs into one corpus: dedup, filter, scrub, decontaminate (resumable)."""
    from worldtrace.curation.config import CurationConfig, load_curation_config
    from worldtrace.curation.pipeline import curate as run_curation

    config = load_curation_config(config_file) if config_file else CurationConfig()
    with console.status("curating with datatrove…"):
        report = run_curation(sources, out, config, workers=workers, executor=executor)
    _print_curation(report.model_dump())
    _say_where_the_log_is()


def _print_curation(report: dict[str, Any]) -> None:
    _summary(
        "curation",
        {
            "corpus": report["output_dir"],
            **({"inputs": len(report["inputs"])} if "inputs" in report else {}),
            "rows in": report["rows_in"],
            "rows out": report["rows_out"],
            **({"training targets": report["targets"]} if "targets" in report else {}),
            **(
                {f"episodes dropped ({rule})": n for rule, n in dropped.items()}
                if (dropped := report.get("episodes_dropped"))
                else {}
            ),
            "quarantined rows": report["quarantined_rows"],
            **({"stages run": ", ".join(report["stages_run"])} if "stages_run" in report else {}),
        },
    )


@app.command()
def publish(
    corpus: Annotated[str, typer.Argument(help="a curated corpus folder (a path or a URL)")],
    to: Annotated[
        str | None,
        typer.Option("--to", help="write the Hub layout here (a path or an fsspec URL)"),
    ] = None,
    repo: Annotated[str | None, typer.Option(help="upload to this Hub dataset repo")] = None,
    private: Annotated[bool, typer.Option(help="create the repo private")] = False,
    revision: Annotated[str | None, typer.Option(help="branch to upload to")] = None,
    shard_size_mb: Annotated[int, typer.Option(help="target parquet shard size")] = 500,
    force: Annotated[
        bool,
        typer.Option(
            help="publish over a different schema (--repo), or over a folder holding files "
            "publishing did not write (they are deleted)"
        ),
    ] = False,
    uncurated: Annotated[
        bool,
        typer.Option(help="publish a folder that was not curated (the card says so)"),
    ] = False,
) -> None:
    """Write a curated corpus as a Hugging Face dataset folder, and optionally upload it."""
    from worldtrace.publishing.folder import publish_anywhere
    from worldtrace.publishing.hub import push_to_hub
    from worldtrace.schemas.errors import InputError
    from worldtrace.schemas.storage import is_remote, join

    if to is None and repo is None:
        raise InputError("give --to DIR, --repo org/name, or both")
    if to is None and is_remote(corpus):
        raise InputError("a corpus at a URL is published with --to (a path or a URL)")
    # Without --to the folder is staged inside the corpus, where a killed run's copy is
    # replaced by the next publish (publish_folder sweeps its leftovers) instead of piling up.
    folder = to or join(join(corpus, ".publish"), "dataset")
    with console.status("writing and validating the dataset folder…"):
        report, local_folder = publish_anywhere(
            corpus, folder, shard_size_mb=shard_size_mb, uncurated=uncurated, force=force
        )
    rows: dict[str, Any] = {
        "folder": folder,
        "rows": report.rows,
        "training targets": report.summary.get("targets", report.rows),
        **{f"rows {domain}": count for domain, count in report.rows_per_domain.items()},
        "shards": sum(len(names) for names in report.shards.values()),
        "episodes": report.episodes,
        "environments": report.environments,
    }
    if repo is not None:
        with console.status(f"uploading to {repo}…"):
            pushed = push_to_hub(
                local_folder, repo, private=private, revision=revision, force=force
            )
        rows |= {
            "repo": f"{pushed.repo_id}@{pushed.revision}",
            "uploaded files": len(pushed.uploaded),
            "deleted files": len(pushed.deleted),
            "already there": pushed.noop,
        }
    _summary("publication", rows)
    _say_where_the_log_is()


@app.command()
def inspect(
    path: Annotated[str, typer.Argument(help="corpus, published folder or hf://datasets/…")],
) -> None:
    """Print rows, episodes, domains, environment versions, lengths, rates and model usage."""
    from worldtrace.publishing.inspect import inspect_folder, render

    for table in render(inspect_folder(path)):
        Console().print(table)


EXPORT_HISTORY_TOKENS = 16_384
"""``--history-tokens``' default: ``exports.tokens.DEFAULT_HISTORY_TOKENS`` (a test keeps them
equal; the exports are imported only when the command runs)."""


@app.command()
def export(
    source: Annotated[Path, typer.Argument(help="published folder or corpus")],
    format_: Annotated[str, typer.Option("--format", help="agentworld or openai")],
    out: Annotated[Path, typer.Option(help="folder for the JSONL files")],
    history: Annotated[
        int | None,
        typer.Option(help="at most this many past turns per row (default: no cap on turns)"),
    ] = None,
    history_tokens: Annotated[
        int,
        typer.Option(
            help="token budget for a row's past turns; the oldest are trimmed first, the "
            "target turn is always whole, 0 gives single-turn rows (tokens: 1 per 3 bytes "
            "of UTF-8 unless --tokenizer)",
        ),
    ] = EXPORT_HISTORY_TOKENS,
    tokenizer: Annotated[
        Path | None,
        typer.Option(help="a local tokenizer.json to count tokens with instead of the estimate"),
    ] = None,
) -> None:
    """Export transitions to a world-model SFT format: one row per training target.

    The environment is the speaker: state and action in, next observation out, in every
    domain. Each row's history is at most --history-tokens tokens (default 16,384, estimated
    as one token per 3 bytes of UTF-8) and --history turns; rows say how many earlier turns
    they left out (trimmed_turns).
    """
    from worldtrace.exports import EXPORTERS
    from worldtrace.schemas.errors import InputError

    if format_ not in EXPORTERS:
        raise InputError(f"unknown format {format_!r} (available: {', '.join(EXPORTERS)})")
    counts = EXPORTERS[format_](
        source, out, history=history, history_tokens=history_tokens, tokenizer=tokenizer
    )
    for domain, rows in counts.items():
        Console().print(f"{domain}: {rows} rows")


@app.command()
def run(
    pipeline_file: Annotated[Path, typer.Argument(help="pipeline YAML: collect, curate, publish")],
) -> None:
    """Collect, curate and publish as one Prefect flow; re-running resumes every stage."""
    from worldtrace.collectors.registry import get_collector
    from worldtrace.flows.pipeline import file_sha256, load_pipeline_config, pipeline
    from worldtrace.flows.progress import listening
    from worldtrace.schemas.errors import ConfigError

    try:
        sha256 = file_sha256(pipeline_file)
    except OSError as error:
        raise ConfigError(f"cannot read {pipeline_file}: {error}") from None
    config = load_pipeline_config(pipeline_file, sha256)
    collector = get_collector(config.collect.domain)
    _build_used_images(config.collect)
    collector.preflight(collector.environment_config.model_validate(config.collect.environment))
    bar, listener = _collecting_progress(config.collect.episodes)
    with bar, listening(listener):
        summary = pipeline(str(pipeline_file.resolve()), sha256)
    _print_collection(summary["collect"])
    _say_where_the_log_is()
    _exit_if_stopped()
    _print_curation({"output_dir": summary["curate"]["corpus"], **summary["curate"]})
    _summary("publication", summary["publish"])


# Everything after the domain goes to the domain's own commands, --help included.
@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    }
)
def tasks(
    ctx: typer.Context, domain: Annotated[str, typer.Argument(help="domain")] = "terminal"
) -> None:
    """List the scripted tasks of a domain, or run its own task commands.

    worldtrace tasks DOMAIN COMMAND ... runs a command the domain offers for its tasks, e.g.
    worldtrace tasks swe synthesize --repo toolz --count 20; worldtrace tasks DOMAIN --help
    lists them.
    """
    from worldtrace.collectors.registry import get_collector
    from worldtrace.schemas.errors import InputError

    collector = get_collector(domain)
    if ctx.args:
        commands = collector.task_commands()
        if commands is None and ctx.args == ["--help"]:
            typer.echo(ctx.get_help())
            return
        if commands is None:
            raise InputError(
                f"the {domain} domain has no task commands (got {' '.join(ctx.args)!r}); "
                f"`worldtrace tasks {domain}` lists its tasks"
            )
        commands.main(args=ctx.args, prog_name=f"worldtrace tasks {domain}", standalone_mode=False)
        return
    library = collector.task_library()
    if not library:
        raise InputError(f"the {domain} domain has no scripted tasks")
    table = Table("name", "category", "instruction")
    for item in library:
        table.add_row(item.name, item.category, item.instruction)
    Console().print(table)


@sandboxes_app.command("build")
def sandboxes_build(
    domains: Annotated[
        list[str] | None,
        typer.Argument(help="the domains whose images to build; default: every registered one"),
    ] = None,
    base_only: Annotated[
        bool,
        typer.Option(
            "--base-only",
            help="only the base and clock images (a domain's are built when it is first used)",
        ),
    ] = False,
    force: Annotated[bool, typer.Option(help="rebuild even if current")] = False,
) -> None:
    """Build the base image and the images of the domains that are missing or stale.

    One line per image; each build's output goes to a log file in the log folder, whose
    path a failed build names.
    """
    from worldtrace.collectors.registry import get_collector, registered_collectors
    from worldtrace.flows.logs import log_dir
    from worldtrace.sandboxes.images import ensure_images_logged

    if base_only:
        collectors = []
    elif domains:
        collectors = [get_collector(domain) for domain in domains]
    else:
        collectors = list(registered_collectors())
    definitions = [i for c in collectors for i in c.requirements.images]
    ensure_images_logged(definitions, log_dir(), _say_raw, force=force, report_current=True)


@sandboxes_app.command("list")
def sandboxes_list() -> None:
    """List running and leftover worldtrace containers."""
    from worldtrace.sandboxes.docker import RUN_LABEL, live_sandboxes, owner_alive

    table = Table("container", "image", "run", "status", "owner pid", "orphaned")
    for container in live_sandboxes():
        labels = container.labels
        tags = container.image.tags if container.image else []
        table.add_row(
            container.short_id,
            tags[0] if tags else str(container.attrs.get("Config", {}).get("Image", "?")),
            labels.get(RUN_LABEL, ""),
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
    from worldtrace.sandboxes.docker import gc

    removed = gc(everything=all_)
    Console().print(f"removed {len(removed)} sandbox(es)")


def main() -> None:
    """Entry point of the ``worldtrace`` command and of ``python -m worldtrace.flows.cli``."""
    try:
        app()
    except SystemExit as leaving:
        stopping = sys.modules.get("worldtrace.flows.stopping")
        if stopping is None or stopping.stopped_by() is None:
            raise
        # A stopped collection has everything on disk and its sandboxes removed. Tearing
        # the interpreter down (Prefect, pydantic, datasets) took 6-9 s of a starved CPU at a
        # load average of 25 after the summary was printed: leave at once instead.
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(leaving.code if isinstance(leaving.code, int) else 1)


if __name__ == "__main__":
    main()
