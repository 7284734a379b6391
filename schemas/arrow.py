"""Arrow and ``datasets`` views of the records, derived from the pydantic models.

The ``datasets.Features`` are built by walking a model's fields; the Arrow schema is
``features.arrow_schema``, so the Hugging Face metadata that makes screenshot columns decode
as images is always present. Nothing here restates a field list.
"""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pyarrow as pa
from datasets import Features, Image, List, Value
from pydantic import BaseModel

from worldtrace.schemas.records import (
    SCHEMA_VERSION,
    Curation,
    Episode,
    ImageColumn,
    JsonColumn,
    Record,
    Transition,
)

SCHEMA_VERSION_KEY = b"worldtrace.schema_version"
RECORD_KEY = b"worldtrace.record"

R = TypeVar("R", bound=Record)

_SCALARS: dict[type, str] = {
    str: "string",
    int: "int64",
    float: "float64",
    bool: "bool",
    datetime: "timestamp[us, tz=UTC]",
}


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


@dataclass(frozen=True)
class _Column:
    """How one field is stored: its bare type and kind ('json', 'image', 'model' or None).

    For kind 'models' (a tuple of records, stored as a list of structs) ``base`` is the item's
    model.
    """

    name: str
    base: Any
    kind: str | None


def _column(name: str, annotation: Any, metadata: list[Any]) -> _Column:
    annotation = _unwrap_optional(annotation)
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        metadata = [*metadata, *extra]
        annotation = base
    if any(isinstance(item, JsonColumn) for item in metadata):
        return _Column(name, annotation, "json")
    if any(isinstance(item, ImageColumn) for item in metadata):
        return _Column(name, annotation, "image")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Column(name, annotation, "model")
    if get_origin(annotation) in (tuple, list):
        item = get_args(annotation)[0]
        if isinstance(item, type) and issubclass(item, BaseModel):
            return _Column(name, item, "models")
    return _Column(name, annotation, None)


@functools.cache
def _columns(model: type[BaseModel]) -> tuple[_Column, ...]:
    # Derived once per model: rows are converted by the million, the fields never change.
    return tuple(
        _column(name, field.annotation, list(field.metadata))
        for name, field in model.model_fields.items()
    )


def _feature_for(column: _Column) -> Any:
    if column.kind == "json":
        return Value("string")
    if column.kind == "image":
        return Image()
    if column.kind == "model":
        return features_of(column.base)
    if column.kind == "models":
        return List(features_of(column.base))
    if get_origin(column.base) is Literal:
        return Value("string")
    if get_origin(column.base) in (tuple, list):
        item = get_args(column.base)[0]
        if item in _SCALARS:
            return List(Value(_SCALARS[item]))
    if column.base in _SCALARS:
        return Value(_SCALARS[column.base])
    raise TypeError(f"no column type for field {column.name!r} ({column.base!r})")


def features_of(model: type[BaseModel]) -> Features:
    """Return the ``datasets.Features`` describing rows of ``model``."""
    return Features({column.name: _feature_for(column) for column in _columns(model)})


def _parquet_lists(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every list's item named ``element``, as parquet files store it."""
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(_parquet_lists(field.type)) for field in data_type])
    if pa.types.is_list(data_type):
        item = data_type.value_field
        return pa.list_(pa.field("element", _parquet_lists(item.type), item.nullable))
    return data_type


@functools.cache
def arrow_schema_of(model: type[BaseModel]) -> pa.Schema:
    """Return the Arrow schema of ``model`` with the ``datasets`` and worldtrace metadata.

    List items are named ``element`` (``datasets`` says ``item``): a shard read back from
    parquet then has exactly this schema.
    """
    schema = features_of(model).arrow_schema
    schema = pa.schema(
        [field.with_type(_parquet_lists(field.type)) for field in schema], schema.metadata
    )
    metadata = dict(schema.metadata or {})
    metadata[SCHEMA_VERSION_KEY] = SCHEMA_VERSION.encode()
    metadata[RECORD_KEY] = model.__name__.encode()
    return schema.with_metadata(metadata)


