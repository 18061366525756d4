"""Fact extraction across real processes sharing one store (SQLite file, PostgreSQL):
several extracting one user at once, and one killed with SIGKILL mid-extraction. The
model is the local OpenAI-protocol server, so every extraction call is counted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from embedders import HashEmbedder, wait_until
from fakeserver import FakeServer
from test_facts import scripted_model
from test_write_path import DIM, open_store, pg_url
from tiermem.llm import OpenAIModel
from tiermem.memory import Memory
from tiermem.messages import Message
from tiermem.stores.facts import FactMarkOp
from tiermem.stores.protocol import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
EXTRACTOR = ROOT / "tests" / "procs" / "extractor.py"
LIKES = ["tea", "jazz", "chess", "cats", "rain", "Porto", "sushi"]


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "shared.db") if request.param == "sqlite" else pg_url()


def extractor(url: str, user: str, sessions: list[str], llm: str, lease: float) -> Any:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, str(EXTRACTOR), url, user, *sessions, "--llm", llm]
    return subprocess.Popen(
        [*command, "--lease", str(lease)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def said(store: MemoryStore, user: str, sessions: int) -> dict[str, set[str]]:
    """Session s says "I like X" for three of LIKES (overlapping between sessions); the
    message ids behind each fact the model will make."""
    behind: dict[str, set[str]] = {}
    for s in range(sessions):
        messages = [
            Message("user", f"I like {LIKES[(s + k) % len(LIKES)]}.", name="Ana") for k in range(3)
        ]
        store.transcript.append(user, f"s{s}", messages)
        for m in messages:
            behind.setdefault(f"Ana likes {m.text[7:-1]}.", set()).add(m.message_id)
    return behind


def memory_on(url: str, server: FakeServer) -> Memory:
    persistent: dict[str, Any] = (
        {"provider": "postgresql", "connection_string": url}
        if url.startswith("postgresql://")
        else {"path": url}
    )
    facts = {"enabled": True, "extractor": "llm", "lease_seconds": 2.0}
    config = {"memory": {"persistent": persistent, "facts": facts}}
    llm = OpenAIModel("small", base_url=server.openai_url, api_key="k", max_retries=0)
    return Memory(config=config, embedder=HashEmbedder(DIM), llm=llm)


def check_facts(memory: Memory, user: str, behind: dict[str, set[str]]) -> None:
    """One fact per statement, holding every message that said it, once."""
    facts = memory.facts(user, current=False)
    assert sorted(f.content for f in facts) == sorted(behind)
    for fact in facts:
        sources = fact.metadata["sources"]
        assert len(sources) == len(set(sources))
        assert set(sources) == behind[fact.content]


def chat_calls(server: FakeServer) -> int:
    return sum(r.path.endswith("/chat/completions") for r in server.requests)


def test_four_processes_extract_one_user_once(store_url: str) -> None:
    user = f"ana-{uuid.uuid4().hex[:8]}"
    store = open_store(store_url)
    sessions = 6
    behind = said(store, user, sessions)
    names = [f"s{s}" for s in range(sessions)]
    with FakeServer(chat_reply=scripted_model) as server:
        procs = [
            extractor(store_url, user, names[i:] + names[:i], server.openai_url, 60.0)
            for i in range(4)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
        with memory_on(store_url, server) as memory:
            for name in names:  # what every process skipped while another held the user
                memory.extract_facts(user, name)
            check_facts(memory, user, behind)
            assert chat_calls(server) == sessions  # each session's batch read once
            rows = {r.session_id: r.seq for r in store.transcript.rows(user, limit=1000)}
            for name in names:
                assert store.batch([FactMarkOp(user, name)])[0].upto == rows[name]
    store.close()


def test_a_process_killed_mid_extraction_loses_and_duplicates_nothing(store_url: str) -> None:
    user = f"ana-{uuid.uuid4().hex[:8]}"
    store = open_store(store_url)
    behind = said(store, user, 2)
    release = threading.Event()

    def model(body: dict[str, Any]) -> str:
        if not release.is_set():  # the first process's call hangs until it is dead
            release.wait(60)
        return scripted_model(body)

    with FakeServer(chat_reply=model) as server:
        proc = extractor(store_url, user, ["s0", "s1"], server.openai_url, 2.0)
        assert wait_until(lambda: chat_calls(server) == 1, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        release.set()
        with memory_on(store_url, server) as memory:
            assert memory.facts(user, current=False) == []  # the dead batch wrote nothing
            assert wait_until(lambda: memory.extract_facts(user, "s0") != [], timeout=30)
            memory.extract_facts(user, "s1")
            check_facts(memory, user, behind)
            assert chat_calls(server) == 3  # the killed call, then s0 and s1 once each
            assert memory.extract_facts(user, "s0") == []
            assert chat_calls(server) == 3
    store.close()
