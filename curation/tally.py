"""Per-rank event counters that curation steps write beside the output for the stats."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from datatrove.data import Document
from datatrove.io import DataFolder
from datatrove.pipeline.base import PipelineStep

from worldtrace.curation.labels import EXCLUDED_KEY, curation_column
from worldtrace.curation.storage import Location, as_folder, write_text

ALL = "*"


def group_of(doc: Document) -> str:
    """Return the stats group ``domain|env version`` of a document built from a transition row."""
    env = doc.metadata.get("env") or {}
    version = env.get("version", "?") if isinstance(env, dict) else "?"
    return f"{doc.metadata.get('domain', '?')}|{version}"


class TallyStep(PipelineStep):
    """A pipeline step that counts events per domain and environment version.

    Counts are written to ``<tally_folder>/<tally_name>/<rank>.json`` when the step's input is
    exhausted; a rank that is run again overwrites its own file, so counts never double.
    """

    type = "🧮 - CURATION"
    tally_name = "step"

    def __init__(self, tally_folder: Location | None = None) -> None:
        super().__init__()
        self.tally_folder = as_folder(tally_folder) if tally_folder is not None else None
        self.tallies: Counter[str] = Counter()

    def tally(self, doc: Document | None, event: str, value: int = 1) -> None:
        """Count ``value`` occurrences of ``event`` for the document's group (or globally)."""
        group = group_of(doc) if doc is not None else f"{ALL}|{ALL}"
        self.tallies[f"{group}|{event}"] += value
        self.stat_update(event, value=value)

    def flush_tallies(self, rank: int) -> None:
        """Write this rank's counts (nothing happens without a tally folder)."""
        if self.tally_folder is None:
            return
        name = f"{self.tally_name}/{rank:05d}.json"
        write_text(self.tally_folder, name, json.dumps(dict(self.tallies), sort_keys=True))


def read_tallies(tally_folder: DataFolder) -> dict[str, Counter[str]]:
    """Sum every rank's counts: ``{tally_name: Counter("domain|env|event" -> n)}``."""
    result: dict[str, Counter[str]] = {}
    for path in tally_folder.list_files(glob_pattern="*/*.json"):
        with tally_folder.open(path, "r", encoding="utf-8") as handle:
            data: dict[str, Any] = json.load(handle)
        total = result.setdefault(path.split("/")[0], Counter())
        total.update({key: int(value) for key, value in data.items()})
    return dict(sorted(result.items()))


class CountWritten(TallyStep):
    """Counts the rows written, the training targets among them and what marked the others."""

    name = "checkpoint written"
    tally_name = "written"

    def run(self, data: Any, rank: int = 0, world_size: int = 1) -> Any:
        """Forward every document, counting it and its marks."""
        for doc in data:
            self.tally(doc, "written")
            marks = curation_column(doc)
            if marks["target"]:
                self.tally(doc, "targets")
            if marks["duplicate_rule"]:
                self.tally(doc, f"duplicates:{marks['duplicate_rule']}")
            for rule in doc.metadata.get(EXCLUDED_KEY, []):
                self.tally(doc, f"excluded:{rule}")
            for rule in marks["labels"]:
                self.tally(doc, f"labelled:{rule}")
            yield doc
        self.flush_tallies(rank)
