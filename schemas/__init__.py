"""The shared record: pydantic models and the Arrow/``datasets`` schema derived from them."""

from worldtrace.schemas.arrow import arrow_schema_of, features_of, from_row, to_row, to_table
from worldtrace.schemas.records import (
    DOMAINS,
    SCHEMA_VERSION,
    Action,
    Curation,
    Domain,
    EnvironmentRef,
    Episode,
    JsonDict,
    Observation,
    PolicyRef,
    RecordError,
    Source,
    Timing,
    Transition,
    transition_id,
)

__all__ = [
    "DOMAINS",
    "SCHEMA_VERSION",
    "Action",
    "Curation",
    "Domain",
    "EnvironmentRef",
    "Episode",
    "JsonDict",
    "Observation",
    "PolicyRef",
    "RecordError",
    "Source",
    "Timing",
    "Transition",
    "arrow_schema_of",
    "features_of",
    "from_row",
    "to_row",
    "to_table",
    "transition_id",
]
