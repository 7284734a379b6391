from __future__ import annotations

import pytest
from typer.testing import CliRunner

from worldtrace.flows.cli import app
from worldtrace.flows.config import ConfigError, load_config, validate_config

runner = CliRunner()


def test_yaml_config_is_validated_and_flags_override(tmp_path) -> None:
    path = tmp_path / "collect.yaml"
    path.write_text(
        "domain: terminal\nepisodes: 5\nworkers: 2\npolicy:\n  kind: explore\n"
        "environment:\n  limits: {memory_mb: 256}\n"
    )
    config = load_config(path, {"episodes": 7})
    assert (config.episodes, config.workers, config.policy.kind) == (7, 2, "explore")
    assert config.environment["limits"]["memory_mb"] == 256


def test_run_name_and_episode_ids_are_stable_and_ignore_speed_settings() -> None:
    slow = validate_config({"domain": "terminal", "episodes": 3, "workers": 1})
    fast = validate_config({"domain": "terminal", "episodes": 3, "workers": 4, "out": "x"})
    other = validate_config({"domain": "terminal", "episodes": 3, "seed": 1})
    assert slow.resolved_run_name() == fast.resolved_run_name()
    assert slow.resolved_run_name() != other.resolved_run_name()
    assert slow.episode_id(2) == f"{slow.resolved_run_name()}-s000002"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"domain": "terminal", "episodes": 0}, "episodes: Input should be greater than"),
        ({"domain": "terminal", "episodes": 1, "colour": 1}, "colour: Extra inputs"),
        (
            {"domain": "terminal", "episodes": 1, "policy": {"kind": "magic"}},
            "unknown terminal policy",
        ),
        ({"domain": "terminal", "episodes": 1, "environment": {"width": 3}}, "width"),
        (
            {"domain": "terminal", "episodes": 1, "policy": {"tasks": ["nope"]}},
            "no terminal task 'nope'",
        ),
        ({"domain": "fax", "episodes": 1}, "no collector for domain 'fax' (available: "),
    ],
)
def test_invalid_configs_name_what_is_wrong(data, message) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_config(data)
    assert message in str(caught.value)


def test_broken_yaml_and_missing_file(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: [terminal\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listed)


def test_cli_reports_bad_input_with_exit_code_2(tmp_path) -> None:
    unknown = runner.invoke(app, ["collect", "fax", "--episodes", "1", "--out", str(tmp_path)])
    assert unknown.exit_code == 2
    assert "no collector for domain 'fax'" in unknown.output
    path = tmp_path / "c.yaml"
    path.write_text("domain: terminal\nepisodes: -3\n")
    invalid = runner.invoke(app, ["collect", "--config", str(path)])
    assert invalid.exit_code == 2
    assert "episodes" in invalid.output
    assert not any(tmp_path.glob("terminal-*")), "nothing is recorded for an invalid config"


@pytest.mark.docker
def test_missing_image_stops_before_any_episode(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"domain: terminal\nepisodes: 2\nout: {tmp_path}\n"
        "environment:\n  image: worldtrace/does-not-exist:1\n"
    )
    result = runner.invoke(app, ["collect", "--config", str(path)])
    assert result.exit_code == 1
    assert "worldtrace/does-not-exist:1" in result.output
    assert "worldtrace sandboxes build" in result.output
    assert not list(tmp_path.glob("terminal-*/raw/episodes/*"))


def test_a_file_url_out_records_in_that_local_folder(tmp_path) -> None:
    config = validate_config(
        {"domain": "terminal", "episodes": 1, "out": f"file://{tmp_path}", "run_name": "r"}
    )
    assert config.run_location == f"file://{tmp_path}/r"
    assert config.run_dir == tmp_path / "r"
