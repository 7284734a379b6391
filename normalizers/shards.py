"""Parquet shards with the shared schema, written atomically.

Shards carry the ``datasets.Features`` metadata (so screenshot columns decode as images) and
the worldtrace schema version. A shard is written under a temporary name and renamed when
complete, so a reader never sees half a file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import pyarrow.parquet as pq
from pydantic import BaseModel

from worldtrace.schemas import arrow_schema_of, to_table


class ShardWriter:
    """Streams records into ``part-NNNNN.parquet`` files of at most ``rows_per_shard`` rows."""

    def __init__(self, folder: Path, model: type[BaseModel], rows_per_shard: int = 50_000) -> None:
        if rows_per_shard < 1:
            raise ValueError("rows_per_shard must be at least 1")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.model = model
        self.schema = arrow_schema_of(model)
        self.rows_per_shard = rows_per_shard
        self.paths: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._tmp: Path | None = None
        self._in_shard = 0

    def write(self, records: Sequence[BaseModel]) -> None:
        """Append records, starting a new shard whenever the current one is full."""
        while records:
            if self._writer is None:
                self._open()
            room = self.rows_per_shard - self._in_shard
            batch, records = records[:room], records[room:]
            assert self._writer is not None
            self._writer.write_table(to_table(batch, self.model))
            self._in_shard += len(batch)
            self.rows += len(batch)
            if self._in_shard >= self.rows_per_shard:
                self._close_shard()

    def _open(self) -> None:
        final = self.folder / f"part-{len(self.paths):05d}.parquet"
        self._tmp = final.with_suffix(".parquet.tmp")
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="zstd")
        self.paths.append(final)
        self._in_shard = 0

    def _close_shard(self) -> None:
        if self._writer is None or self._tmp is None:
            return
        self._writer.close()
        os.replace(self._tmp, self.paths[-1])
        self._writer, self._tmp = None, None

    def close(self) -> list[Path]:
        """Finish the last shard and return every shard path."""
        self._close_shard()
        return self.paths

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        elif self._writer is not None and self._tmp is not None:
            self._writer.close()
            self._tmp.unlink(missing_ok=True)
            self.paths.pop()
