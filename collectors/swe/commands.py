"""``worldtrace tasks swe COMMAND``: the commands that make the swe domain's tasks.

``worldtrace tasks swe`` (no command) lists the checked-in tasks like every domain's;
``worldtrace tasks swe synthesize --repo NAME --count N`` synthesizes bugs in a repository's
image, keeps the ones its own tests catch, validates each against its gold patch and writes
them to the repository's task file (``collectors/swe/task_data/<repo>.json`` by default).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from worldtrace.collectors.base import TaskCommands


def task_commands() -> TaskCommands:
    """The command group behind ``worldtrace tasks swe`` (typer's, on its own click)."""
    app = typer.Typer(
        help="Tasks of the swe domain: bugs synthesized in real repositories.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.command()
    def synthesize(
        repo: Annotated[str, typer.Option("--repo", help="repository name (see `repos`)")],
        count: Annotated[int, typer.Option("--count", min=1, help="validated tasks to make")] = 20,
        seed: Annotated[int, typer.Option("--seed", help="orders the candidate bugs")] = 0,
        out: Annotated[
            Path | None,
            typer.Option("--out", help="folder of task files (default: the checked-in one)"),
        ] = None,
    ) -> None:
        """Synthesize COUNT bugs in REPO, each caught by its tests and fixed by its gold patch."""
        from worldtrace.collectors.swe.repos import REPOS
        from worldtrace.collectors.swe.synthesis import SynthesisStats
        from worldtrace.collectors.swe.synthesis import synthesize as run_synthesis
        from worldtrace.collectors.swe.tasks import write_task_file
        from worldtrace.schemas.errors import InputError

        if repo not in REPOS:
            raise InputError(f"no swe repository {repo!r} (expected one of {', '.join(REPOS)})")
        console = Console(stderr=True)
        with Progress(
            TextColumn("synthesizing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bar = progress.add_task("tasks", total=count, note="")

            last: list[SynthesisStats] = []

            def report(stats: SynthesisStats) -> None:
                last[:] = [stats]
                progress.update(bar, completed=stats.validated, note=f"{stats.tried} tried")

            try:
                tasks = run_synthesis(repo, count=count, seed=seed, progress=report)
            except RuntimeError as error:  # fewer bugs caught than asked for
                raise InputError(str(error)) from None
        path = write_task_file(repo, REPOS[repo].version, tasks, folder=out)
        table = Table(title=f"swe tasks of {repo}", show_header=False, title_justify="left")
        table.add_row("validated", str(len(tasks)))
        if last:
            table.add_row("synthesis", last[0].summary())
        table.add_row("file", str(path))
        Console().print(table)

    @app.command("repos")
    def repos() -> None:
        """List the repositories tasks can be synthesized in."""
        from worldtrace.collectors.swe.repos import REPOS

        table = Table("name", "version", "shape")
        for repo in REPOS.values():
            table.add_row(repo.name, repo.version, repo.shape)
        Console().print(table)

    return typer.main.get_command(app)
