"""The swe repository images: one clean commit, a recorded baseline, exact test ids, refusal."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from worldtrace.collectors.swe import repos
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import IMAGE_LABEL, ImageDefinition, ensure_image
from worldtrace.schemas.errors import ConfigError

pytestmark = pytest.mark.docker

# One test of each outcome, and the ids pytest gives them: parametrized, in a class, xfail.
PROBE = """
import socket
import pytest


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_passes():
    assert True


def test_fails():
    assert 1 == 2


def test_errors(broken):
    pass


@pytest.mark.skip(reason="no")
def test_skipped():
    pass


@pytest.mark.xfail(reason="expected")
def test_xfails():
    assert False


@pytest.mark.xfail(reason="expected")
def test_xpasses():
    pass


class TestGroup:
    @pytest.mark.parametrize("value", ["a b", "x/y::z"])
    def test_param(self, value):
        assert value != "x/y::z"


def test_offline_guard():
    with pytest.raises(OSError, match="no network at the recorded baseline"):
        socket.create_connection(("192.0.2.1", 9), timeout=1)
"""
PROBE_FILE = "toolz/tests/test_wt_probe.py"


def run_tests(sandbox: DockerSandbox, *arguments: str) -> dict:
    """Run run_tests.py --json in ``sandbox`` as ``user``; return its JSON line."""
    result = sandbox.exec(
        [*repos.RUN_TESTS, "--json", *arguments], user="user", workdir=repos.REPOSITORY_PATH
    )
    last = result.text.strip().splitlines()[-1]
    outcome = json.loads(last)
    assert outcome["exit_code"] == result.exit_code
    return outcome


def test_repo_descriptions_are_checked(tmp_path: Path) -> None:
    assert {"toolz", "jinja2", "click", "sqlparse", "marshmallow"} <= set(repos.REPOS)
    assert [d.name for d in repos.IMAGES] == [f"swe-{name}" for name in repos.REPOS]
    toolz = repos.image_definition("toolz")
    assert toolz.tag == "worldtrace/swe-toolz:latest" == repos.REPOS["toolz"].image
    assert dict(toolz.build_args) == {"REPO": "toolz", "VERSION": repos.REPOS["toolz"].version}
    with pytest.raises(ConfigError, match="unknown swe repository 'nope'; known: "):
        repos.get_repo("nope")

    folder = tmp_path / "renamed"
    shutil.copytree(repos.REPOS_FOLDER / "toolz", folder)
    with pytest.raises(ConfigError, match="differs from its folder's name"):
        repos.load_repo(folder)
    text = (folder / "repo.json").read_text()
    (tmp_path / "toolz").mkdir()
    (tmp_path / "toolz" / "repo.json").write_text(text.replace('"sdist_sha256"', '"sha"'))
    with pytest.raises(ConfigError, match="not a valid repository description"):
        repos.load_repo(tmp_path / "toolz")


@pytest.mark.parametrize("name", sorted(repos.REPOS))
def test_image_has_one_clean_commit_and_a_baseline(name: str, swe_images: dict[str, str]) -> None:
    repo = repos.REPOS[name]
    client = docker_client()
    labels = client.images.get(repo.image).labels
    assert labels[repos.REPO_LABEL] == name
    assert labels[repos.VERSION_LABEL] == repo.version
    assert labels[repos.BASELINE_LABEL] == repos.BASELINE_PATH
    assert labels["worldtrace.writable"] == "/home/user /tmp"

    baseline = repos.read_baseline(repo.image, client)
    assert (baseline.repo, baseline.version) == (name, repo.version)
    assert len(baseline.passed) >= 100 and not set(baseline.passed) & set(baseline.skipped)
    assert 0 < baseline.duration_s < 60
    assert not any(d.id in test for d in repo.deselect for test in baseline.passed)

    with DockerSandbox(repo.image) as sandbox:
        shown = sandbox.exec(
            "git rev-list HEAD; git status --porcelain --ignored; echo ---; "
            "git log -1 --format='%an <%ae> %ad|%cn %cd' --date=iso-strict; "
            "stat -c %U . .git; python -c 'import sys; print(sys.prefix)'",
            user="user",
            workdir=repos.REPOSITORY_PATH,
        )
        assert shown.exit_code == 0, shown.stderr
        commits, rest = shown.text.split("\n", 1)
        status, after = rest.split("---\n")
        assert commits == repo.commit and status == ""  # one commit, the pinned one
        who = repos.COMMIT_IDENTITY
        assert after.splitlines() == [
            f"{who['name']} <{who['email']}> {who['date']}|{who['name']} {who['date']}",
            "user",
            "user",
            "/opt/swe-venv",
        ]
        # A parametrized id when there is one: ids go back to pytest exactly as given.
        chosen = next((test for test in baseline.passed if "[" in test), baseline.passed[0])
        outcome = run_tests(sandbox, chosen)
        assert outcome["passed"] == [chosen] and outcome["exit_code"] == 0
        assert sandbox.exec("git status --porcelain", user="user").text == ""


def test_run_tests_reports_exact_ids(swe_images: dict[str, str]) -> None:
    with DockerSandbox(repos.REPOS["toolz"].image) as sandbox:
        sandbox.put_file(f"{repos.REPOSITORY_PATH}/{PROBE_FILE}", PROBE.encode())
        outcome = run_tests(sandbox, PROBE_FILE)
        ids = {name: f"{PROBE_FILE}::{name}" for name in ("test_passes", "test_fails")}
        assert outcome["passed"] == [
            ids["test_passes"],
            f"{PROBE_FILE}::TestGroup::test_param[a b]",
        ]
        assert outcome["failed"] == [
            ids["test_fails"],
            f"{PROBE_FILE}::TestGroup::test_param[x/y::z]",
            f"{PROBE_FILE}::test_offline_guard",  # no guard without --offline
        ]
        assert outcome["errors"] == [f"{PROBE_FILE}::test_errors"]
        assert outcome["skipped"] == [
            f"{PROBE_FILE}::test_{n}" for n in ("skipped", "xfails", "xpasses")
        ]
        assert outcome["exit_code"] == 1

        # Every failing id selects exactly that test again.
        again = run_tests(sandbox, *outcome["failed"][:2])
        assert again["failed"] == outcome["failed"][:2] and again["passed"] == []
        offline = run_tests(sandbox, "--offline", f"{PROBE_FILE}::test_offline_guard")
        assert offline["passed"] == [f"{PROBE_FILE}::test_offline_guard"]

        # An edit of the working tree takes effect: the package is installed in editable mode.
        sandbox.exec(f"rm {PROBE_FILE}", user="user", workdir=repos.REPOSITORY_PATH)
        edit = "sed -i 's/return itertools.islice(seq, n)/return itertools.islice(seq, n + 1)/'"
        sandbox.exec(f"{edit} toolz/itertoolz.py", user="user", workdir=repos.REPOSITORY_PATH)
        broken = run_tests(sandbox, "toolz/tests/test_itertoolz.py::test_take")
        assert broken["failed"] == ["toolz/tests/test_itertoolz.py::test_take"]


def test_whole_suite_offline_matches_the_baseline(swe_images: dict[str, str]) -> None:
    repo = repos.REPOS["toolz"]
    baseline = repos.read_baseline(repo.image)
    with DockerSandbox(repo.image) as sandbox:  # network "none"
        # As root: run_tests.py runs pytest as `user` all the same.
        result = sandbox.exec([*repos.RUN_TESTS, "--json"], workdir=repos.REPOSITORY_PATH)
        outcome = json.loads(result.text.strip().splitlines()[-1])
        assert outcome["passed"] == list(baseline.passed)
        assert outcome["skipped"] == list(baseline.skipped)
        assert repos.read_baseline(sandbox) == baseline
        owners = sandbox.exec("find . -user root | head -3", workdir=repos.REPOSITORY_PATH)
        assert owners.text == ""


def variant(tmp_path: Path, repo: str, **changes: object) -> ImageDefinition:
    """A temporary copy of the image folder with ``repo``'s repo.json changed, under a new name."""
    folder = tmp_path / "image"
    shutil.copytree(repos.IMAGE_FOLDER, folder, ignore=shutil.ignore_patterns("__pycache__"))
    description = folder / "repos" / repo / "repo.json"
    description.write_text(json.dumps({**json.loads(description.read_text()), **changes}))
    name = f"swe-refused-{uuid.uuid4().hex[:8]}"
    # Everything else (build args, the shared driver runtime) as the repository's own image.
    return dataclasses.replace(repos.image_definition(repo), name=name, folder=folder)


