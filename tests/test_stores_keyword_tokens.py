"""SQLite's keyword index of each user's own: the Porter stems FTS5 would give, tokens
prefixed by their owner, kept in step by the triggers, and an index of version 3 rebuilt."""

from __future__ import annotations

import re
import sqlite3
import uuid
from pathlib import Path

import numpy as np
import pytest

from tiermem.stores import keyword_tokens, schema
from tiermem.stores.porter import stem
from tiermem.stores.sqlite import MIGRATIONS, SQLiteStore

DIM = 8
ROOT = Path(__file__).resolve().parents[1]


def vec(seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return x / np.linalg.norm(x)


def fts5_stems(words: list[str]) -> dict[str, str]:
    """Each word's stem by SQLite's own ``porter`` tokenizer (the oracle)."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE VIRTUAL TABLE f USING fts5(w, tokenize='porter ascii')")
    c.executemany("INSERT INTO f(rowid, w) VALUES (?, ?)", list(enumerate(words)))
    c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    return {words[doc]: term for term, doc in c.execute("SELECT term, doc FROM v")}


def test_the_stemmer_gives_fts5s_stem_for_every_word_of_the_docs_and_code() -> None:
    texts = [p.read_text(encoding="utf-8") for p in [*ROOT.glob("docs/*.md"), ROOT / "README.md"]]
    texts += [p.read_text(encoding="utf-8") for p in ROOT.glob("src/tiermem/**/*.py")]
    tricky = "sses ies eed agreed feed caresses ponies ties cats hopping filing happy sky"
    words = sorted(set(re.findall(r"[a-z]+", " ".join(texts).lower())) | set(tricky.split()))
    assert len(words) > 3000
    oracle = fts5_stems(words)
    assert {w: stem(w) for w in words if stem(w) != oracle[w]} == {}


@pytest.mark.parametrize(
    ("word", "expected"),
    [("painting", "paint"), ("relational", "relat"), ("generalization", "gener"), ("at", "at")],
)
def test_known_stems(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_words_fold_case_and_accents_and_split_like_unicode61() -> None:
    assert keyword_tokens.words("Café_Crème 3.5 don't") == ["cafe", "creme", "3", "5", "don", "t"]
    assert keyword_tokens.words("𝐒𝐄𝐓𝐓𝐈𝐍𝐆𝐒 İstanbul") == ["settings", "istanbul"]


def test_each_users_tokens_carry_its_own_prefix() -> None:
    a, b = keyword_tokens.owner_prefix("alice"), keyword_tokens.owner_prefix("bob")
    assert a != b and len(a) == 17
    assert keyword_tokens.document("alice", "Paints boats") == f"{a}paint {a}boat"
    assert keyword_tokens.phrases("alice", ["painting", "paints"]) == [f"{a}paint"]
    assert keyword_tokens.phrases("alice", ["boat_trips", "_"]) == [f"{a}boat {a}trip"]
    assert keyword_tokens.phrases("alice", ["_"]) == []
    assert keyword_tokens.match([f"{a}paint", f"{a}boat {a}trip"]) == (
        f'"{a}paint" OR "{a}boat {a}trip"'
    )


def test_the_rarest_phrases_choose_the_matches_within_the_limit() -> None:
    chosen = ["kfirst", "kzebra", "kboat ktrip"]
    counts = keyword_tokens.rows_of(chosen, {"kfirst": 900, "kzebra": 3, "kboat": 50})
    assert counts == [900, 3, 0]  # a phrase: its rarest token's rows at most
    assert keyword_tokens.rarest(chosen, counts, 100) == ["kzebra", "kboat ktrip"]
    assert keyword_tokens.rarest(chosen, counts, 2) == ["kboat ktrip"]  # at least one
    assert keyword_tokens.rarest(chosen, counts, 1000) == chosen  # in their order


def vocabulary(path: Path) -> dict[str, int]:
    """The index's tokens and how many rows hold each."""
    raw = sqlite3.connect(path)
    raw.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, memories_8_fts, 'row')")
    found = dict(raw.execute("SELECT term, doc FROM temp.v").fetchall())
    raw.close()
    return found


