"""PostgreSQL hash-partitioned by user (``partitions``): a new store is partitioned by
default, an existing one opens with the layout it was made with (unset) or the count it
was made with (set), and every per-user statement the store runs on the default layout is
planned on one partition of each table it reads or writes (so on Citus it stays on one
shard).

The statements are the store's own: a cursor records each statement and its parameters
while every per-user operation runs; each is then EXPLAINed with those values inlined.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from datetime import datetime, timezone
from typing import Any, ClassVar

import numpy as np
import psycopg
import pytest

from conformance.conftest import fresh_database
from tiermem.errors import InvalidSizeError, InvalidTypeError, PartitionsMismatchError
from tiermem.messages import Message
from tiermem.stores import copies, queue
from tiermem.stores import facts as fx
from tiermem.stores import transcript as tr
from tiermem.stores.ops import ExistingIdsOp, ImportOp, Op, ScanOp, TableSizeOp
from tiermem.stores.partitions import DEFAULT_PARTITIONS, hash_partitioned, partition_of
from tiermem.stores.postgres import PostgresStore
from tiermem.stores.records import NewMemory
from tiermem.stores.sql import HANDLERS

DIM = 8
PARTITIONS = DEFAULT_PARTITIONS  # the pruning test runs on the default layout
WHEN = datetime(2024, 3, 1, tzinfo=timezone.utc)
CROSS_USER = {
    queue.ClaimOp,
    queue.QueueStatsOp,  # a worker's /metrics: the rows not done, every user's
    queue.HeldOp,  # what a stopping worker holds, every user's
    tr.UsersOp,
    TableSizeOp,
    ExistingIdsOp,
    ImportOp,
    fx.DueSessionsOp,
    copies.CopyStateOp,  # tiermem copy's progress: a table of the store, not of a user
    copies.SaveCopyStateOp,
}
"""Operations that read or write several users by design (docs/scaling.md)."""


class Recording(psycopg.Cursor[Any]):
    """A cursor that keeps every statement it runs, with its parameters."""

    log: ClassVar[list[tuple[str, Any]]] = []

    def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
        Recording.log.append((str(query), params))
        return super().execute(query, params, **kw)

    def executemany(self, query: Any, params_seq: Iterable[Any], **kw: Any) -> None:
        rows = list(params_seq)
        Recording.log.extend((str(query), p) for p in rows)
        super().executemany(query, rows, **kw)


class Traced(PostgresStore):
    """The store, noting the type of every operation it runs."""

    ran: ClassVar[set[type]] = set()

    def batch(self, ops: Iterable[Op]) -> list[Any]:
        ops = list(ops)
        Traced.ran.update(type(op) for op in ops)
        return super().batch(ops)


@pytest.fixture(scope="module")
def partitioned_url() -> str:
    return fresh_database("pruning")


@pytest.fixture
def traced(partitioned_url: str) -> Iterator[Traced]:
    store = Traced(partitioned_url, dimension=DIM, pool_size=1, exact_max_rows=0)  # the default
    assert store.partitions == PARTITIONS
    with store._pool.connection() as conn:  # the pool's one connection, reused by every op
        conn.cursor_factory = Recording
    yield store
    store.close()


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _per_user_ops(store: PostgresStore, user: str) -> None:
    """Every per-user operation of the store, on one user's data."""
    said = [Message("user", f"I keep {n} bees on the roof", timestamp=WHEN) for n in range(4)]
    store.transcript.append(user, "s1", said[:2])
    store.batch([store_append_op(user, said[2:3]), store_append_op(user, said[3:])])
    store.transcript.recent(user, "s1", 5)
    store.transcript.message(user, said[0].message_id)
    rows = store.transcript.rows(user)
    store.transcript.unindexed(user)
    store.transcript.sessions(user)
    store.queue.work_stats(user)
    store.batch([tr.GenerationOp(user), tr.SummaryOp(user, "s1")])
    with pause(store):
        items = store.queue.claim("w", 10, 30.0)  # cross-user: not one of the statements checked
    mine = [i for i in items if i.user_id == user]
    assert store.queue.renew("w", 30.0, [(user, i.seq) for i in mine]) == len(mine)
    store.queue.complete("w", user, [(mine[0].seq, NewMemory(mine[0].line or "x", _vector(1)))])
    store.queue.fail("w", mine[1], "boom", 0.0, 1)
    store.queue.release("w", {user: [mine[2].seq]}, 0.0)
    store.queue.retry_failed(user)
    store.queue.retry_failed(user, [mine[1].seq])
    due = store.queue.summary_due("w", user, "s1", window=1, batch=1, lease=30.0)
    assert due is not None
    assert store.queue.renew("w", 30.0, summaries=[(user, "s1")]) == 1
    store.queue.save_summary("w", user, "s1", "bees", due[0].upto, due[1][-1].seq)
    store.queue.facts_due("w", user, "s1", batch=1, limit=10, lease=30.0)
    assert store.queue.renew("w", 30.0, fact_users=[user]) == 1
    fact = NewMemory("Ana keeps bees", _vector(2), "fact", metadata={"claim": "bees"})
    written = store.queue.save_facts("w", user, "s1", 0, rows[-1].seq, [fx.FactWrite(fact)])
    store.queue.fact_mark(user, "s1")
    store.queue.facts_fail("w", user, "s1", "boom", 0.0)
    store.batch([fx.FactVersionsOp(user, (written or ["x"])[0])])
    ids = store.index.add_many(user, [NewMemory(f"note {n}", _vector(10 + n)) for n in range(3)])
    store.index.get(user, ids[0])
    store.index.record_access(user, ids[:2])
    for mode in ("vector", "keyword", "hybrid"):
        store.index.search(user, "bees roof", vector=_vector(3), mode=mode, limit=2)  # type: ignore[arg-type]
    store.index.search(user, "note", vector=_vector(3), mode="hybrid", limit=2, count_access=False)
    store.index.update(
        user, ids[1], content="note changed", embedding=_vector(5), metadata={"k": 1}
    )
    store.index.list(user, memory_type="fact", metadata={"k": 1})
    store.index.count(user)
    store.index.stats(user)
    store.batch([ScanOp(None, 10, user)])
    store.index.delete(user, ids[2])
    store.transcript.forget_messages(user, [said[0].message_id])
    store.transcript.forget_session(user, "s1")
    restored = tr.RestoredRow(
        tr.Entry(said[0], tr.message_json(said[0]), f"user: {said[0].content}", None, None),
        "s2",
        "done",
        0,
        None,
    )
    store.batch([tr.RestoreOp(user, (restored,), (("s2", "sum", said[0].message_id),))])
    store.index.delete_user(user)


