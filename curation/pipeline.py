"""The curation run: datatrove stages from transition shards to a curated corpus folder.

Output layout::

    <out>/transitions/<domain>/part-<rank>-NNNNN.parquet   curated transitions, shared schema
    <out>/episodes.parquet      the input's episodes that still have transitions (if any)
    <out>/quarantine.jsonl      unreadable files, foreign schemas and invalid rows, with reasons
    <out>/stats.json            counts, rates and lengths per domain and environment version
    <out>/.curation/            datatrove logs and completions per stage, intermediate files,
                                the configuration and input fingerprint a resume must match

Stages (each a datatrove executor with its own logging folder, so a re-run skips completed
tasks): ``prepare`` (episode error counts, exact-dedup hashes, MinHash signatures),
``buckets`` and ``cluster`` (MinHash), ``resolve`` (exact duplicates, error episodes) and
``write`` (the filters, dedup, scrubbing and the writer). Stages ``prepare`` and ``write`` read
the same files with the same task count and the same deterministic prefix of steps, as
datatrove's MinHash requires; ``write`` skips the rows ``prepare`` found invalid instead of
validating every row again.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import select
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datatrove.executor.base import PipelineExecutor
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.pipeline.base import PipelineStep
from pydantic import BaseModel

from worldtrace.curation.config import CurationConfig
from worldtrace.curation.decontam import Decontaminate
from worldtrace.curation.dedup import (
    DropMarkedDuplicates,
    ExactDedupFilter,
    ExactDedupFind,
    ExactDedupSignature,
    minhash_buckets,
    minhash_cluster,
    minhash_filter,
    minhash_signature,
)
from worldtrace.curation.documents import TRANSITIONS_GLOB, TransitionReader
from worldtrace.curation.filters import (
    EpisodeErrorFilter,
    EpisodeErrorFind,
    EpisodeErrorTally,
    TransitionFilter,
)
from worldtrace.curation.logs import install as install_log_routing
from worldtrace.curation.scrub import ScrubStep
from worldtrace.curation.stats import build_stats, write_stats
from worldtrace.curation.tally import Checkpoint
from worldtrace.curation.writers import TransitionWriter
from worldtrace.schemas.errors import InputError, SetupError
from worldtrace.schemas.layouts import CorpusLayout


class CurationError(InputError, RuntimeError):
    """A curation stage did not complete all its tasks."""


class StageIncomplete(SetupError, CurationError):
    """A datatrove stage ended with tasks that did not complete (their logs say why)."""


class CurationReport(BaseModel):
    """What a curation run did."""

    output_dir: Path
    rows_in: int
    rows_out: int
    quarantined_files: int
    quarantined_rows: int
    stages_run: list[str]
    stages_skipped: list[str]
    stats_path: Path


class _Paths:
    """Where each stage reads and writes inside the output folder."""

    def __init__(self, input_dir: Path, output_dir: Path) -> None:
        self.input = input_dir / "transitions"
        self.output = output_dir
        self.work = output_dir / ".curation"
        self.logs = self.work / "logs"
        self.exact = self.work / "exact"
        self.episodes = self.work / "episodes"
        self.sigs = self.work / "minhash" / "signatures"
        self.buckets = self.work / "minhash" / "buckets"
        self.remove = self.work / "minhash" / "remove"
        self.tallies = self.work / "tallies"
        self.quarantine = self.work / "quarantine"
        self.validation = self.work / "validation"
        self.transitions = output_dir / "transitions"


def _prefix(config: CurationConfig, paths: _Paths, final: bool) -> list[PipelineStep]:
    """The steps both read passes share; only the final pass quarantines and counts."""
    tallies = paths.tallies if final else None
    # the prepare pass validates every row and records the verdicts; the write pass reuses
    # them, skipping the same rows so that positions line up for the dedup filters
    reader = TransitionReader(
        paths.input,
        quarantine_folder=paths.quarantine if final else None,
        tally_folder=tallies,
        validation_folder=paths.validation,
        reuse_validation=final,
    )
    steps: list[PipelineStep] = [reader]
    if not final:
        steps.append(EpisodeErrorTally(paths.episodes))
    steps += [
        Decontaminate(config.decontam, tally_folder=tallies),
        TransitionFilter(config.filters, tally_folder=tallies),
    ]
    return steps


def _stages(config: CurationConfig, paths: _Paths) -> list[tuple[str, list[PipelineStep], int]]:
    """Return ``(name, pipeline, tasks)`` for every stage, in order."""
    tasks, minhash = config.tasks, config.minhash
    prepare = _prefix(config, paths, final=False)
    prepare.append(ExactDedupSignature(paths.exact))
    if minhash.enabled:
        prepare.append(minhash_signature(paths.sigs, minhash))
    stages: list[tuple[str, list[PipelineStep], int]] = [("prepare", prepare, tasks)]
    if minhash.enabled:
        stages.append(
            ("buckets", [minhash_buckets(paths.sigs, paths.buckets, minhash)], minhash.num_buckets)
        )
        stages.append(("cluster", [minhash_cluster(paths.buckets, paths.remove, minhash)], 1))
    resolve: list[PipelineStep] = [
        ExactDedupFind(paths.exact, ranks=tasks),
        EpisodeErrorFind(paths.episodes, config.filters.max_error_fraction),
    ]
    stages.append(("resolve", resolve, 1))
    tallies = paths.tallies
    write = _prefix(config, paths, final=True)
    write.append(Checkpoint("before_minhash", tallies))
    if config.exact_dedup:
        write.append(ExactDedupFilter(paths.exact, tally_folder=tallies))
    if minhash.enabled:
        write.append(minhash_filter(paths.remove))
    write += [
        Checkpoint("after_minhash", tallies),
        DropMarkedDuplicates(tally_folder=tallies),
        EpisodeErrorFilter(paths.episodes, config.filters.error_episode, tally_folder=tallies),
    ]
    if config.scrub.enabled:
        write.append(ScrubStep(config.scrub, tally_folder=tallies))
    write += [
        TransitionWriter(paths.transitions, max_file_size=config.max_output_file_bytes),
        Checkpoint("written", tallies),
    ]
    stages.append(("write", write, tasks))
    return stages


def input_fingerprint(input_dir: Path) -> dict[str, list[int | str]]:
    """Return ``{path: [size, blake2b of the bytes]}`` for every transition shard read.

    Stages resumed on changed input would mix verdicts and document positions of two inputs
    (the dedup and validation records are by position), so a resumed run compares this. The
    content is hashed rather than the modification time read because collection rewrites
    identical shards when it resumes.
    """
    root = Path(input_dir) / "transitions"
    fingerprint: dict[str, list[int | str]] = {}
    for path in sorted(root.glob(TRANSITIONS_GLOB)):
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "blake2b").hexdigest()
        fingerprint[path.relative_to(root).as_posix()] = [path.stat().st_size, digest]
    return fingerprint


def _input_changes(before: dict[str, list[int | str]], now: dict[str, list[int | str]]) -> str:
    """Describe how the input changed, naming a few files of each kind of change."""

    def names(files: list[str]) -> str:
        shown = ", ".join(files[:3])
        return f"{shown} and {len(files) - 3} more" if len(files) > 3 else shown

    changes = {
        "added": sorted(set(now) - set(before)),
        "removed": sorted(set(before) - set(now)),
        "changed": sorted(name for name in set(now) & set(before) if now[name] != before[name]),
    }
    return "; ".join(f"{kind}: {names(files)}" for kind, files in changes.items() if files)


def _check_resume(paths: _Paths, settings: dict[str, Any], input_dir: Path) -> None:
    """Refuse to resume an output started with another configuration or on other input.

    On success the configuration and the input fingerprint are recorded for the next run.
    An output without a recorded fingerprint (curated before it was kept) adopts the
    current input.
    """
    settings_file = paths.work / "config.json"
    if settings_file.exists() and json.loads(settings_file.read_text()) != settings:
        raise CurationError(
            f"{paths.output} was curated with another configuration; use a fresh output folder"
        )
    input_file = paths.work / "input.json"
    fingerprint = input_fingerprint(input_dir)
    if input_file.exists():
        recorded = json.loads(input_file.read_text())
        if recorded != fingerprint:
            raise CurationError(
                f"the input {input_dir} changed since {paths.output} was started "
                f"({_input_changes(recorded, fingerprint)}); finished stages would not match "
                "it: use a fresh output folder (or delete this one) to curate it again"
            )
    settings_file.write_text(json.dumps(settings, indent=2, sort_keys=True))
    input_file.write_text(json.dumps(fingerprint, indent=1, sort_keys=True))


def _merge_quarantine(paths: _Paths) -> None:
    lines: list[str] = []
    for path in sorted(paths.quarantine.glob("*.jsonl")):
        lines += [line for line in path.read_text(encoding="utf-8").splitlines() if line]
    target = paths.output / "quarantine.jsonl"
    tmp = target.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    tmp.replace(target)


def _derive_episodes(input_dir: Path, paths: _Paths) -> int | None:
    """Copy the input's episodes that still have transitions; return how many, or None."""
    source = input_dir / "episodes.parquet"
    if not source.exists():
        return None
    files = sorted(paths.transitions.glob("*/*.parquet"))
    kept = (
        pl.scan_parquet(files).select("episode_id").unique().collect()["episode_id"].to_list()
        if files
        else []
    )
    table = pq.read_table(source)
    table = table.filter(pc.is_in(table["episode_id"], value_set=pc.cast(kept, "string")))
    table = table.sort_by("episode_id")
    target = paths.output / "episodes.parquet"
    tmp = target.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(target)
    return table.num_rows