def test_adds_updates_and_deletes_keep_each_users_postings(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    a, b = keyword_tokens.owner_prefix("a"), keyword_tokens.owner_prefix("b")
    with SQLiteStore(path, dimension=DIM) as store:
        first = store.index.add("a", "the lighthouse keeper paints", embedding=vec(1))
        store.index.add("b", "a lighthouse in the fog", embedding=vec(2))
        assert vocabulary(path)[f"{a}lighthous"] == 1 == vocabulary(path)[f"{b}lighthous"]
        (hit,) = store.index.search("a", "lighthouses", mode="keyword")
        assert hit.record.id == first
        assert store.index.search("b", "keeper", mode="keyword") == []
        store.index.update("a", first, content="the harbour master sails", embedding=vec(3))
        assert f"{a}lighthous" not in vocabulary(path)
        assert [h.record.id for h in store.index.search("a", "sailing", mode="keyword")] == [first]
        store.index.delete("a", first)
        assert not any(term.startswith(a) for term in vocabulary(path))
        assert [h.record.content for h in store.index.search("b", "fog", mode="keyword")] == [
            "a lighthouse in the fog"
        ]


def test_a_version_3_index_is_rebuilt_for_each_user(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.row_factory = sqlite3.Row
    raw.execute("BEGIN")
    schema.migrate(raw, {"memories_8": MIGRATIONS[:3]}, DIM, "?")  # as the last release left it
    for user, text in [("a", "she paints landscapes"), ("b", "he painted the fence")]:
        raw.execute(
            "INSERT INTO memories_8 (id, user_id, content, content_hash, memory_type,"
            " importance, created_at, accessed_at, embedding, vseq)"
            " VALUES (?, ?, ?, ?, 'fact', 0.5, 0, 0, ?, 1)",
            (str(uuid.uuid4()), user, text, text, vec().tobytes()),
        )
        raw.execute("INSERT INTO memories_8_users VALUES (?, 1, 0)", (user,))
    raw.execute("COMMIT")
    raw.close()
    with SQLiteStore(path, dimension=DIM) as store:
        assert [h.record.content for h in store.index.search("a", "painting", mode="keyword")] == [
            "she paints landscapes"
        ]
        assert [h.record.content for h in store.index.search("b", "painting", mode="keyword")] == [
            "he painted the fence"
        ]
    assert vocabulary(path)[keyword_tokens.owner_prefix("b") + "fenc"] == 1


def test_a_shared_prefix_never_reaches_another_users_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were two users' hashes to collide, FTS5 would rank their rows together; the rows
    read are still the asking user's own, with and without a filter."""
    monkeypatch.setattr(keyword_tokens, "owner_prefix", lambda user_id: "kcollide")
    with SQLiteStore(tmp_path / "m.db", dimension=DIM) as store:
        store.index.add("a", "the lighthouse keeper", embedding=vec(1), metadata={"k": 1})
        mine = store.index.add("b", "a lighthouse in the fog", embedding=vec(2), metadata={"k": 1})
        for kwargs in ({}, {"metadata": {"k": 1}}):
            hits = store.index.search("b", "lighthouse keeper", mode="keyword", **kwargs)
            assert [h.record.id for h in hits] == [mine]


def test_non_ascii_rows_are_found_and_deleted_whole(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    prefix = keyword_tokens.owner_prefix("u")
    with SQLiteStore(path, dimension=DIM) as store:
        first = store.index.add("u", "𝐒𝐄𝐓𝐓𝐈𝐍𝐆𝐒 of the Crème brûlée in İstanbul", embedding=vec(1))
        assert [h.record.id for h in store.index.search("u", "settings", mode="keyword")] == [first]
        assert [h.record.id for h in store.index.search("u", "creme brulee", mode="keyword")] == [
            first
        ]
        store.index.delete("u", first)
        assert not any(term.startswith(prefix) for term in vocabulary(path))