def store_append_op(user: str, messages: list[Message]) -> tr.AppendOp:
    from tiermem.stores.validate import append_op

    return append_op(user, "s1", messages, None, None, 10_000)


class pause:
    """Statements run inside are not recorded."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        self.mark = len(Recording.log)

    def __exit__(self, *exc: object) -> None:
        del Recording.log[self.mark :]


def _partitions_scanned(plan: Any, parents: set[str]) -> dict[str, set[str]]:
    """Per table of ours, the partitions a plan reads or writes."""
    found: dict[str, set[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            name = node.get("Relation Name")
            if isinstance(name, str):
                parent, _, index = name.rpartition("_p")
                if parent in parents and index.isdigit():
                    found.setdefault(parent, set()).add(name)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(plan)
    return found


def _explain(url: str, statement: str, params: Any) -> Any:
    """The JSON plan of ``statement`` with ``params`` inlined (a custom plan: plan-time
    pruning sees the user's value)."""
    from pgvector.psycopg import register_vector

    with psycopg.connect(url) as conn:
        register_vector(conn)
        cur = psycopg.ClientCursor(conn)
        values = params
        if isinstance(params, (list, tuple)):
            values = [json.dumps(v) if isinstance(v, dict) else v for v in params]
        cur.execute(f"EXPLAIN (FORMAT JSON) {statement}", values)
        row = cur.fetchone()
        conn.rollback()
    assert row is not None
    return row[0]


def test_every_per_user_statement_prunes_to_one_partition(
    traced: Traced, partitioned_url: str
) -> None:
    user = f"prune-{uuid.uuid4().hex[:8]}"
    Traced.ran.clear()
    Recording.log.clear()
    _per_user_ops(traced, user)
    missing = set(HANDLERS) - CROSS_USER - Traced.ran
    assert not missing, f"per-user operations not exercised: {missing}"

    parents = {traced.table, tr.TRANSCRIPT, tr.SUMMARIES, tr.GENERATIONS, fx.MARKS, fx.LEASES}
    checked = 0
    for statement, params in Recording.log:
        verb = (statement.split(None, 1) or [""])[0].upper()
        if verb not in {"SELECT", "INSERT", "UPDATE", "DELETE"}:
            continue  # SET LOCAL ..., and the pool's empty health check
        if not any(table in statement for table in parents):
            continue  # advisory locks, set_config
        plan = _explain(partitioned_url, statement, params)
        scanned = _partitions_scanned(plan, parents)
        wide = {t: sorted(p) for t, p in scanned.items() if len(p) > 1}
        assert not wide, f"{statement!r} with {params!r} reads several partitions: {wide}"
        checked += 1
    assert checked > 50


def test_an_unpruned_statement_is_seen(traced: Traced, partitioned_url: str) -> None:
    """The check above can fail: a statement without the user reads every partition."""
    plan = _explain(partitioned_url, f"SELECT count(*) FROM {tr.TRANSCRIPT}", None)
    scanned = _partitions_scanned(plan, {tr.TRANSCRIPT})
    assert scanned[tr.TRANSCRIPT] == {partition_of(tr.TRANSCRIPT, i) for i in range(PARTITIONS)}


PER_USER = [f"memories_{DIM}", tr.TRANSCRIPT, tr.SUMMARIES, tr.GENERATIONS, fx.MARKS, fx.LEASES]


def _catalog(url: str) -> dict[str, int]:
    """Each table of the store's, with its partitions as the catalog says (0: plain)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, (SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)"
            " FROM pg_class c WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition"
            " AND c.relnamespace = current_schema()::regnamespace"
        ).fetchall()
    return {name: int(n) for name, n in rows}


def test_a_new_store_made_with_no_setting_is_partitioned_by_user() -> None:
    url = fresh_database("new")
    store = PostgresStore(url, dimension=DIM)
    store.close()
    tables = _catalog(url)
    assert store.partitions == DEFAULT_PARTITIONS == 16
    assert {t: tables[t] for t in PER_USER} == dict.fromkeys(PER_USER, DEFAULT_PARTITIONS)
    assert tables[copies.COPIES] == 0  # a table of the store, not of a user


def test_a_new_store_from_the_config_is_partitioned() -> None:
    from embedders import HashEmbedder
    from tiermem import Memory

    url = fresh_database("config")
    config = {"memory": {"persistent": {"provider": "postgresql", "connection_string": url}}}
    memory = Memory(config=config, embedder=HashEmbedder(DIM))
    try:
        assert memory.store.partitions == DEFAULT_PARTITIONS
    finally:
        memory.close()
    assert _catalog(url)[f"memories_{DIM}"] == DEFAULT_PARTITIONS


def test_an_existing_plain_store_opens_with_no_setting_and_stays_plain() -> None:
    """A store made before partitions were the default (its tables plain) keeps opening
    as it is; a table it gains later (another dimension's) is plain too."""
    url = fresh_database("old")
    old = PostgresStore(url, dimension=DIM, partitions=0)
    [kept] = old.index.add_many("ana", [NewMemory("Ana keeps bees", _vector(1))])
    old.close()
    with closing(PostgresStore(url, dimension=DIM)) as store:
        assert store.partitions == 0 and store.index.get("ana", kept) is not None
    PostgresStore(url, dimension=DIM + 1).close()
    tables = _catalog(url)
    assert [tables[t] for t in [*PER_USER, f"memories_{DIM + 1}"]] == [0] * (len(PER_USER) + 1)


def test_an_existing_partitioned_store_opens_with_no_setting() -> None:
    url = fresh_database("four")
    PostgresStore(url, dimension=DIM, partitions=4).close()
    with closing(PostgresStore(url, dimension=DIM)) as store:
        assert store.partitions == 4
    with closing(
        PostgresStore(url, dimension=DIM + 1)
    ) as store:  # a new dimension's table: the same
        assert store.partitions == 4
    assert _catalog(url)[f"memories_{DIM + 1}"] == 4


def test_a_store_is_opened_with_the_count_it_was_made_with(partitioned_url: str) -> None:
    PostgresStore(partitioned_url, dimension=DIM, partitions=PARTITIONS).close()
    with pytest.raises(PartitionsMismatchError, match="hash-partitioned by user_id into 16") as e:
        PostgresStore(partitioned_url, dimension=DIM, partitions=0)
    assert e.value.field == "memory.persistent.partitions" and "partitions: 16" in e.value.hint
    with pytest.raises(PartitionsMismatchError, match="is 8"):
        PostgresStore(partitioned_url, dimension=DIM, partitions=8)
    # a new dimension's table is refused too, and not left behind half made
    with pytest.raises(PartitionsMismatchError):
        PostgresStore(partitioned_url, dimension=DIM + 2, partitions=4)
    with psycopg.connect(partitioned_url) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f"memories_{DIM + 2}",)).fetchone() == (
            None,
        )


