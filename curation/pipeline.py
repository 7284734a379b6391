"""The curation run: datatrove stages from transition shards to a curated corpus folder.

Input: one or many runs and corpora of any domains (:mod:`worldtrace.curation.inputs`),
read as one: their shards are listed in ``.curation/inputs.txt``, datatrove's paths file,
relative to the folder that holds them all. Input and output may be local paths or any fsspec
URL; every file is reached through datatrove's ``DataFolder`` (:mod:`.storage`).

Output layout::

    <out>/transitions/<domain>/part-<rank>-NNNNN.parquet   curated transitions, shared schema
    <out>/episodes.parquet      the inputs' episodes that curation kept (if any)
    <out>/quarantine.jsonl      unreadable files, foreign schemas and invalid rows, with reasons
    <out>/stats.json            counts, rates and lengths per domain and environment version
    <out>/corpus.json           the manifest, with every input; written last
    <out>/.curation/            datatrove logs and completions per stage, intermediate files,
                                the configuration and input fingerprint a resume must match

**The episode is the unit.** A world model learns each transition in the context of its
episode's history, so curation keeps or drops whole episodes and never leaves a hole in a
kept one: its first state, every step and its final reward are written. Duplicates and rows a
rule excludes stay as history and are marked ``curation.target = false`` (with
``curation.duplicate_of``, ``duplicate_rule`` and ``labels`` saying why); training jobs and
the exports take their targets by that column. Episodes are dropped only by a rule in
``drop`` mode, by decontamination, or as error episodes when configured so.

Stages (each a datatrove executor with its own logging folder, so a re-run skips completed
tasks): ``prepare`` (the rules, episode tallies, ids, exact-dedup hashes, MinHash
signatures), ``buckets`` and ``cluster`` (MinHash), ``resolve`` (episode verdicts, then the
duplicate groups and their targets) and ``write`` (marks, episode verdicts, scrubbing and the
writer). Stages ``prepare`` and ``write`` read the same files with the same task count and
the same documents reach their dedup steps, as datatrove's MinHash requires; ``write`` skips
the rows ``prepare`` found invalid instead of validating every row again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from datatrove.executor.base import PipelineExecutor
from datatrove.executor.local import LocalPipelineExecutor
from datatrove.io import DataFolder
from datatrove.pipeline.base import PipelineStep
from fsspec.implementations.memory import MemoryFileSystem
from pydantic import BaseModel, Field

from worldtrace.curation.config import CurationConfig
from worldtrace.curation.decontam import Decontaminate
from worldtrace.curation.dedup import (
    ExactDedupSignature,
    FindDuplicates,
    MarkDuplicates,
    RecordIds,
    minhash_buckets,
    minhash_cluster,
    minhash_signature,
)
from worldtrace.curation.documents import TransitionReader
from worldtrace.curation.filters import (
    ApplyEpisodeVerdicts,
    EpisodeTally,
    EpisodeVerdicts,
    TransitionFilter,
    read_verdicts,
)
from worldtrace.curation.inputs import (
    CORPUS_MANIFEST,
    EPISODES_TABLE,
    TRANSITIONS,
    CurationInput,
    find_inputs,
    shared_folder,
)
from worldtrace.curation.logs import install as install_log_routing
from worldtrace.curation.parent_death import die_with_parent
from worldtrace.curation.scrub import ScrubStep
from worldtrace.curation.stats import build_stats, write_stats
from worldtrace.curation.storage import (
    Location,
    as_folder,
    describe,
    local_path,
    read_text,
    scan_parquet,
    subfolder,
    write_bytes_file,
    write_json,
    write_text,
)
from worldtrace.curation.tally import CountWritten
from worldtrace.curation.writers import TransitionWriter
from worldtrace.schemas.arrow import upgrade_episode_table
from worldtrace.schemas.errors import InputError, SetupError
from worldtrace.schemas.layouts import CorpusLayout, CorpusManifest


class CurationError(InputError, RuntimeError):
    """A curation stage did not complete all its tasks."""


class StageIncomplete(SetupError, CurationError):
    """A datatrove stage ended with tasks that did not complete (their logs say why)."""


class CurationReport(BaseModel):
    """What a curation run did."""

    output_dir: str = Field(description="the corpus: an absolute path or an fsspec URL")
    inputs: list[str] = Field(description="the runs and corpora curated into it")
    rows_in: int
    rows_out: int = Field(description="rows of the kept episodes, all written")
    targets: int = Field(description="rows out that are training targets")
    episodes_dropped: dict[str, int] = Field(description="episodes dropped, by rule")
    quarantined_files: int
    quarantined_rows: int
    stages_run: list[str]
    stages_skipped: list[str]
    stats_path: str


class _Paths:
    """Where each stage reads and writes: the inputs' shared folder and the output's folders."""

    def __init__(self, inputs: list[CurationInput], output: DataFolder) -> None:
        self.inputs = inputs
        self.input, self.files = shared_folder(inputs)
        self.output = output
        self.work = subfolder(output, ".curation")
        self.paths_file = "inputs.txt"
        """In ``work``: datatrove's paths file, listing every input shard."""
        self.logs = subfolder(self.work, "logs")
        self.ids = subfolder(self.work, "ids")
        self.exact_signatures = subfolder(self.work, "exact/signatures")
        self.duplicates = subfolder(self.work, "duplicates")
        self.episodes = subfolder(self.work, "episodes")
        self.sigs = subfolder(self.work, "minhash/signatures")
        self.buckets = subfolder(self.work, "minhash/buckets")
        self.clusters = subfolder(self.work, "minhash/clusters")
        self.tallies = subfolder(self.work, "tallies")
        self.quarantine = subfolder(self.work, "quarantine")
        self.validation = subfolder(self.work, "validation")
        self.transitions = subfolder(output, "transitions")


