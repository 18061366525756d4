"""Group commit of POST /v1/messages: concurrent requests share one transaction, every
acknowledged message is stored, and one request that cannot be written fails alone."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedders import HashEmbedder
from liveserver import live_server
from tiermem.errors import StoreError, StoreUnavailableError
from tiermem.memory import Memory
from tiermem.server import create_app
from tiermem.server.commits import GroupCommit


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Memory(str(tmp_path / "memory.db"), embedder=HashEmbedder(32)) as memory:
        yield memory


def stored_ids(memory: Memory, user: str, sessions: Sequence[str]) -> list[str]:
    return [m.message_id for s in sessions for m in memory.history(user, s)]


class GatedCommit:
    """Memory.commit_staged behind a gate: the first group waits until the test opens
    it, so the requests sent meanwhile queue up and form one group. Groups holding an op
    of ``refused`` raise ``error`` instead of writing (a fault injected in front of the
    real store)."""

    def __init__(self, memory: Memory, error: Exception | None = None) -> None:
        self.memory = memory
        self.error = error
        self.refused: set[int] = set()
        self.groups: list[int] = []
        self.gate = threading.Event()

    def __call__(self, ops: Sequence[Any]) -> None:
        self.groups.append(len(ops))
        self.gate.wait(30)
        if self.error is not None and any(id(op) in self.refused for op in ops):
            raise self.error
        self.memory.commit_staged(ops)

    async def entered(self) -> None:
        for _ in range(3000):
            if self.groups:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the first group never reached the store")


def stage(memory: Memory, user: str, count: int) -> list[tuple[str, Any]]:
    """(message id, op) of ``count`` one-message requests over three sessions."""
    staged = []
    for i in range(count):
        added, op = memory.stage_messages(
            [{"role": "user", "content": f"message {i} of the load"}], user, f"s{i % 3}"
        )
        staged.append((added[0].message_id, op))
    return staged


async def send_while_first_waits(
    commits: GroupCommit, gated: GatedCommit, staged: list[tuple[str, Any]]
) -> list[BaseException | None]:
    """The first request, then the others while its group waits at the gate."""
    first = asyncio.create_task(commits.write(staged[0][1]))
    await gated.entered()
    rest = [asyncio.create_task(commits.write(op)) for _, op in staged[1:]]
    await asyncio.sleep(0)  # every task runs up to its wait: all are queued
    gated.gate.set()
    results = await asyncio.gather(first, *rest, return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


async def test_concurrent_writes_share_one_transaction_and_all_are_stored(
    memory: Memory,
) -> None:
    gated = GatedCommit(memory)
    commits = GroupCommit(gated)
    user = f"u-{uuid.uuid4().hex[:6]}"
    staged = stage(memory, user, 20)
    assert stored_ids(memory, user, ["s0", "s1", "s2"]) == []  # staging writes nothing
    results = await send_while_first_waits(commits, gated, staged)
    commits.close()
    assert results == [None] * 20
    assert gated.groups == [1, 19]
    assert sorted(stored_ids(memory, user, ["s0", "s1", "s2"])) == sorted(i for i, _ in staged)


async def test_one_failing_request_fails_alone(memory: Memory) -> None:
    gated = GatedCommit(memory, StoreError("this row cannot be written"))
    commits = GroupCommit(gated)
    user = f"u-{uuid.uuid4().hex[:6]}"
    staged = stage(memory, user, 8)
    bad_id, bad_op = staged[4]
    gated.refused.add(id(bad_op))
    results = await send_while_first_waits(commits, gated, staged)
    commits.close()
    assert isinstance(results[4], StoreError)
    assert [r for i, r in enumerate(results) if i != 4] == [None] * 7
    # the group of 7 failed as a whole, then each of its requests was written alone
    assert gated.groups == [1, 7, 1, 1, 1, 1, 1, 1, 1]
    stored = stored_ids(memory, user, ["s0", "s1", "s2"])
    assert sorted(stored) == sorted(i for i, _ in staged if i != bad_id)


async def test_an_unreachable_store_fails_the_group_without_retries(memory: Memory) -> None:
    gated = GatedCommit(memory, StoreUnavailableError("the store is down"))
    commits = GroupCommit(gated)
    user = f"u-{uuid.uuid4().hex[:6]}"
    staged = stage(memory, user, 6)
    for _, op in staged[1:]:
        gated.refused.add(id(op))
    results = await send_while_first_waits(commits, gated, staged)
    commits.close()
    assert results[0] is None
    assert all(isinstance(r, StoreUnavailableError) for r in results[1:])
    assert gated.groups == [1, 5]  # one try for the group, none per request
    assert stored_ids(memory, user, ["s0", "s1", "s2"]) == [staged[0][0]]


async def test_written_runs_after_the_commit_and_its_error_is_the_requests(
    memory: Memory,
) -> None:
    commits = GroupCommit(memory.commit_staged)
    user = f"u-{uuid.uuid4().hex[:6]}"
    (first_id, first), (_, second) = stage(memory, user, 2)
    seen: list[list[str]] = []

    def written() -> None:
        seen.append(stored_ids(memory, user, ["s0", "s1", "s2"]))

    def broken() -> None:
        raise StoreUnavailableError("the key database is down")

    await commits.write(first, written)
    assert seen == [[first_id]]  # committed before it ran
    with pytest.raises(StoreUnavailableError):
        await commits.write(second, broken)
    commits.close()
    await commits.write(stage(memory, user, 1)[0][1])  # a closed writer starts again
    commits.close()
    assert len(stored_ids(memory, user, ["s0", "s1", "s2"])) == 3


async def test_concurrent_http_requests_are_all_acknowledged_and_stored(
    memory: Memory,
) -> None:
    user = f"u-{uuid.uuid4().hex[:6]}"
    app = create_app(memory)
    with live_server(app) as url:

        async def client(n: int) -> list[str]:
            ids = []
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                for i in range(5):
                    body = {
                        "user_id": user,
                        "session_id": f"s{n % 3}",
                        "messages": [{"role": "user", "content": f"client {n} says {i}"}],
                    }
                    answer = await http.post("/v1/messages", json=body)
                    assert answer.status_code == 201, answer.text
                    ids += answer.json()["ids"]
            return ids

        acknowledged = [i for ids in await asyncio.gather(*map(client, range(16))) for i in ids]
        metrics = httpx.get(url + "/metrics").text
    assert len(set(acknowledged)) == 80
    assert sorted(stored_ids(memory, user, ["s0", "s1", "s2"])) == sorted(acknowledged)
    assert 'route="/v1/messages",status="201"} 80.0' in metrics


def refuse_in_the_database(path: Path, word: str) -> None:
    """A real SQLite error for any message holding ``word``: a trigger that aborts."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON tiermem_transcript"
            f" WHEN NEW.message LIKE '%{word}%' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )


async def test_a_lone_request_whose_commit_fails_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """At low load a request is alone in its group: a failed commit is its error (not a
    201), and nothing of it is stored; the next request of the session is written."""
    path = tmp_path / "lone.db"
    with Memory(str(path), embedder=HashEmbedder(32)) as memory:
        assert memory.store.index.count("u") == 0  # the store and its tables exist
        refuse_in_the_database(path, "UNWRITABLE")
        commits = GroupCommit(memory.commit_staged)
        _, op = memory.stage_messages([{"role": "user", "content": "UNWRITABLE one"}], "u", "s")
        with pytest.raises(StoreError, match="refused"):
            await commits.write(op)
        assert commits.groups == 1 and memory.history("u", "s") == []
        commits.close()
        with live_server(create_app(memory)) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:

                async def post(text: str) -> httpx.Response:
                    message = {"role": "user", "content": text}
                    body = {"user_id": "u", "session_id": "s", "messages": [message]}
                    return await http.post("/v1/messages", json=body)

                refused = await post("UNWRITABLE two")
                assert refused.status_code == 503 and "refused" in refused.text
                assert memory.history("u", "s") == []
                kept = await post("a writable message")
                assert kept.status_code == 201, kept.text
        assert [m.text for m in memory.history("u", "s")] == ["a writable message"]
