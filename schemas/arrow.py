"""Arrow and ``datasets`` views of the records, derived from the pydantic models.

The ``datasets.Features`` are built by walking a model's fields; the Arrow schema is
``features.arrow_schema``, so the Hugging Face metadata that makes screenshot columns decode
as images is always present. Nothing here restates a field list.
"""

from __future__ import annotations

import json
import types
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import pyarrow as pa
from datasets import Features, Image, Value
from pydantic import BaseModel

from schemas.records import SCHEMA_VERSION, ImageColumn, JsonColumn, Record

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


def _column_kind(annotation: Any, metadata: list[Any]) -> tuple[Any, str | None]:
    """Return the bare type and a storage marker ('json', 'image' or None)."""
    annotation = _unwrap_optional(annotation)
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        metadata = [*metadata, *extra]
        annotation = base
    if any(isinstance(item, JsonColumn) for item in metadata):
        return annotation, "json"
    if any(isinstance(item, ImageColumn) for item in metadata):
        return annotation, "image"
    return annotation, None


def _feature_for(annotation: Any, metadata: list[Any]) -> Any:
    base, marker = _column_kind(annotation, metadata)
    if marker == "json":
        return Value("string")
    if marker == "image":
        return Image()
    if isinstance(base, type) and issubclass(base, BaseModel):
        return features_of(base)
    if get_origin(base) is Literal:
        return Value("string")
    if base in _SCALARS:
        return Value(_SCALARS[base])
    raise TypeError(f"no column type for annotation {annotation!r}")


def features_of(model: type[BaseModel]) -> Features:
    """Return the ``datasets.Features`` describing rows of ``model``."""
    return Features(
        {
            name: _feature_for(field.annotation, list(field.metadata))
            for name, field in model.model_fields.items()
        }
    )


def arrow_schema_of(model: type[BaseModel]) -> pa.Schema:
    """Return the Arrow schema of ``model`` with the ``datasets`` and worldtrace metadata."""
    schema = features_of(model).arrow_schema
    metadata = dict(schema.metadata or {})
    metadata[SCHEMA_VERSION_KEY] = SCHEMA_VERSION.encode()
    metadata[RECORD_KEY] = model.__name__.encode()
    return schema.with_metadata(metadata)


def _to_cell(value: Any, annotation: Any, metadata: list[Any]) -> Any:
    if value is None:
        return None
    base, marker = _column_kind(annotation, metadata)
    if marker == "json":
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if marker == "image":
        return {"bytes": value, "path": None}
    if isinstance(base, type) and issubclass(base, BaseModel):
        return to_row(value)
    return value


def to_row(record: BaseModel) -> dict[str, Any]:
    """Convert a record to an Arrow-ready row (JSON columns as strings, images as structs)."""
    fields = type(record).model_fields
    return {
        name: _to_cell(getattr(record, name), field.annotation, list(field.metadata))
        for name, field in fields.items()
    }


def _from_cell(value: Any, annotation: Any, metadata: list[Any]) -> Any:
    if value is None:
        return None
    base, marker = _column_kind(annotation, metadata)
    if marker == "json":
        return json.loads(value) if isinstance(value, str) else value
    if marker == "image":
        return value.get("bytes") if isinstance(value, dict) else value
    if isinstance(base, type) and issubclass(base, BaseModel) and isinstance(value, dict):
        return _from_row_data(base, value)
    return value


def _from_row_data(model: type[BaseModel], row: dict[str, Any]) -> dict[str, Any]:
    fields = model.model_fields
    data = dict(row)
    for name, field in fields.items():
        if name in data:
            data[name] = _from_cell(data[name], field.annotation, list(field.metadata))
    return data


def from_row(model: type[R], row: dict[str, Any]) -> R:
    """Build a validated record from an Arrow row; raises ``RecordError`` naming bad fields."""
    return model.parse(_from_row_data(model, row))  # type: ignore[return-value]


def to_table(records: list[BaseModel], model: type[BaseModel]) -> pa.Table:
    """Return an Arrow table of ``records`` with the schema of ``model``."""
    return pa.Table.from_pylist([to_row(r) for r in records], schema=arrow_schema_of(model))