_PR_SET_PDEATHSIG = 1
_dies_with_parent = False


def _die_with_parent() -> None:
    """Ask the kernel to kill this (child) process when its parent dies."""
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _children_die_with_parent() -> None:
    """Make every process this one forks from now on die with it (SIGKILL of curate).

    datatrove's executor forks a ``multiprocess`` manager; killed with SIGKILL, the parent can
    clean nothing up, and the forked manager (about 140 MB) lived on forever, holding the
    forkserver's pipe open so that the forkserver and its pool workers lived on too. With the
    manager gone the forkserver ends, and its workers follow (:class:`_LocalExecutor`).
    Registered once per process.
    """
    global _dies_with_parent
    if not _dies_with_parent:
        os.register_at_fork(after_in_child=_die_with_parent)
        _dies_with_parent = True


_watched: set[int] = set()


def _exit_with(pid: int) -> None:
    """End this process as soon as process ``pid`` ends (a pidfd wakes exactly then)."""
    if pid in _watched:
        return
    _watched.add(pid)
    try:
        watched = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)

    def watch() -> None:
        select.select([watched], [], [])
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-curate", daemon=True).start()


# Task logs go where the command says, in this process and in every pool worker that imports
# this module to run its steps (see curation/logs.py).
install_log_routing()


class _LocalExecutor(LocalPipelineExecutor):
    """datatrove's local executor whose pool workers end with the process that made them.

    Pool workers are forked by ``multiprocess``'s forkserver, not by this process, so the
    fork hook above does not reach them, and the forkserver outlives a killed parent by
    seconds: each worker watches the curate process itself while it runs a task.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._creator = os.getpid()

    def _run_for_rank(self, rank: int, local_rank: int = 0) -> Any:
        if os.getpid() != self._creator:  # a pool worker, not the curate process itself
            _exit_with(self._creator)
        return super()._run_for_rank(rank, local_rank)


_MAX_SOCKET_FOLDER = 70
"""Longest folder for multiprocess's sockets: it adds about 25 bytes, Linux allows 108."""


