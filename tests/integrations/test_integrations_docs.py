"""Run the python examples of docs/integrations/*.md and check what they print.

They use the default Memory (the packaged MiniLM), so they are slow tests. The OpenAI
Agents page talks to the local OpenAI-protocol server through OPENAI_BASE_URL.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fakeserver import FakeServer

DOCS = Path(__file__).parents[2] / "docs" / "integrations"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.stem != "index")


def _blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


def test_every_adapter_has_a_page_in_the_index() -> None:
    index = (DOCS / "index.md").read_text()
    assert {p.stem for p in PAGES} == {
        "langgraph",
        "langchain",
        "openai-agents",
        "llama-index",
        "autogen",
    }
    for page in PAGES:
        assert f"({page.name})" in index
        assert _blocks(page), f"{page.name} has no example"


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_examples_run_and_print_what_they_say(
    page: Path,
    tmp_path: Path,
    fake_server: FakeServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the examples write app.db
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for code in _blocks(page):
        exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.splitlines()
    expected = [
        line[2:]
        for code in _blocks(page)
        for line in code.splitlines()
        if line.startswith("# ") and not line.startswith("# --")
    ]
    assert printed == expected