@pytest.fixture
def remove_refused() -> Iterator[list[ImageDefinition]]:
    """Definitions appended to the list have their images (and build leftovers) removed after."""
    definitions: list[ImageDefinition] = []
    yield definitions
    client = docker_client()
    for definition in definitions:
        for image in client.images.list(filters={"label": f"{IMAGE_LABEL}={definition.name}"}):
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image.id, force=True)


def test_a_repository_whose_tests_fail_is_refused(
    tmp_path: Path, remove_refused: list[ImageDefinition], swe_images: dict[str, str]
) -> None:
    # sqlparse with its expected failures run as real tests: two of its tests fail.
    definition = variant(tmp_path, "sqlparse", pytest_args=["--runxfail"])
    remove_refused.append(definition)
    with pytest.raises(SandboxError) as raised:
        ensure_image(definition)
    message = str(raised.value)
    assert "refused: 2 tests of sqlparse 0.5.1 fail offline at baseline: " in message
    assert "tests/test_format.py::test_format_right_margin" in message
    assert "tests/test_format.py::TestOutputFormat::test_python_multiple_statements" in message
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client().images.get(definition.tag)


def test_a_repository_whose_test_ids_change_is_refused(
    tmp_path: Path, remove_refused: list[ImageDefinition], swe_images: dict[str, str]
) -> None:
    # marshmallow without its deselection: a test parametrized with the current time.
    definition = variant(tmp_path, "marshmallow", deselect=[])
    remove_refused.append(definition)
    with pytest.raises(SandboxError) as raised:
        ensure_image(definition)
    message = str(raised.value)
    assert "refused: 4 tests of marshmallow 3.23.1 differ between two runs at baseline" in message
    assert "TestFieldDeserialization::test_invalid_datetime_deserialization[" in message