def _reader(paths: _Paths, final: bool) -> TransitionReader:
    """The reader of both passes; only the final pass quarantines and counts.

    The first pass validates every row and records the verdicts; the final pass reuses them,
    skipping the same rows, so that positions line up for the dedup marks.
    """
    return TransitionReader(
        paths.input,
        (paths.work, paths.paths_file),
        quarantine_folder=paths.quarantine if final else None,
        tally_folder=paths.tallies if final else None,
        validation_folder=paths.validation,
        reuse_validation=final,
    )


def _stages(config: CurationConfig, paths: _Paths) -> list[tuple[str, list[PipelineStep], int]]:
    """Return ``(name, pipeline, tasks)`` for every stage, in order.

    ``prepare`` reads every row once: the rules mark it, the episode tallies count it, and
    its exact and MinHash signatures and id are written. ``resolve`` decides every episode's
    fate and finds the duplicates (their targets taken from kept episodes only). ``write``
    reads the rows again, marks them, drops dropped episodes, scrubs and writes.
    """
    tasks, minhash = config.tasks, config.minhash
    prepare: list[PipelineStep] = [
        _reader(paths, final=False),
        Decontaminate(config.decontam),
        TransitionFilter(config.filters),
        EpisodeTally(paths.episodes),
        RecordIds(paths.ids),
    ]
    if config.exact_dedup:
        prepare.append(ExactDedupSignature(paths.exact_signatures))
    if minhash.enabled:
        prepare.append(minhash_signature(paths.sigs, minhash))
    stages: list[tuple[str, list[PipelineStep], int]] = [("prepare", prepare, tasks)]
    if minhash.enabled:
        stages.append(
            ("buckets", [minhash_buckets(paths.sigs, paths.buckets, minhash)], minhash.num_buckets)
        )
        stages.append(("cluster", [minhash_cluster(paths.buckets, paths.clusters, minhash)], 1))
    resolve: list[PipelineStep] = [
        EpisodeVerdicts(paths.episodes, config.filters),
        FindDuplicates(
            paths.ids,
            paths.duplicates,
            paths.exact_signatures if config.exact_dedup else None,
            paths.clusters if minhash.enabled else None,
            verdicts=paths.episodes,
        ),
    ]
    stages.append(("resolve", resolve, 1))
    tallies = paths.tallies
    write: list[PipelineStep] = [
        _reader(paths, final=True),
        TransitionFilter(config.filters),
        MarkDuplicates(paths.duplicates, tally_folder=tallies),
        ApplyEpisodeVerdicts(paths.episodes, tally_folder=tallies),
    ]
    if config.scrub.enabled:
        write.append(ScrubStep(config.scrub, tally_folder=tallies))
    write += [
        TransitionWriter(paths.transitions, max_file_size=config.max_output_file_bytes),
        CountWritten(tallies),
    ]
    stages.append(("write", write, tasks))
    return stages