def test_a_plain_store_refuses_partitions() -> None:
    url = fresh_database("plain")
    PostgresStore(url, dimension=DIM, partitions=0).close()
    with pytest.raises(PartitionsMismatchError, match=r"is 4, but table .* is not partitioned"):
        PostgresStore(url, dimension=DIM, partitions=4)


def test_tables_of_two_layouts_are_refused_with_no_setting() -> None:
    url = fresh_database("mixed")
    PostgresStore(url, dimension=DIM, partitions=0).close()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE memories_9 (user_id TEXT) PARTITION BY HASH (user_id)")
        conn.execute(
            "CREATE TABLE memories_9_p0 PARTITION OF memories_9"
            " FOR VALUES WITH (MODULUS 1, REMAINDER 0)"
        )
    with pytest.raises(PartitionsMismatchError, match=r"disagree: .*memories_9 1"):
        PostgresStore(url, dimension=DIM)


def test_openers_making_the_same_new_store_at_once_agree() -> None:
    """Three openers on their own connections (as processes would be): the layout is
    chosen under the migration's lock, so the first makes it and the others adopt it."""
    url = fresh_database("race")
    start = threading.Barrier(3)

    def make(_: int) -> int:
        start.wait()
        with closing(PostgresStore(url, dimension=DIM, pool_size=1)) as store:
            return store.partitions

    with ThreadPoolExecutor(3) as pool:  # an opener's error is raised here
        assert list(pool.map(make, range(3))) == [DEFAULT_PARTITIONS] * 3
    assert _catalog(url)[tr.TRANSCRIPT] == DEFAULT_PARTITIONS


