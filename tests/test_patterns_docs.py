"""Run every python example of docs/patterns/*.md and docs/agent.md and check what they print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fakeserver import FakeServer

DOCS = Path(__file__).parents[1] / "docs"
PAGES = sorted((DOCS / "patterns").glob("*.md"))


def _run(page: Path) -> None:
    text = page.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, f"{page} has no example"
    for code in blocks:
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})


def _printed_lines(page: Path) -> list[str]:
    """The ``# expected output`` comments that follow a print in the examples."""
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    return [
        line[2:]
        for code in blocks
        for line in code.splitlines()
        if line.startswith("# ") and not line.startswith("# --")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_pattern_page_examples(
    page: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _run(page)
    out = capsys.readouterr().out
    for line in _printed_lines(page):
        assert line in out, f"{page.name}: expected {line!r} in the output"


def test_agent_page_examples(
    fake_server: FakeServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _run(DOCS / "agent.md")
    out = capsys.readouterr().out
    for line in _printed_lines(DOCS / "agent.md"):
        assert line in out
