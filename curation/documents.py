"""Transition parquet shards as datatrove ``Document``s, with bad input quarantined.

The document text is a deterministic rendering of a transition (observation, action and next
observation under section headers), its id the transition id and its metadata the full row
as stored (JSON columns as strings, screenshots as ``{"bytes", "path"}`` structs).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq
from datatrove.data import Document, DocumentsPipeline
from datatrove.io import DataFolder
from datatrove.pipeline.readers.base import BaseDiskReader

from worldtrace.curation.storage import Location, as_folder, describe, read_text, write_text
from worldtrace.curation.tally import TallyStep
from worldtrace.schemas import Transition, arrow_schema_of, from_row
from worldtrace.schemas.arrow import upgrade_transition_table

TRANSITION_COLUMNS: tuple[str, ...] = tuple(arrow_schema_of(Transition).names)


def row_texts(row: dict[str, Any]) -> tuple[str, str, str]:
    """Return the observation, action and next observation texts of a transition row."""
    return (
        (row.get("observation") or {}).get("text") or "",
        (row.get("action") or {}).get("text") or "",
        (row.get("next_observation") or {}).get("text") or "",
    )


def section_texts(doc: Document) -> tuple[str, str, str]:
    """Return the observation, action and next observation texts of a document's row."""
    return row_texts(doc.metadata)


def render_transition(row: dict[str, Any]) -> str:
    """Return the text of a transition row: three headed sections, never empty."""
    observation, action, next_observation = row_texts(row)
    return (
        f"### Observation\n{observation}\n### Action\n{action}\n"
        f"### Next observation\n{next_observation}"
    )


_ACTION_SECTION = re.compile(r"\n### Action\n(.*)\n### Next observation\n", re.DOTALL)


def rendered_action(text: str) -> str:
    """Return the action section of a :func:`render_transition` text ('' if there is none)."""
    match = _ACTION_SECTION.search(text)
    return match.group(1) if match else ""