@pytest.mark.parametrize(
    ("value", "error"), [(-1, InvalidSizeError), (5000, InvalidSizeError), ("4", InvalidTypeError)]
)
def test_the_count_is_checked(partitioned_url: str, value: Any, error: type) -> None:
    with pytest.raises(error):
        PostgresStore(partitioned_url, dimension=DIM, partitions=value)


def test_only_create_table_statements_change() -> None:
    made = hash_partitioned(
        "CREATE TABLE t (\n  id uuid PRIMARY KEY,\n  user_id text NOT NULL) WITH (fillfactor = 70)",
        2,
    )
    assert made[0].endswith("PRIMARY KEY (user_id, id)) PARTITION BY HASH (user_id)")
    assert "id uuid NOT NULL" in made[0] and "fillfactor" not in made[0]
    assert made[1:] == [
        f"CREATE TABLE t_p{i} PARTITION OF t FOR VALUES WITH (MODULUS 2, REMAINDER {i})"
        " WITH (fillfactor = 70)"
        for i in range(2)
    ]
    keyed = hash_partitioned("CREATE TABLE IF NOT EXISTS g (user_id TEXT NOT NULL PRIMARY KEY)", 1)
    assert keyed[0] == (
        "CREATE TABLE IF NOT EXISTS g (user_id TEXT NOT NULL PRIMARY KEY) PARTITION BY HASH (user_id)"
    )
    assert hash_partitioned("CREATE INDEX i ON t (x)", 3) == ["CREATE INDEX i ON t (x)"]


def test_the_setting_reaches_the_store() -> None:
    from embedders import HashEmbedder
    from tiermem.memory import Memory

    persistent = {"provider": "postgresql", "connection_string": fresh_database(), "partitions": 2}
    memory = Memory(config={"memory": {"persistent": persistent}}, embedder=HashEmbedder(DIM))
    try:
        assert memory.store.partitions == 2 and memory.replica_status() is None
    finally:
        memory.close()