Fingerprint = dict[str, dict[str, list[int | str]]]
"""``{input: {shard relative to its transitions/: [size, blake2b of the bytes]}}``."""


def input_fingerprint(inputs: list[CurationInput]) -> Fingerprint:
    """Return the size and content hash of every transition shard of every input.

    Stages resumed on changed input would mix verdicts and document positions of two inputs
    (the dedup and validation records are by position), so a resumed run compares this. The
    content is hashed rather than the modification time read because collection rewrites
    identical shards when it resumes.
    """
    fingerprint: Fingerprint = {}
    for found in inputs:
        files: dict[str, list[int | str]] = {}
        for shard in found.shards:
            with found.folder.open(shard, "rb") as handle:
                digest = hashlib.file_digest(handle, "blake2b").hexdigest()
            size = int(found.folder.size(shard))
            files[shard.removeprefix(f"{TRANSITIONS}/")] = [size, digest]
        fingerprint[found.url] = files
    return fingerprint


def _names(files: list[str]) -> str:
    shown = ", ".join(files[:3])
    return f"{shown} and {len(files) - 3} more" if len(files) > 3 else shown


def _input_changes(before: Fingerprint, now: Fingerprint) -> str:
    """Describe how the inputs changed, naming a few of each kind of change."""
    changes = []
    if added := sorted(set(now) - set(before)):
        changes.append(f"inputs added: {_names(added)}")
    if removed := sorted(set(before) - set(now)):
        changes.append(f"inputs removed: {_names(removed)}")
    for url in [url for url in now if url in before]:
        old, new = before[url], now[url]
        kinds = {
            "added": sorted(set(new) - set(old)),
            "removed": sorted(set(old) - set(new)),
            "changed": sorted(name for name in set(new) & set(old) if new[name] != old[name]),
        }
        if described := "; ".join(f"{k}: {_names(v)}" for k, v in kinds.items() if v):
            changes.append(f"in {url}: {described}")
    return "; ".join(changes)


def _recorded_fingerprint(text: str, inputs: list[CurationInput]) -> Fingerprint:
    """Read ``input.json``; one written before inputs were listed covers a single input."""
    recorded = json.loads(text)
    if recorded and all(isinstance(value, list) for value in recorded.values()):
        return {inputs[0].url if len(inputs) == 1 else "(one earlier input)": recorded}
    fingerprint: Fingerprint = recorded
    return fingerprint


def _check_resume(paths: _Paths, settings: dict[str, Any]) -> None:
    """Refuse to resume an output started with another configuration or on other input.

    On success the configuration, the input fingerprint and the list of shards the readers
    share (``inputs.txt``, datatrove's paths file) are recorded for the next run. An output
    without a recorded fingerprint (curated before it was kept) adopts the current input.
    """
    work, output = paths.work, describe(paths.output)
    recorded_settings = read_text(work, "config.json")
    if recorded_settings is not None and json.loads(recorded_settings) != settings:
        raise CurationError(
            f"{output} was curated with another configuration; use a fresh output folder"
        )
    fingerprint = input_fingerprint(paths.inputs)
    recorded = read_text(work, "input.json")
    if recorded is not None:
        before = _recorded_fingerprint(recorded, paths.inputs)
        if before != fingerprint:
            raise CurationError(
                f"the input changed since {output} was started "
                f"({_input_changes(before, fingerprint)}); finished stages would not match "
                "it: use a fresh output folder (or delete this one) to curate it again"
            )
    write_text(work, "config.json", json.dumps(settings, indent=2, sort_keys=True))
    write_text(work, "input.json", json.dumps(fingerprint, indent=1, sort_keys=True))
    write_text(work, "inputs.txt", "".join(f"{name}\n" for name in paths.files))


def _merge_quarantine(paths: _Paths) -> None:
    lines: list[str] = []
    for name in paths.quarantine.list_files(glob_pattern="*.jsonl", recursive=False):
        text = read_text(paths.quarantine, name) or ""
        lines += [line for line in text.splitlines() if line]
    write_text(paths.output, "quarantine.jsonl", "".join(f"{line}\n" for line in lines))


def _read_episodes(found: CurationInput) -> pa.Table:
    with found.folder.open(EPISODES_TABLE, "rb") as handle:
        return upgrade_episode_table(pq.read_table(handle))


