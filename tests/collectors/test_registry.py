"""Collectors are found through entry points, including ones from other packages."""

from __future__ import annotations

import sys
import textwrap

import pytest

from worldtrace.collectors.registry import UnknownDomainError, available_domains, get_collector
from worldtrace.collectors.terminal import TerminalCollector
from worldtrace.collectors.terminal.render import TerminalRenderer
from worldtrace.collectors.web import WebCollector


def test_builtin_domains_are_registered():
    assert "terminal" in available_domains()
    assert isinstance(get_collector("terminal"), TerminalCollector)
    assert isinstance(get_collector("terminal").renderer(), TerminalRenderer)
    assert isinstance(get_collector("web"), WebCollector)


def test_unknown_domain_lists_what_exists():
    with pytest.raises(UnknownDomainError, match=r"'fax' \(available: .*terminal"):
        get_collector("fax")


def test_a_domain_installed_by_another_package_is_found(tmp_path, monkeypatch):
    # A real installed distribution: dist-info metadata with an entry point, on sys.path.
    (tmp_path / "toy_domain.py").write_text(
        textwrap.dedent(
            """
            from worldtrace.collectors.terminal import TerminalCollector

            class ToyCollector(TerminalCollector):
                domain = "toy"
            """
        )
    )
    dist = tmp_path / "toy_domain-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-domain\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[worldtrace.collectors]\ntoy = toy_domain:ToyCollector\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy" in available_domains()
    assert get_collector("toy").domain == "toy"
    sys.modules.pop("toy_domain", None)


def test_domains_that_script_their_own_way_keep_their_script_policy() -> None:
    """Offering the base's policies (llm, replay) must not replace a domain's own script."""
    from worldtrace.collectors.swe.policies import SweOraclePolicy
    from worldtrace.collectors.web.tasks import WebScriptPolicy

    assert isinstance(get_collector("web").make_policy("script", {}), WebScriptPolicy)
    assert isinstance(get_collector("swe").make_policy("script", {}), SweOraclePolicy)
    for domain in ("terminal", "web", "os", "mcp", "search", "swe"):
        assert {"script", "explore", "replay", "llm"} <= set(get_collector(domain).policies)
