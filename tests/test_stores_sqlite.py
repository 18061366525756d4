"""SQLiteStore specifics: file location, WAL, several processes on one file, locking."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from tiermem.errors import InputError, StoreUnavailableError
from tiermem.stores.ops import AccessOp, SearchOp
from tiermem.stores.sqlite import SQLiteStore, default_path
from tiermem.types.records import MemoryRecord

DIM = 8
SRC = str(Path(__file__).resolve().parents[1] / "src")


def vecs(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_default_path_is_under_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "tiermem" / "memory.db"
    with SQLiteStore(dimension=DIM) as store:
        store.index.add("u", "hello", embedding=vecs(1)[0])
    assert (tmp_path / "tiermem" / "memory.db").exists()


def test_wal_schema_version_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path, dimension=DIM) as store:
        mid = store.index.add("u", "kept", embedding=vecs(1)[0])
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert set(raw.execute("SELECT table_name, name FROM tiermem_migrations")) == {
        ("tiermem_transcript", "001_create"),
        ("tiermem_summaries", "001_create"),
        ("tiermem_generations", "001_create"),
        ("tiermem_fact_marks", "001_create"),
        ("tiermem_fact_leases", "001_create"),
        ("tiermem_copies", "001_create"),
        ("memories_8", "001_create"),
        ("memories_8", "002_stemmed_keywords"),
        ("memories_8", "003_keywords_by_user"),
        ("memories_8", "004_keywords_of_each_user"),
        ("memories_8", "005_rows_by_type"),
    }
    raw.close()
    with SQLiteStore(path, dimension=DIM) as store, SQLiteStore(path, dimension=4) as other:
        assert store.index.get("u", mid) is not None
        assert other.index.count("u") == 0  # another dimension, another table


def test_a_version_2_database_upgrades_keeping_rows_vectors_and_keywords(tmp_path: Path) -> None:
    from tiermem.stores import schema
    from tiermem.stores.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    vector = vecs(1)[0]
    raw = sqlite3.connect(path, isolation_level=None)
    raw.row_factory = sqlite3.Row
    raw.execute("BEGIN")
    schema.migrate(raw, {"memories_8": MIGRATIONS[:2]}, DIM, "?")  # as the last release left it
    raw.execute(
        "INSERT INTO memories_8 (id, user_id, content, content_hash, memory_type, importance,"
        " created_at, accessed_at, embedding, vseq) VALUES (?, 'u', 'the lighthouse keeper',"
        " 'h1', 'fact', 0.5, 0, 0, ?, 1)",
        (str(uuid.uuid4()), vector.astype(np.float32).tobytes()),
    )
    raw.execute("INSERT INTO memories_8_users VALUES ('u', 1, 0)")
    raw.execute("COMMIT")
    raw.close()
    with SQLiteStore(path, dimension=DIM) as store:  # opening runs 003 alone
        (hit,) = store.index.search("u", "lighthouse", mode="keyword")
        assert hit.record.content == "the lighthouse keeper"
        assert store.index.search("u", vector=vector, limit=1)[0].record.id == hit.record.id
        store.index.add("u", "paints seashells", embedding=vecs(2)[1])
        assert store.index.count("u") == 2 and store.index.search("u", "seashells", mode="keyword")


def test_memory_database() -> None:
    with SQLiteStore(":memory:", dimension=DIM) as store:
        store.index.add("u", "x", embedding=vecs(1)[0])
        assert store.index.count("u") == 1


def test_another_process_writing_the_same_file(tmp_path: Path) -> None:
    """A reader's cached vectors follow adds, re-embeddings and deletes of another process."""
    path = tmp_path / "shared.db"
    store = SQLiteStore(path, dimension=DIM)
    first = store.index.add_many("u", [f"mine {i}" for i in range(20)], embeddings=vecs(20, 1))
    q = vecs(1, 2)[0]
    assert len(store.index.search("u", vector=q, limit=50)) == 20  # cache now warm
    writer = textwrap.dedent(
        f"""
        import sys, numpy as np
        sys.path.insert(0, {SRC!r})
        from tiermem.stores.sqlite import SQLiteStore
        s = SQLiteStore({str(path)!r}, dimension={DIM})
        q = np.array({q.tolist()!r}, dtype=np.float32)
        s.index.add_many("u", [f"theirs {{i}}" for i in range(30)],
                   embeddings=np.random.default_rng(3).standard_normal((30, {DIM})))
        s.index.add("u", "the answer", embedding=q)
        s.index.update("u", {str(first[0])!r}, embedding=-q)
        s.index.delete("u", {str(first[1])!r})
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=60)
    hits = store.index.search("u", vector=q, limit=100)
    assert len(hits) == 50
    assert hits[0].record.content == "the answer" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[-1].record.id == first[0] and hits[-1].score == pytest.approx(-1.0, abs=1e-5)
    assert first[1] not in {h.record.id for h in hits}
    store.close()


def test_searches_see_every_change_to_a_row_they_read_before(tmp_path: Path) -> None:
    """Searches keep the rows they decoded while the file is unchanged (RowCache): a
    change by this store, by another store on the file or by another process, an access
    count included, shows in the next search, by vector and by keyword."""
    path = tmp_path / "rows.db"
    store = SQLiteStore(path, dimension=DIM)
    v = vecs(2)
    first = store.index.add("u", "alpha beta", embedding=v[0], metadata={"n": 0})
    store.index.add("u", "alpha gamma", embedding=v[1])

    def seen() -> object:
        found = []
        for mode in ("vector", "keyword"):
            hits = store.index.search("u", "alpha", vector=v[0], mode=mode, count_access=False)
            found += [h.record for h in hits if h.record.id == first]
        assert len(found) == 2 and found[0] == found[1] and found[0] is not found[1]
        return found[0]

    assert seen().metadata == {"n": 0} and seen().metadata == {"n": 0}  # the second: cached
    store.index.update("u", first, metadata={"n": 1})
    assert seen().metadata == {"n": 1}
    other = SQLiteStore(path, dimension=DIM)
    other.index.update("u", first, importance=0.9)
    other.close()
    assert seen().importance == 0.9
    writer = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from tiermem.stores.sqlite import SQLiteStore
        s = SQLiteStore({str(path)!r}, dimension={DIM})
        s.index.update("u", {str(first)!r}, metadata={{"n": 2}})
        s.close()
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=60)
    assert seen().metadata == {"n": 2}
    store.index.search("u", vector=v[0])  # counts an access of each hit
    assert seen().access_count == 1
    store.close()


def test_counting_accesses_keeps_the_row_cache_and_a_rollback_empties_it(
    tmp_path: Path,
) -> None:
    """The planner's accesses, written every second, leave the rows a search decoded in
    the cache (the same objects, with their new counts); a transaction that counted
    accesses and then failed leaves none of its counts there."""
    store = SQLiteStore(tmp_path / "a.db", dimension=DIM)
    v = vecs(1)[0]
    memory_id = store.index.add("u", "alpha", embedding=v)

    def shared() -> MemoryRecord:
        op = SearchOp("u", "vector", v, None, 5, count_access=False, shared=True)
        (hits,) = store.batch([op])
        return cast(MemoryRecord, hits[0].record)

    first = shared()
    assert store.index.record_access("u", [memory_id]) == 1
    assert shared() is first and first.access_count == 1
    store.index.search("u", vector=v)  # a search that counts its hits
    assert shared() is first and first.access_count == 2
    assert store.index.get("u", memory_id).access_count == 3  # a get counts one too
    assert shared() is first and first.access_count == 3
    wrong = SearchOp("u", "vector", np.ones(3, dtype=np.float32), None, 5)  # fails, writing nothing
    with pytest.raises(ValueError):
        store.batch([AccessOp("u", (memory_id,)), wrong])
    again = shared()
    assert again is not first and again.access_count == 3
    store.close()


def test_locked_database_raises_unavailable_and_keeps_nothing(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, dimension=DIM, timeout=0.2)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreUnavailableError):
        store.index.add("u", "blocked", embedding=vecs(1)[0])
    blocker.execute("ROLLBACK")
    blocker.close()
    assert store.index.count("u") == 0
    store.index.add("u", "works again", embedding=vecs(1)[0])
    assert store.index.count("u") == 1
    store.close()
    with pytest.raises(StoreUnavailableError):
        store.index.count("u")


def test_unopenable_path(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        SQLiteStore(tmp_path / "dir.db", dimension=DIM)
    with pytest.raises(InputError, match="does not exist"):
        SQLiteStore(tmp_path / "missing" / "m.db", dimension=DIM)
    assert not (tmp_path / "missing").exists()


def test_vector_cache_is_bounded(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db", dimension=DIM, cache_bytes=2000)
    for user in ("a", "b", "c"):
        store.index.add_many(user, [f"{user}{i}" for i in range(20)], embeddings=vecs(20))
        store.index.search(user, vector=vecs(1)[0])
    assert store._sqlite._cache.get("a") is None and store._sqlite._cache.get("c") is not None
    assert len(store.index.search("a", vector=vecs(1)[0], limit=30)) == 20  # reloads after eviction
    store.close()


def test_records_read_again_share_nothing_a_caller_can_change(tmp_path: Path) -> None:
    """Rows are decoded from caches (ids, flat metadata): a record a caller changes does
    not change the next read of the same row, nested metadata included."""
    store = SQLiteStore(tmp_path / "d.db", dimension=DIM)
    flat = store.index.add("u", "flat", embedding=vecs(1)[0], metadata={"a": 1, "b": "x"})
    nested = store.index.add("u", "nested", embedding=vecs(1, 1)[0], metadata={"list": [1, 2]})
    for memory_id in (flat, nested):
        first = store.index.get("u", memory_id)
        assert first is not None and first.id == memory_id
        first.metadata.setdefault("list", []).append(3)
        first.metadata["a"] = 2
    assert store.index.get("u", flat).metadata == {"a": 1, "b": "x"}
    assert store.index.get("u", nested).metadata == {"list": [1, 2]}
    for _ in range(2):  # the second search copies the row cache's records
        for hit in store.index.search("u", vector=vecs(1)[0], count_access=False):
            hit.record.metadata.setdefault("list", []).append(3)
            hit.record.metadata["a"] = 2
    again = {
        h.record.id: h.record
        for h in store.index.search("u", vector=vecs(1)[0], count_access=False)
    }
    assert again[flat].metadata == {"a": 1, "b": "x"}
    assert again[nested].metadata == {"list": [1, 2]}
    store.close()


def test_shared_searches_read_the_row_cache_no_caller_changed(tmp_path: Path) -> None:
    """A search with ``shared`` (the retriever's) returns the row cache's own records:
    the same objects while the file is unchanged, never one a caller of another search
    changed (the first read of a row hands that caller a copy), and a changed row anew."""
    store = SQLiteStore(tmp_path / "s.db", dimension=DIM)
    v = vecs(1)[0]
    memory_id = store.index.add("u", "alpha", embedding=v, metadata={"a": 1})

    def shared(mode: str) -> MemoryRecord:
        op = SearchOp("u", mode, v, "alpha", 5, count_access=False, shared=True)
        (hits,) = store.batch([op])
        return cast(MemoryRecord, hits[0].record)

    for mode in ("vector", "keyword"):
        store.index.update("u", memory_id, metadata={"a": 1})  # the row cache starts over
        (hit,) = store.index.search("u", "alpha", vector=v, mode=mode, count_access=False)
        hit.record.metadata["a"] = 2  # the first read of the row: a copy
        first = shared(mode)
        assert first.metadata == {"a": 1} and shared(mode) is first
    store.index.update("u", memory_id, metadata={"a": 3})
    assert shared("vector").metadata == {"a": 3} and shared("keyword").metadata == {"a": 3}
    store.close()


def test_an_old_file_is_migrated_and_keywords_are_stemmed(tmp_path: Path, monkeypatch) -> None:
    import tiermem.stores.sqlite as sqlite_store

    path = tmp_path / "old.db"
    first = sqlite_store.MIGRATIONS[:1]
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_store, "MIGRATIONS", first)
        with SQLiteStore(path, dimension=DIM) as store:
            # a message: a profile memory advances the generation, a later schema's table
            text = "She paints landscapes every weekend."
            store.index.add("u", text, embedding=vecs(1)[0], memory_type="message")
            # (the old schema has no owner column: the search of today does not run on it)
    with SQLiteStore(path, dimension=DIM) as store:
        hits = store.index.search("u", "painting", mode="keyword")
        assert [h.record.content for h in hits] == ["She paints landscapes every weekend."]


def test_a_big_users_keyword_matches_are_chosen_by_the_rarer_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the newest KEYWORD_SCAN matches are ranked; when the query's words match
    more rows than that, the rarest words choose them, so a common word's newest rows
    do not push out an older row that holds the rare one too."""
    import tiermem.stores.ops as ops

    monkeypatch.setattr(ops, "KEYWORD_SCAN", 4)
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        m = vecs(10)
        old = store.index.add("u", "the zebra crossing opens first", embedding=m[0])
        newer = [store.index.add("u", f"first note {i}", embedding=m[i + 1]) for i in range(8)]
        other = store.index.add("v", "a zebra of another user", embedding=m[9])
        hits = store.index.search("u", "zebra first", mode="keyword", limit=8, count_access=False)
        assert [h.record.id for h in hits] == [old]  # chosen by "zebra" (1 row)
        hits = store.index.search("u", "first", mode="keyword", limit=8, count_access=False)
        assert {h.record.id for h in hits} == set(newer[4:])  # one word: the newest 4
        # within the limit every word chooses: all the matches are ranked
        monkeypatch.setattr(ops, "KEYWORD_SCAN", 20)
        hits = store.index.search("u", "zebra first", mode="keyword", limit=20, count_access=False)
        assert hits[0].record.id == old and len(hits) == 9
        assert other not in {h.record.id for h in hits}


def test_a_users_rows_of_a_type_are_found_through_an_index(tmp_path: Path) -> None:
    """Every context searches among the user's preferences: the rows of a type come from
    an index (migration 005), not a read of every row of the user."""
    from tiermem.stores.sqlite import _where
    from tiermem.types.filters import MemoryFilter

    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        store.index.add("u", "I prefer tea", embedding=vecs(1)[0], memory_type="preference")
    where, params = _where("u", MemoryFilter(memory_types=("preference",)))
    raw = sqlite3.connect(tmp_path / "m.db")
    plan = raw.execute(f"EXPLAIN QUERY PLAN SELECT seq FROM memories_8 WHERE {where}", params)
    assert "COVERING INDEX memories_8_user_type" in " ".join(str(r[3]) for r in plan)
