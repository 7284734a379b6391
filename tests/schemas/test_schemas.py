from __future__ import annotations

import io
import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset, Features, Image, Value

from tests.records import make_transition
from worldtrace.schemas import (
    SCHEMA_VERSION,
    Episode,
    Observation,
    RecordError,
    Transition,
    arrow_schema_of,
    features_of,
    from_row,
    to_row,
    to_table,
)
from worldtrace.schemas.arrow import SCHEMA_VERSION_KEY


def _png() -> bytes:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (3, 2), (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


PNG = _png()


def test_arrow_schema_is_derived_from_the_models() -> None:
    schema = arrow_schema_of(Transition)
    assert schema.names == list(Transition.model_fields)
    observation = schema.field("observation").type
    assert [observation.field(i).name for i in range(observation.num_fields)] == list(
        Observation.model_fields
    )
    # free-form dicts are JSON strings so every domain shares one schema
    assert observation.field("meta").type == pa.string()
    assert schema.field("timing").type.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert schema.metadata[SCHEMA_VERSION_KEY] == SCHEMA_VERSION.encode()


def test_features_declare_screenshots_as_images() -> None:
    features = features_of(Transition)
    assert isinstance(features["observation"]["screenshot"], Image)
    assert features["observation"]["text"] == Value("string")
    assert features_of(Transition).arrow_schema.names == arrow_schema_of(Transition).names


def test_round_trip_model_row_json() -> None:
    transition = make_transition(
        next_observation=Observation(format="axtree", text="[1] button", screenshot=PNG)
    )
    row = to_row(transition)
    assert isinstance(row["observation"]["meta"], str)
    assert json.loads(row["action"]["arguments"]) == {"keys": ["echo hi", "Enter"]}
    assert from_row(Transition, row) == transition
    assert Transition.model_validate_json(transition.model_dump_json()) == transition


def test_parquet_round_trip_decodes_images_in_datasets_and_scans_in_polars(tmp_path) -> None:
    with_image = make_transition(
        step=1, next_observation=Observation(format="axtree", text="page", screenshot=PNG)
    )
    table = to_table([make_transition(step=0), with_image], Transition)
    pq.write_table(table, tmp_path / "part.parquet")

    dataset = Dataset.from_parquet(str(tmp_path / "part.parquet"))
    assert isinstance(dataset.features["next_observation"]["screenshot"], Image)
    image = dataset[1]["next_observation"]["screenshot"]
    assert image.size == (3, 2)
    assert image.getpixel((0, 0)) == (200, 10, 10)
    assert dataset[0]["next_observation"]["screenshot"] is None

    frame = pl.scan_parquet(tmp_path / "*.parquet").collect()
    assert frame["id"].to_list() == ["ep-1:00000", "ep-1:00001"]
    back = [
        from_row(Transition, row) for row in pq.read_table(tmp_path / "part.parquet").to_pylist()
    ]
    assert back[1] == with_image


def test_invalid_records_name_the_field() -> None:
    row = to_row(make_transition())
    row["observation"] = {**row["observation"], "format": ""}
    del row["step"]
    with pytest.raises(RecordError) as caught:
        from_row(Transition, row)
    message = str(caught.value)
    assert "Transition.step: Field required" in message
    assert "Transition.observation.format" in message


def test_a_malformed_domain_name_and_extra_fields_are_rejected() -> None:
    data = make_transition().model_dump()
    with pytest.raises(RecordError, match=r"Transition\.domain"):
        Transition.parse({**data, "domain": "Not A Domain"})
    with pytest.raises(RecordError, match=r"Transition\.colour"):
        Transition.parse({**data, "colour": "blue"})


def test_transition_id_must_match_episode_and_step() -> None:
    with pytest.raises(ValueError, match="ep-1:00003"):
        make_transition(step=3, id="ep-1:3")


def test_episode_table_round_trip() -> None:
    transition = make_transition()
    episode = Episode(
        episode_id="ep-1",
        run_id="run",
        domain="terminal",
        env=transition.env,
        policy=transition.policy,
        seed=7,
        status="completed",
        length=1,
        started_at=transition.timing.started_at,
        ended_at=transition.timing.started_at,
    )
    table = to_table([episode], Episode)
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    row = pq.read_table(io.BytesIO(buffer.getvalue())).to_pylist()[0]
    assert from_row(Episode, row) == episode
    assert Features.from_arrow_schema(table.schema)["status"] == Value("string")
