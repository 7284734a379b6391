"""A resumed curation refuses input that changed since its output was started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.curation.helpers import output_ids, transition, write_rows
from worldtrace.curation import CurationError, curate


def test_resume_refuses_changed_input(tmp_path: Path) -> None:
    shards = tmp_path / "in" / "transitions" / "terminal"
    rows = [transition("ep-a", "ls"), transition("ep-b", "pwd")]
    write_rows(shards / "part-00000.parquet", rows)
    out = tmp_path / "out"
    curate(tmp_path / "in", out)
    assert curate(tmp_path / "in", out).stages_run == []  # unchanged input resumes

    write_rows(shards / "part-00001.parquet", [transition("ep-c", "whoami")])
    with pytest.raises(CurationError, match=r"changed since .*added: terminal/part-00001"):
        curate(tmp_path / "in", out)
    (shards / "part-00001.parquet").unlink()

    first = shards / "part-00000.parquet"
    write_rows(first, rows)  # rewritten with the same bytes (as a resumed collection does)
    assert curate(tmp_path / "in", out).stages_run == []
    write_rows(first, rows[::-1])  # same size, other content
    with pytest.raises(CurationError, match=r"changed: terminal/part-00000"):
        curate(tmp_path / "in", out)
    assert output_ids(out) == {"ep-a:00000", "ep-b:00000"}  # the refused run changed nothing

    # an output curated before fingerprints were kept adopts the current input
    (out / ".curation" / "input.json").unlink()
    assert curate(tmp_path / "in", out).stages_run == []
    with pytest.raises(CurationError, match="changed"):
        first.unlink()
        curate(tmp_path / "in", out)