class QuarantineLog:
    """Appends quarantined inputs (file, row id, reason) as JSON lines to one file per rank."""

    def __init__(self, folder: Location | None) -> None:
        self.folder = as_folder(folder) if folder is not None else None
        self._handle: Any = None

    def open(self, rank: int) -> None:
        """Start this rank's file afresh (a re-run rank replaces its previous entries)."""
        if self.folder is None:
            return
        self._handle = self.folder.open(f"{rank:05d}.jsonl", "w", encoding="utf-8")

    def add(self, file: str, reason: str, row_id: str | None = None) -> None:
        """Record one quarantined file or row."""
        if self._handle is None:
            return
        entry = {"file": file, "id": row_id, "reason": reason}
        self._handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class TransitionReader(BaseDiskReader, TallyStep):
    """Reads the transition shards listed in ``paths_file`` (relative to ``data_folder``).

    ``paths_file`` is a file in a folder (datatrove's list of files, one a line), shared
    between the ranks round robin: that is how one reader reads the shards of many runs, on
    any fsspec filesystem. It is read through its folder, not a URL, because a URL loses what
    the filesystem was opened with (an ``sftp://`` folder's key).
    Unreadable files, files with a foreign schema and rows failing validation are written to
    the quarantine folder with their reason (the file named by its full path or URL) and
    counted; the run goes on.

    Validation is the reader's main cost and curation reads the input twice, so the first
    pass can record its verdicts in ``validation_folder`` (``<rank>.json``: per file read, its
    row count and the positions and reasons of its invalid rows) and a later pass given
    ``reuse_validation=True`` skips exactly those rows, in the same order, without validating
    again. A file missing from the record or with another row count is validated afresh.
    """

    name = "📒 Transitions"
    tally_name = "reader"

    def __init__(
        self,
        data_folder: Location,
        paths_file: tuple[DataFolder, str],
        quarantine_folder: Location | None = None,
        tally_folder: Location | None = None,
        validation_folder: Location | None = None,
        reuse_validation: bool = False,
    ) -> None:
        BaseDiskReader.__init__(self, as_folder(data_folder), add_file_path=False)
        self.paths_file_in = paths_file
        self.tally_folder = as_folder(tally_folder) if tally_folder is not None else None
        self.quarantine = QuarantineLog(quarantine_folder)
        self.validation_folder = (
            as_folder(validation_folder) if validation_folder is not None else None
        )
        self.reuse_validation = reuse_validation
        # this rank's verdicts: {file: {"rows": n, "invalid": {position: reason}}}
        self._verdicts: dict[str, dict[str, Any]] = {}
        self._recorded: dict[str, dict[str, Any]] = {}

    def _reject(self, filepath: str, reason: str, row_id: str | None = None) -> None:
        self.quarantine.add(describe(self.data_folder, filepath), reason, row_id)
        self.tally(None, "quarantined_rows" if row_id is not None else "quarantined_files")

    def _load_verdicts(self, rank: int) -> dict[str, dict[str, Any]]:
        if not self.reuse_validation or self.validation_folder is None:
            return {}
        text = read_text(self.validation_folder, f"{rank:05d}.json")
        recorded: dict[str, dict[str, Any]] = json.loads(text) if text else {}
        return recorded

    def _save_verdicts(self, rank: int) -> None:
        if self.reuse_validation or self.validation_folder is None:
            return
        text = json.dumps(self._verdicts, sort_keys=True)
        write_text(self.validation_folder, f"{rank:05d}.json", text)

    def read_file(self, filepath: str) -> DocumentsPipeline:
        """Yield the valid transitions of one parquet file, quarantining the rest."""
        try:
            with self.data_folder.open(filepath, "rb") as handle:
                table = pq.read_table(handle)
        except Exception as error:  # any unreadable file is quarantined, never fatal
            self._reject(filepath, f"unreadable parquet: {type(error).__name__}: {error}")
            return
        table = upgrade_transition_table(table)
        missing = [name for name in TRANSITION_COLUMNS if name not in table.column_names]
        extra = [name for name in table.column_names if name not in TRANSITION_COLUMNS]
        if missing or extra:
            self._reject(filepath, f"foreign schema: missing columns {missing}, extra {extra}")
            return
        recorded = self._recorded.get(filepath)
        known: dict[str, str] | None = None
        if recorded is not None and recorded.get("rows") == table.num_rows:
            known = recorded["invalid"]
        invalid: dict[str, str] = {}
        self._verdicts[filepath] = {"rows": table.num_rows, "invalid": invalid}
        for index, row in enumerate(table.to_pylist()):
            if known is None:
                try:
                    from_row(Transition, row)
                    reason = None
                except Exception as error:
                    reason = f"invalid row: {error}"
            else:
                reason = known.get(str(index))
            if reason is not None:
                invalid[str(index)] = reason
                self._reject(filepath, reason, str(row.get("id") or f"{filepath}#{index}"))
                continue
            doc = Document(text=render_transition(row), id=row["id"], metadata=row)
            self.tally(doc, "read")
            yield doc

    def _shard(self, rank: int, world_size: int) -> list[str]:
        """The files of rank ``rank``: every ``world_size``-th line of the paths file from it."""
        folder, name = self.paths_file_in
        text = read_text(folder, name)
        if text is None:
            raise FileNotFoundError(f"the paths file {name} is missing from {folder.path}")
        names = [line.strip() for line in text.splitlines() if line.strip()]
        return names[rank::world_size]

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1) -> Iterator:
        """Read this rank's share of the files."""
        self.quarantine.open(rank)
        self._verdicts = {}
        self._recorded = self._load_verdicts(rank)
        try:
            if data:
                yield from data
            for document in self.read_files_shard(self._shard(rank, world_size)):
                self.update_doc_stats(document)
                yield document
        finally:
            self.quarantine.close()
        self._save_verdicts(rank)
        self.flush_tallies(rank)