def _merge_episodes(inputs: list[CurationInput]) -> pa.Table | None:
    """The inputs' episodes tables as one, each episode once.

    An episode in two inputs (a run and a corpus curated from it) is the same episode when
    its rows are equal, and kept once; differing rows are two runs that share a run name,
    whose transitions would share ids: an :class:`InputError`.
    """
    tables, sources = [], []
    for found in inputs:
        if found.has_episodes:
            table = _read_episodes(found)
            tables.append(table)
            sources += [found.url] * table.num_rows
    if not tables:
        return None
    merged = pa.concat_tables(tables, promote_options="default")
    # Imported here, as in .storage and .stats, so that datatrove's workers (and the
    # forkserver they are forked from, see _LocalExecutor) never import polars or start its
    # threads: only this process runs polars.
    import polars as pl

    # A column gives a Series; pyarrow has no types here, so polars' overload cannot tell.
    ids = cast(pl.Series, pl.from_arrow(merged["episode_id"]))
    first = ids.is_first_distinct().to_arrow()
    if pc.all(first).as_py():
        return merged
    positions: dict[str, int] = {}
    ids = merged["episode_id"].to_pylist()
    for index, episode in enumerate(ids):
        if episode not in positions:
            positions[episode] = index
            continue
        kept = positions[episode]
        if merged.slice(index, 1).to_pylist() != merged.slice(kept, 1).to_pylist():
            raise InputError(
                f"episode {episode} is in {sources[kept]} and in {sources[index]} with "
                "different records: two runs share a run name; curate them into separate "
                "corpora or collect one again under another --run-name"
            )
    return merged.filter(first)


def _derive_episodes(paths: _Paths) -> int | None:
    """Write the inputs' episodes that still have transitions; return how many, or None."""
    table = _merge_episodes(paths.inputs)
    if table is None:
        return None
    files = paths.transitions.list_files(glob_pattern="*/*.parquet")
    kept = (
        scan_parquet(paths.transitions, files)
        .select("episode_id")
        .unique()
        .collect()["episode_id"]
        .to_list()
        if files
        else []
    )
    table = table.filter(pc.is_in(table["episode_id"], value_set=pc.cast(kept, "string")))
    table = table.sort_by("episode_id")
    write_bytes_file(
        paths.output,
        EPISODES_TABLE,
        lambda handle: pq.write_table(table, handle, compression="zstd"),
    )
    return table.num_rows


_dies_with_parent = False


def _children_die_with_parent() -> None:
    """Make every process this one forks from now on die with it (SIGKILL of curate).

    datatrove's executor forks a ``multiprocess`` manager; killed with SIGKILL, the parent can
    clean nothing up, and the forked manager (about 140 MB) lived on forever, holding the
    forkserver's pipe open so that the forkserver and its pool workers lived on too. The
    forkserver and its workers die with curate too (:class:`_LocalExecutor`). Registered once
    per process.
    """
    global _dies_with_parent
    if not _dies_with_parent:
        os.register_at_fork(after_in_child=die_with_parent)
        _dies_with_parent = True


# Task logs go where the command says, in this process and in every pool worker that imports
# this module to run its steps (see curation/logs.py).
install_log_routing()


_FORKSERVER_PRELOAD = [
    "__main__",
    "worldtrace.curation.forkserver_preload",
    "worldtrace.curation.pipeline",
]
"""What ``multiprocess``'s forkserver imports as it starts, in order (:class:`_LocalExecutor`)."""


class _LocalExecutor(LocalPipelineExecutor):
    """datatrove's local executor whose pool workers end with the process that made them.

    Pool workers are forked by ``multiprocess``'s forkserver, which curate starts with
    ``exec``, so the fork hook above does not reach them: the forkserver loads
    :mod:`worldtrace.curation.forkserver_preload` first, which makes the kernel kill it when
    curate dies and each worker when the forkserver dies.

    The forkserver then imports this module, and with it every step's module, datatrove and
    pyarrow: each stage starts a new pool, and each of its workers, forked from the
    forkserver, starts with them imported instead of importing them itself (about 2 s of CPU
    per worker and stage, which made the pool's start the longest part of a small stage).
    The forkserver runs none of their code. polars stays out of it (curate alone imports it):
    its import starts threads, and a worker forked while one of them held a lock would
    inherit the lock held for good (pyarrow's allocator, whose import starts a thread too,
    takes its locks around a fork). It lasts for one curation (:func:`_stop_forkserver_in`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.start_method == "forkserver":
            import multiprocess

            multiprocess.get_context("forkserver").set_forkserver_preload(_FORKSERVER_PRELOAD)


_MAX_SOCKET_FOLDER = 70
"""Longest folder for multiprocess's sockets: it adds about 25 bytes, Linux allows 108."""


