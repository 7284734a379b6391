"""Documents back to transition parquet shards with the shared schema.

Files are ``transitions/<domain>/part-<rank>-<NNNNN>.parquet`` with ``arrow_schema_of(Transition)``
(so ``datasets`` decodes screenshots as images). Curation labels go into the
``next_observation.meta`` JSON under ``"labels"``; no column is added.
"""

from __future__ import annotations

import json
import os
from typing import Any

from datatrove.data import Document
from datatrove.pipeline.writers.parquet import ParquetWriter

from worldtrace.curation.documents import TRANSITION_COLUMNS
from worldtrace.curation.labels import labels_of
from worldtrace.curation.storage import Location, as_folder
from worldtrace.schemas import Transition, arrow_schema_of


def row_of(doc: Document) -> dict[str, Any]:
    """Return the transition row of a document, with its labels merged into the meta JSON."""
    row = {name: doc.metadata.get(name) for name in TRANSITION_COLUMNS}
    labels = labels_of(doc)
    if labels:
        next_observation = dict(row["next_observation"])
        meta = json.loads(next_observation.get("meta") or "{}")
        meta["labels"] = sorted(set(meta.get("labels", [])) | set(labels))
        next_observation["meta"] = json.dumps(meta, sort_keys=True, ensure_ascii=False)
        row["next_observation"] = next_observation
    return row


class TransitionWriter(ParquetWriter):
    """Writes documents made by the transition reader back as transition rows."""

    name = "📒 Transitions"

    def __init__(self, output_folder: Location, max_file_size: int = 512 * 2**20) -> None:
        super().__init__(
            as_folder(output_folder),
            output_filename="${domain}/part-${rank}.parquet",
            compression="zstd",
            adapter=lambda _self, doc: row_of(doc),
            batch_size=1000,
            max_file_size=max_file_size,
            schema=arrow_schema_of(Transition),
        )

    def _get_filename_with_file_id(self, filename: str) -> str:
        """Number rotated files ``part-<rank>-<NNNNN>.parquet`` instead of prefixing them."""
        stem = filename.removesuffix(".parquet")
        name = f"{stem}-{self.file_id_counter[filename]:05d}.parquet"
        return name if os.path.dirname(filename) else os.path.basename(name)