@contextlib.contextmanager
def _multiprocess_tempdir(paths: _Paths) -> Iterator[None]:
    """Keep ``multiprocess``'s temporary folder (``pymp-*``) where the next run cleans it.

    It holds the manager's and forkserver's sockets: under the output's work folder when the
    path is short enough for a Unix socket address (108 bytes), else under ``/tmp`` (short
    whatever ``TMPDIR`` says) with a name derived from the output. Whatever a killed run left
    there is removed first.
    """
    import multiprocess.process

    folder = paths.work / "tmp"
    if len(str(folder)) > _MAX_SOCKET_FOLDER:
        digest = hashlib.sha256(str(paths.output).encode()).hexdigest()[:12]
        short = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
        folder = short / f"worldtrace-curate-{digest}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    config = multiprocess.process.current_process()._config
    previous = config.get("tempdir")
    config["tempdir"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            config.pop("tempdir", None)
        else:
            config["tempdir"] = previous
        shutil.rmtree(folder, ignore_errors=True)


def _make_executor(
    kind: str, pipeline: list[PipelineStep], tasks: int, workers: int, logging_dir: Path
) -> PipelineExecutor:
    """A datatrove executor of ``kind`` for one stage; both kinds share the logging layout."""
    workers = max(1, min(workers, tasks))
    if kind == "ray":
        from datatrove.executor.ray import RayPipelineExecutor

        return RayPipelineExecutor(
            pipeline=pipeline,
            tasks=tasks,
            workers=workers,
            logging_dir=str(logging_dir),
            cpus_per_task=1,
            mem_per_cpu_gb=1,
        )
    return _LocalExecutor(
        pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=str(logging_dir)
    )


def _check_complete(name: str, executor: PipelineExecutor) -> None:
    """Raise :class:`CurationError` if any rank of the stage has no completion marker."""
    incomplete = executor.get_incomplete_ranks()
    if incomplete:
        raise StageIncomplete(
            f"curation stage {name!r} left tasks {incomplete} incomplete; see its logs under "
            f"{executor.logging_dir.path}/logs and run the same command again to finish"
        )


def _run_stage(
    name: str,
    pipeline: list[PipelineStep],
    tasks: int,
    workers: int,
    logs: Path,
    kind: str = "local",
) -> bool:
    """Run one stage; return whether any task had to run. Raise if a task is left incomplete.

    Completion is read from the stage's ``completions/`` folder for both executors: Ray's
    ``run()`` only logs a warning when tasks fail, so its result is never trusted.
    """
    executor = _make_executor(kind, pipeline, tasks, workers, logs / name)
    pending = executor.get_incomplete_ranks()
    if pending:
        executor.run()
    _check_complete(name, executor)
    return bool(pending)


def _start_ray(workers: int) -> bool:
    """Connect to Ray; return whether this call started a local instance to shut down later.

    An initialised Ray or ``RAY_ADDRESS`` means an existing cluster; otherwise a local
    instance with ``workers`` CPUs is started.
    """
    try:
        import ray
    except ImportError as error:
        raise SetupError("executor 'ray' needs the ray package: pip install ray") from error
    if ray.is_initialized():
        return False
    if os.environ.get("RAY_ADDRESS"):
        ray.init(address=os.environ["RAY_ADDRESS"])
        return False
    ray.init(num_cpus=max(1, workers), include_dashboard=False)
    return True


def curate(
    input_dir: Path,
    output_dir: Path,
    config: CurationConfig | None = None,
    workers: int = 1,
    executor: str = "local",
) -> CurationReport:
    """Curate the transitions of ``input_dir`` (a run or corpus folder) into ``output_dir``.

    Re-running on the same output finishes only the missing work; a finished output is left
    as it is. Raises :class:`CurationError` when a stage leaves tasks incomplete, and before
    any work when the output was started with another configuration or on input that has
    changed since (shards added, removed, resized or modified).

    ``executor`` is ``"local"`` (datatrove's local executor, ``workers`` processes) or
    ``"ray"``: the same stages and logging folders on Ray, using the initialised Ray or the
    cluster at ``RAY_ADDRESS``, else a local instance of ``workers`` CPUs started and shut
    down by this call.
    """
    if executor not in ("local", "ray"):
        raise InputError(f"unknown executor {executor!r} (expected 'local' or 'ray')")
    config = config or CurationConfig()
    input_dir, output_dir = Path(input_dir).resolve(), Path(output_dir).resolve()
    if not (input_dir / "transitions").is_dir():
        raise InputError(f"no transitions folder in {input_dir}: not a run or a corpus")
    paths = _Paths(input_dir, output_dir)
    paths.work.mkdir(parents=True, exist_ok=True)
    settings = config.model_dump(mode="json")
    _check_resume(paths, settings, input_dir)
    ran, skipped = [], []
    _children_die_with_parent()
    started_ray = _start_ray(workers) if executor == "ray" else False
    try:
        with _multiprocess_tempdir(paths):
            for name, pipeline, tasks in _stages(config, paths):
                did_run = _run_stage(name, pipeline, tasks, workers, paths.logs, executor)
                (ran if did_run else skipped).append(name)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    _merge_quarantine(paths)
    episodes = _derive_episodes(input_dir, paths)
    extra: dict[str, Any] = {"config": settings, "episodes_out": episodes}
    stats = build_stats(output_dir, paths.tallies, extra)
    stats_path = output_dir / "stats.json"
    write_stats(stats_path, stats)
    # Last: a corpus with a manifest is one curation finished (publishing checks it).
    CorpusLayout(output_dir).write_manifest([str(input_dir)])
    return CurationReport(
        output_dir=output_dir,
        rows_in=stats["total"]["rows_in"],
        rows_out=stats["total"]["rows_out"],
        quarantined_files=stats["quarantine"]["files"],
        quarantined_rows=stats["quarantine"]["rows"],
        stages_run=ran,
        stages_skipped=skipped,
        stats_path=stats_path,
    )