@contextlib.contextmanager
def _multiprocess_tempdir(paths: _Paths) -> Iterator[None]:
    """Keep ``multiprocess``'s temporary folder (``pymp-*``) where the next run cleans it.

    It holds the manager's and forkserver's sockets: under the output's work folder when that
    is on the local disk and its path is short enough for a Unix socket address (108 bytes),
    else under ``/tmp`` (short whatever ``TMPDIR`` says) with a name derived from the output.
    Whatever a killed run left there is removed first. The forkserver started in it is stopped
    at the end (:func:`_stop_forkserver_in`).
    """
    import multiprocess.process

    work = local_path(paths.work)
    folder = work / "tmp" if work is not None else None
    if folder is None or len(str(folder)) > _MAX_SOCKET_FOLDER:
        digest = hashlib.sha256(describe(paths.output).encode()).hexdigest()[:12]
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
        _stop_forkserver_in(folder)
        if previous is None:
            config.pop("tempdir", None)
        else:
            config["tempdir"] = previous
        shutil.rmtree(folder, ignore_errors=True)


def _stop_forkserver_in(folder: Path) -> None:
    """Stop ``multiprocess``'s forkserver if it listens in ``folder``, which is about to go.

    The forkserver outlives the pools it forked, and ``multiprocess`` reuses it while it runs:
    left running, the next curation of this process with workers would connect to a socket
    removed with ``folder`` (``FileNotFoundError``), and it would keep its preloaded modules
    in memory. Its pool workers have ended with their stages, so it stops at once.
    """
    from multiprocess import forkserver

    server = forkserver._forkserver
    address = server._forkserver_address
    running = server._forkserver_pid is not None and isinstance(address, str)
    if running and Path(address).parent == folder:
        server._stop()


def _make_executor(
    kind: str, pipeline: list[PipelineStep], tasks: int, workers: int, logging_dir: Location
) -> PipelineExecutor:
    """A datatrove executor of ``kind`` for one stage; both kinds share the logging layout."""
    workers = max(1, min(workers, tasks))
    if kind == "ray":
        from datatrove.executor.ray import RayPipelineExecutor

        return RayPipelineExecutor(
            pipeline=pipeline,
            tasks=tasks,
            workers=workers,
            logging_dir=as_folder(logging_dir),
            cpus_per_task=1,
            mem_per_cpu_gb=1,
        )
    return _LocalExecutor(
        pipeline=pipeline, tasks=tasks, workers=workers, logging_dir=as_folder(logging_dir)
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
    logs: Location,
    kind: str = "local",
) -> bool:
    """Run one stage; return whether any task had to run. Raise if a task is left incomplete.

    Completion is read from the stage's ``completions/`` folder for both executors: Ray's
    ``run()`` only logs a warning when tasks fail, so its result is never trusted.
    """
    executor = _make_executor(kind, pipeline, tasks, workers, subfolder(as_folder(logs), name))
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


UNSEEKABLE_OUTPUTS = ("sftp", "ssh")
"""Filesystems whose files lack the ``size`` datatrove's MinHash stage reads its work files by."""


def _check_output_filesystem(corpus: DataFolder) -> None:
    """Refuse, before any work, an output datatrove's stages cannot read their files back on."""
    protocols = (
        corpus.fs.protocol if isinstance(corpus.fs.protocol, tuple) else (corpus.fs.protocol,)
    )
    if set(protocols) & set(UNSEEKABLE_OUTPUTS):
        raise InputError(
            f"cannot curate into {describe(corpus)}: datatrove's MinHash stage reads its work "
            "files by their size, which fsspec's SFTP files do not have. Curate into a local "
            "folder or an object store (s3://, gs://, hf://), then publish from there; "
            "runs on sftp:// are read as inputs"
        )


