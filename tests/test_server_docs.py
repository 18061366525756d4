"""The python examples of docs/client.md, docs/mcp.md and docs/server.md run, against a
real development server where they talk to http://127.0.0.1:8765."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.memory import Memory
from tiermem.server import create_app

DOCS = Path(__file__).parents[1] / "docs"
DOC_URL = "http://127.0.0.1:8765"


def blocks(page: str) -> list[str]:
    found = re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)
    assert found, f"{page} has no python example"
    return found


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(64))
    with live_server(create_app(memory)) as served:
        yield served
    memory.close()


@pytest.mark.parametrize("page", ["client.md", "mcp.md"])
def test_examples_run_against_a_server(
    page: str, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for code in blocks(page):
        assert DOC_URL in code
        exec(compile(code.replace(DOC_URL, url), page, "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out
    expected = [
        line[2:] for code in blocks(page) for line in code.splitlines() if line.startswith("# ")
    ]
    for line in expected:
        assert line in printed
    if page == "client.md":
        assert "True ['recent'" in printed or "True ['synopsis'" in printed
        assert "Plays the cello on Sundays" in printed


@pytest.mark.slow  # create_app opens the default store, which loads the packaged model
def test_server_page_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for code in blocks("server.md"):
        exec(compile(code, "server.md", "exec"), namespace)
    assert namespace["app"].state.service.admin_key == "change-me"  # type: ignore[attr-defined]
    assert (tmp_path / "memory.db").exists()


def shell_example(page: str, needle: str) -> str:
    """The ```bash block of ``page`` that holds ``needle``."""
    found = re.findall(r"```bash\n(.*?)```", (DOCS / page).read_text(), re.S)
    return next(block for block in found if needle in block)


def test_server_page_curls_run_against_a_server(tmp_path: Path) -> None:
    """Issue 35, item 5: docs/server.md's curl commands (add, remember, search, context,
    forget a memory, forget the user) run as written against a development server, and
    each answers what its comment says."""
    import json
    import subprocess

    block = shell_example("server.md", "/v1/context")
    for call in ("POST localhost:8765/v1/messages", "/v1/search", "DELETE", "/v1/users/ana"):
        assert call in block, call
    memory = Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(64))
    with live_server(create_app(memory)) as url:
        script = block.replace("localhost:8765", url.removeprefix("http://"))
        script = script.replace("curl ", "curl --fail-with-body -s -w '\\n' ")
        done = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + script],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        added, found, context, forgotten, erased = map(json.loads, done.stdout.split("\n")[:5])
        assert len(added["ids"]) == 1
        hits = [hit["memory"]["content"] for hit in found["results"]]
        assert "Ana prefers tea to coffee." in hits
        assert "Pixel" in json.dumps(context["messages"])
        assert forgotten == {"deleted": True} and isinstance(erased["deleted"], int)
        assert memory.stats("ana").count == 0 and memory.sessions("ana") == []
    memory.close()
