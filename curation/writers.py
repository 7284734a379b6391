"""Documents back to transition parquet shards with the shared schema.

Files are ``transitions/<domain>/part-<rank>-<NNNNN>.parquet`` with ``arrow_schema_of(Transition)``
(so ``datasets`` decodes screenshots as images). The ``curation`` column is made from the
marks the steps left on the document (:func:`worldtrace.curation.labels.curation_column`),
whatever the input row held: a corpus curated again is marked afresh.
"""

from __future__ import annotations

import os
from typing import Any

from datatrove.data import Document
from datatrove.pipeline.writers.parquet import ParquetWriter

from worldtrace.curation.documents import TRANSITION_COLUMNS
from worldtrace.curation.labels import curation_column
from worldtrace.curation.storage import Location, as_folder
from worldtrace.schemas import Transition, arrow_schema_of


def row_of(doc: Document) -> dict[str, Any]:
    """Return the transition row of a document, its ``curation`` column from its marks."""
    row = {name: doc.metadata.get(name) for name in TRANSITION_COLUMNS}
    row["curation"] = curation_column(doc)
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