def _check_shared_memory(paths: _Paths, workers: int, executor: str) -> None:
    """Refuse ``memory://`` folders where other processes would have to see them.

    fsspec's memory filesystem lives in one process: datatrove's pool workers (``workers``
    above 1) and Ray's workers would write their signatures, tallies and shards into copies
    of it that this process never sees. With one worker the local executor runs every task
    in this process, so ``memory://`` works there.
    """
    if workers <= 1 and executor == "local":
        return
    for folder in (paths.input, paths.output):
        if isinstance(folder.fs, MemoryFileSystem):
            raise InputError(
                f"{describe(folder)} is in this process's memory, which datatrove's worker "
                "processes cannot share: use --workers 1 with the local executor, or a "
                "folder on disk or in object storage"
            )


def curate(
    sources: Location | Sequence[str | Path],
    output: str | Path,
    config: CurationConfig | None = None,
    workers: int = 1,
    executor: str = "local",
) -> CurationReport:
    """Curate the transitions of ``sources`` into one corpus at ``output``.

    ``sources`` is one or several runs or corpora, folders of them or globs (see
    :mod:`worldtrace.curation.inputs`), of any domains; each may be a local path or an fsspec
    URL, as may ``output``. Their shards are read as one input: exact and near duplicates are
    found across all of them (the first kept, by input URL, file and position), their episodes
    tables merged, and every input recorded in ``corpus.json``.

    Re-running on the same output finishes only the missing work; a finished output is left
    as it is. Raises :class:`InputError` for a source that holds no run or corpus, and
    :class:`CurationError` when a stage leaves tasks incomplete, and before any work when the
    output was started with another configuration or on inputs that have changed since
    (inputs or shards added or removed, shards resized or modified).

    ``executor`` is ``"local"`` (datatrove's local executor, ``workers`` processes) or
    ``"ray"``: the same stages and logging folders on Ray, using the initialised Ray or the
    cluster at ``RAY_ADDRESS``, else a local instance of ``workers`` CPUs started and shut
    down by this call. ``memory://`` works with the local executor and one worker only
    (:func:`_check_shared_memory` says why).
    """
    if executor not in ("local", "ray"):
        raise InputError(f"unknown executor {executor!r} (expected 'local' or 'ray')")
    config = config or CurationConfig()
    listed = [sources] if isinstance(sources, str | Path | DataFolder) else list(sources)
    corpus = as_folder(output)
    _check_output_filesystem(corpus)
    sources = [describe(s) if isinstance(s, DataFolder) else s for s in listed]
    paths = _Paths(find_inputs(sources, output=describe(corpus)), corpus)
    _check_shared_memory(paths, workers, executor)
    if not paths.files and read_text(paths.work, "input.json") is None:
        names = ", ".join(found.url for found in paths.inputs)
        raise InputError(f"no transition shards in {names}: nothing to curate")
    settings = config.model_dump(mode="json")
    _check_resume(paths, settings)
    ran: list[str] = []
    skipped: list[str] = []
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
    episodes = _derive_episodes(paths)
    urls = [found.url for found in paths.inputs]
    dropped: dict[str, int] = {}
    for verdict in read_verdicts(paths.episodes).values():
        if verdict.get("drop"):
            dropped[verdict["drop"]] = dropped.get(verdict["drop"], 0) + 1
    extra: dict[str, Any] = {
        "config": settings,
        "episodes_out": episodes,
        "episodes_dropped": dict(sorted(dropped.items())),
        "inputs": urls,
    }
    stats = build_stats(paths.transitions, paths.tallies, extra)
    write_stats(paths.output, "stats.json", stats)
    # Last: a corpus with a manifest is one curation finished (publishing checks it).
    _write_manifest(paths.output, urls)
    return CurationReport(
        output_dir=describe(paths.output),
        inputs=urls,
        rows_in=stats["total"]["rows_in"],
        rows_out=stats["total"]["rows_out"],
        targets=stats["total"]["targets"],
        episodes_dropped=stats["episodes_dropped"],
        quarantined_files=stats["quarantine"]["files"],
        quarantined_rows=stats["quarantine"]["rows"],
        stages_run=ran,
        stages_skipped=skipped,
        stats_path=describe(paths.output, "stats.json"),
    )


def _write_manifest(output: DataFolder, inputs: list[str]) -> None:
    """Write ``corpus.json`` (with the layouts module's writer on a local disk)."""
    root = local_path(output)
    if root is not None:
        CorpusLayout(root).write_manifest(inputs)
    else:
        write_json(output, CORPUS_MANIFEST, CorpusManifest(inputs=inputs).model_dump(mode="json"))
