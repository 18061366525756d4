"""The second stage in a context: ``memory.rerank`` rescores the best candidates of
``get_context`` over HTTP (a text-embeddings-inference ``/rerank`` server: the local fake
speaking its protocol); a reranker that is down leaves the first stage's order, in time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fakeserver
from embedders import HashEmbedder
from fakeserver import FakeServer
from tiermem import Memory

QUERY = "where is the spare key kept"
FIRST = "where is the spare key kept, I keep wondering about the spare key"
ANSWER = "Ana keeps it under the blue flowerpot by the door"


def _tei(fake: FakeServer, body: dict[str, Any]) -> Any:
    """The fake model: the document that names the flowerpot answers."""
    return [
        {"index": i, "score": 0.9 if "flowerpot" in t else 0.1} for i, t in enumerate(body["texts"])
    ]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    monkeypatch.setitem(fakeserver._ROUTES, "/rerank", ("openai", _tei))
    monkeypatch.setitem(fakeserver._REQUIRED, "/rerank", ("query", "texts"))
    with FakeServer() as fake:
        yield fake


def memory_for(folder: Path, url: str | None, timeout: float = 2.0) -> Memory:
    folder.mkdir(exist_ok=True)
    rerank = {"provider": f"tei:{url}", "top_n": 30, "timeout": timeout} if url else {}
    config = {"memory": {"rerank": rerank, "planner": {"floor": {"enabled": False}}}}
    memory = Memory(str(folder / "m.db"), config=config, embedder=HashEmbedder(64))
    memory.add("user", FIRST, user_id="u", session_id="s1")
    memory.add("user", ANSWER, user_id="u", session_id="s1")
    for i in range(20):
        memory.add(
            "user", f"note {i} about the garden and the weather", user_id="u", session_id="s1"
        )
    memory.flush()
    return memory


def best_line(memory: Memory) -> str:
    context = memory.get_context(QUERY, user_id="u", session_id="s2", max_tokens=40)
    return context.items[0].content


def test_the_reranker_chooses_what_fits(server: FakeServer, tmp_path: Path) -> None:
    first_stage = memory_for(tmp_path / "first", None)
    assert FIRST in best_line(first_stage)
    first_stage.close()
    memory = memory_for(tmp_path / "reranked", server.url)
    assert ANSWER in best_line(memory)
    (request,) = [r for r in server.requests if r.path == "/rerank"]
    assert request.json["query"] == QUERY and len(request.json["texts"]) == 22
    memory.close()


def test_a_reranker_that_is_down_leaves_the_first_stage_in_time(
    server: FakeServer, tmp_path: Path
) -> None:
    server.outage_status = 500
    memory = memory_for(tmp_path, server.url, timeout=0.5)
    started = time.monotonic()
    assert FIRST in best_line(memory)
    assert time.monotonic() - started < 2.0
    memory.close()


def test_reranking_is_off_by_default(tmp_path: Path) -> None:
    memory = Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(64))
    assert memory.config.memory.rerank.provider is None
    memory.close()
