"""Volatile spans: declared per domain, marked at normalization, stored as a list of structs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import ClassVar

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset

from tests.records import make_transition
from worldtrace.collectors.base import Renderer
from worldtrace.collectors.volatile import PROGRAM_OUTPUT
from worldtrace.normalizers.run import normalize_run
from worldtrace.schemas import Observation, RecordError, Transition, from_row, to_table
from worldtrace.schemas.arrow import upgrade_transition_table
from worldtrace.schemas.raw import RawObservation

COLLECTED = Path(__file__).parents[1] / "data" / "collected"
TIMING = "Queries took 16.214ms; object at 0x7f3a2c1e; 3 rows"


class TimingRenderer(Renderer):
    """A renderer that declares durations and object addresses volatile."""

    volatile_patterns: ClassVar[tuple[re.Pattern[str], ...]] = (
        re.compile(r"\d+(?:\.\d+)?ms"),
        re.compile(r"0x[0-9a-f]+"),
        re.compile(r"16\.2"),  # overlaps the duration: merged into one span
    )

    def observation(self, raw: RawObservation) -> Observation:
        return Observation(format="text", text=raw["text"])


def test_the_renderer_marks_every_match_merging_overlaps() -> None:
    observation = TimingRenderer().marked_observation({"text": TIMING})
    assert [(span.start, span.end) for span in observation.volatile] == [(13, 21), (33, 43)]
    assert [TIMING[s.start : s.end] for s in observation.volatile] == ["16.214ms", "0x7f3a2c1e"]
    assert observation.masked_text() == "Queries took …; object at …; 3 rows"


def test_a_renderer_without_patterns_marks_nothing() -> None:
    class Plain(TimingRenderer):
        volatile_patterns = ()

    assert Plain().marked_observation({"text": TIMING}).volatile == ()


@pytest.mark.parametrize(
    ("spans", "problem"),
    [
        ([(5, 9), (2, 4)], "sorted"),
        ([(2, 6), (5, 9)], "overlap"),
        ([(40, 60)], "past the text"),
        ([(4, 4)], "not after its start"),
    ],
)
def test_spans_outside_order_or_text_are_rejected(spans, problem) -> None:
    data = {
        "format": "text",
        "text": TIMING,
        "volatile": [{"start": start, "end": end} for start, end in spans],
    }
    with pytest.raises(RecordError, match=problem):
        Observation.parse(data)


def test_spans_survive_parquet_and_read_in_datasets_and_polars(tmp_path) -> None:
    observation = TimingRenderer().marked_observation({"text": TIMING})
    transition = make_transition(next_observation=observation)
    pq.write_table(to_table([transition], Transition), tmp_path / "part.parquet")

    back = from_row(Transition, pq.read_table(tmp_path / "part.parquet").to_pylist()[0])
    assert back.next_observation.volatile == observation.volatile
    row = Dataset.from_parquet(str(tmp_path / "part.parquet"))[0]
    assert row["next_observation"]["volatile"] == [
        {"start": 13, "end": 21},
        {"start": 33, "end": 43},
    ]
    starts = (
        pl.read_parquet(tmp_path / "part.parquet")
        .select(pl.col("next_observation").struct.field("volatile"))
        .explode("volatile")
        .select(pl.col("volatile").struct.field("start"))
    )
    assert starts["start"].to_list() == [13, 33]


def test_shards_of_schema_1_1_read_with_no_spans(tmp_path) -> None:
    table = to_table([make_transition()], Transition)
    # A 1.1 shard: the observation structs end at `meta`.
    old = pa.table(
        {
            name: (
                pa.array(
                    [{k: v for k, v in table[name][0].as_py().items() if k != "volatile"}],
                    type=pa.struct(
                        [f for f in table.schema.field(name).type if f.name != "volatile"]
                    ),
                )
                if name in ("observation", "next_observation")
                else table[name]
            )
            for name in table.column_names
        }
    )
    assert old.schema.field("observation").type.get_field_index("volatile") < 0

    upgraded = upgrade_transition_table(old)
    assert upgraded.schema.field("observation").type == table.schema.field("observation").type
    back = from_row(Transition, upgraded.to_pylist()[0])
    assert back == make_transition()
    assert back.observation.volatile == () and back.next_observation.volatile == ()


def test_shared_program_patterns_mask_durations_and_addresses_not_counts() -> None:
    class Programs(TimingRenderer):
        volatile_patterns = PROGRAM_OUTPUT

    text = (
        ".0 = <zip object at 0x7f0d5adcb440>\n"
        "========================= 2 failed, 48 passed in 1.25s =========================\n"
        "============================== 2 passed in 0.08s ===============================\n"
        "Ran 3 tests in 0.001s\n"
        "real\t0m0.003s\n"
        "sys\t0m0.001s\n"
        "Modify: 2025-03-03 09:00:03.031894970 +0000\n"
        "user          96  0.0  0.4   3908  2328 pts/0    S    09:00   0:00 sleep 300\n"
        "took 5s on 2025-03-03 09:00"
    )
    masked = Programs().marked_observation({"text": text}).masked_text()
    assert masked.splitlines() == [
        ".0 = <zip object at …>",
        "…2 failed, 48 passed…",
        "…2 passed…",
        "Ran 3 tests in …",
        "real\t…",
        "sys\t…",
        "Modify: …",
        "user          96  …  …   …  … pts/0    S    09:00   … sleep 300",
        "took 5s on 2025-03-03 09:00",
    ]


def test_the_swe_domain_marks_its_test_durations_in_normalized_rows(tmp_path) -> None:
    run = tmp_path / "swe-twice"
    shutil.copytree(COLLECTED / "swe-twice", run)
    normalize_run(run)
    frame = pl.read_parquet(run / "transitions" / "*" / "*.parquet")
    rows = [Observation.model_validate({**o, "meta": {}}) for o in frame["next_observation"]]
    summaries = [o for o in rows if re.search(r" passed in \d", o.text)]
    assert summaries, "the collected swe run has test summaries"
    for observation in summaries:
        assert re.search(r"in \d+\.\d+s", observation.masked_text()) is None
        assert "passed" in observation.masked_text()


def test_a_1_1_table_read_without_its_observations_is_upgraded_as_is() -> None:
    table = to_table([make_transition()], Transition).select(["id", "curation", "reward"])
    assert upgrade_transition_table(table).equals(table)