def _to_cell(value: Any, column: _Column) -> Any:
    if value is None:
        return None
    if column.kind == "json":
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if column.kind == "image":
        return {"bytes": value, "path": None}
    if column.kind == "model":
        return to_row(value)
    if column.kind == "models":
        return [to_row(item) for item in value]
    if isinstance(value, tuple):
        return list(value)
    return value


def to_row(record: BaseModel) -> dict[str, Any]:
    """Convert a record to an Arrow-ready row (JSON columns as strings, images as structs)."""
    return {
        column.name: _to_cell(getattr(record, column.name), column)
        for column in _columns(type(record))
    }


def _from_cell(value: Any, column: _Column) -> Any:
    if value is None:
        return None
    if column.kind == "json":
        return json.loads(value) if isinstance(value, str) else value
    if column.kind == "image":
        return value.get("bytes") if isinstance(value, dict) else value
    if column.kind == "model" and isinstance(value, dict):
        return _from_row_data(column.base, value)
    if column.kind == "models" and isinstance(value, list):
        return [_from_row_data(column.base, item) for item in value]
    return value


def _from_row_data(model: type[BaseModel], row: dict[str, Any]) -> dict[str, Any]:
    data = dict(row)
    for column in _columns(model):
        if column.name in data:
            data[column.name] = _from_cell(data[column.name], column)
    return data


def from_row(model: type[R], row: dict[str, Any]) -> R:
    """Build a validated record from an Arrow row; raises ``RecordError`` naming bad fields."""
    return model.parse(_from_row_data(model, row))


def to_table(records: Sequence[BaseModel], model: type[BaseModel]) -> pa.Table:
    """Return an Arrow table of ``records`` with the schema of ``model``."""
    return pa.Table.from_pylist([to_row(r) for r in records], schema=arrow_schema_of(model))


def _with_volatile_spans(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """An observation column of schema 1.1 or older with an empty ``volatile`` list per row."""
    target: pa.StructType = field.type
    chunks = []
    for chunk in column.chunks:
        empty = pa.array([[]] * len(chunk), type=target.field("volatile").type)
        arrays = [chunk.field(name) for name in (f.name for f in chunk.type)] + [empty]
        chunks.append(pa.StructArray.from_arrays(arrays, fields=list(target), mask=chunk.is_null()))
    return pa.chunked_array(chunks, type=target)


def upgrade_transition_table(table: pa.Table) -> pa.Table:
    """Return a transitions table of an older schema in the current one's columns.

    Schema 1.0 had no ``curation`` column: its rows are all training targets. Schemas before
    1.2 had no volatile spans: none are marked. Schemas before 1.3 had no ``usage``: null on
    every row. Tables of the current schema are returned as they are.
    """
    if "id" not in table.column_names:
        return table
    schema = arrow_schema_of(Transition)
    if "curation" not in table.column_names:
        field = schema.field("curation")
        default = Curation().model_dump(mode="json")
        table = table.append_column(field, pa.array([default] * table.num_rows, type=field.type))
    whole_rows = set(schema.names) - {"usage", "curation"} <= set(table.column_names)
    if "usage" not in table.column_names and whole_rows:  # not a reader's choice of columns
        field = schema.field("usage")
        position = table.column_names.index("curation")
        table = table.add_column(position, field, pa.nulls(table.num_rows, type=field.type))
    for name in ("observation", "next_observation"):
        if name not in table.column_names:  # a reader may have read some columns only
            continue
        position = table.column_names.index(name)
        if table.schema.field(name).type.get_field_index("volatile") < 0:
            field = schema.field(name)
            table = table.set_column(position, field, _with_volatile_spans(table[name], field))
    return table


def upgrade_episode_table(table: pa.Table) -> pa.Table:
    """Return an episodes table of an older schema in the current one's columns.

    Schemas before 1.3 had no ``usage``: null on every episode.
    """
    if "episode_id" not in table.column_names or "usage" in table.column_names:
        return table
    field = arrow_schema_of(Episode).field("usage")
    return table.append_column(field, pa.nulls(table.num_rows, type=field.type))
