"""Smoke test of benchmarks/longmem.py on two tiny conversations in BEAM's format, and its
judging, passages and cross-validation on hand-made cases."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from benchsmoke import ROOT, run_benchmark

sys.path.insert(0, str(ROOT / "benchmarks"))

PET = "I adopted a greyhound called Pixel from the shelter last spring."
PET_REPLY = "Congratulations on adopting Pixel, greyhounds are gentle and quiet dogs."
JOB = "My dashboard API answers in about 400ms on average right now."
JOB_REPLY = "That is a reasonable response time for a dashboard backed by a database."
CLASS = "I signed up for a pottery class that starts on Tuesday evenings."
CLASS_REPLY = "Pottery is a lovely hobby, and Tuesday evenings are usually quiet."
FASTER = "After the caching work the dashboard API now answers in about 250ms."
FASTER_REPLY = "Caching usually gives the biggest win for read-heavy dashboards."


def message(i: int, role: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"role": role, "id": i, "content": text, **extra}


def write_beam(folder: Path, name: str, swap: tuple[str, str] = ("", "")) -> None:
    """A BEAM-format conversation ``name``: two batches of two turns, four questions."""

    def said(text: str) -> str:
        return text.replace(*swap) if swap[0] else text

    chat = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [
                    message(0, "user", said(PET) + " ->-> 1,1", time_anchor="March-15-2024"),
                    message(1, "assistant", said(PET_REPLY)),
                ],
                [message(2, "user", said(JOB) + " ->-> 1,2"), message(3, "assistant", JOB_REPLY)],
            ],
        },
        {
            "batch_number": 2,
            "time_anchor": None,
            "turns": [
                [
                    message(4, "user", said(CLASS), time_anchor="April-05-2024"),
                    message(5, "assistant", CLASS_REPLY),
                ],
                [message(6, "user", FASTER), message(7, "assistant", FASTER_REPLY)],
            ],
        },
    ]
    questions = {
        "abstention": [{"question": "What is my cat's name?", "ideal_response": "Unknown."}],
        "information_extraction": [
            {"question": "What is my dog's name?", "answer": "Pixel", "source_chat_ids": [0]}
        ],
        "knowledge_update": [
            {
                "question": "How fast does the dashboard API answer?",
                "answer": "About 250ms",
                "source_chat_ids": {"original_info": [2], "updated_info": [6]},
            }
        ],
        "temporal_reasoning": [
            {
                "question": "Did I adopt the dog before the pottery class?",
                "answer": "Yes",
                "source_chat_ids": {"first_event": [0], "second_event": [4]},
            }
        ],
    }
    (folder / name).mkdir(parents=True)
    (folder / name / "chat.json").write_text(json.dumps(chat))
    (folder / name / "probing_questions.json").write_text(json.dumps(questions))


def test_longmem_run_on_two_tiny_conversations(tmp_path: Path) -> None:
    data = tmp_path / "beam"
    write_beam(data / "100K", "1")
    write_beam(data / "100K", "2", ("Pixel", "Rex"))
    store = tmp_path / "store"
    args = [str(data), "--budgets", "60", "4000", "--store", str(store), "--one-user"]
    args += ["--grid", "default", "floor-on", "pool-400"]
    proc, result = run_benchmark("longmem", *args, out=tmp_path / "longmem.json")
    assert result["conversations"] == ["1", "2"] and result["questions"] == 6  # abstention out
    assert all(i["messages"] == 8 and not i["refused"] for i in result["ingest"].values())
    dense = result["systems"]["dense messages"]["4000"]
    assert dense["touched"] == 1.0 and dense["sentences"] == 1.0  # everything fits in 4,000
    assert result["systems"]["recent window"]["4000"]["touched"] == 1.0
    # the update is touched, but in time order the original (touched too) comes first
    assert dense["updated_touched"] == 1.0 and dense["updated_first"] == 0.0
    # found: "Pixel" in 1 (2 says Rex) and "About 250ms" in both; "Yes" is not in either
    assert dense["answers"] == 0.5
    assert set(dense["ability"]) == {
        "information_extraction",
        "knowledge_update",
        "temporal_reasoning",
    }
    assert set(result["systems"]) == {
        "tiermem",
        "dense messages",
        "dense passages",
        "BM25 passages",
        "recent window",
    }
    for figures in result["systems"].values():
        assert figures["60"]["tokens"] <= 60 and figures["4000"]["tokens"] <= 4000
    grid = result["grid"]
    assert list(grid["touched"]) == ["default", "floor-on", "pool-400"]
    assert set(grid["cv"]["fold_choices"]) == {"1", "2"}
    latency = result["latency"]
    assert latency["embed_ms"]["p50"] > 0 and set(latency["ratio"]) == {"60", "4000"}
    one = result["one_user"]
    assert one["systems"]["dense messages"]["4000"]["touched"] == 1.0
    assert set(one["p50_ratio_to_apart"]) == {"60", "4000"}
    assert "leave-one-conversation-out" in proc.stdout and "one user" in proc.stdout

    from tiermem import Memory

    memory = Memory(str(store / "apart.db"))
    try:  # the index marker was stripped before adding
        history = memory.history("beam-1", "batch-1")
        assert [m.text for m in history][:3] == [PET, PET_REPLY, JOB]
    finally:
        memory.close()
    # a second run reuses the stores: no ingest
    proc, again = run_benchmark("longmem", *args, out=tmp_path / "longmem.json")
    assert "reused store" in proc.stdout
    assert again["ingest"]["1"]["reused"] and again["systems"]["dense messages"]["4000"] == dense


def test_judge_touched_sentences_answers_and_updates() -> None:
    from longmem import Conversation, Question, Said, judge, normal
    from tiermem.text import sentences

    def said(i: int, text: str) -> Said:
        long = tuple(normal(s) for s in sentences(text) if len(s) >= 30)
        return Said(i, "user", text, 1, None, long)  # type: ignore[arg-type]

    one = said(1, "The dashboard API answers in 400ms.  It was slow before we cached it.")
    two = said(2, "Now the dashboard API answers in 250ms after caching.")
    conv = Conversation("c", [one, two], [], {1: one, 2: two})
    q = Question(
        "c",
        "knowledge_update",
        "How fast?",
        (1, 2),
        {"original_info": (1,), "updated_info": (2,)},
        "250ms",
    )
    text = "user: Now the dashboard API  answers in 250ms\nafter caching.\nuser: The dashboard API answers in 400ms."
    got = judge(text, 40, q, conv)
    assert got.touched == 1.0 and got.sentences == 2 / 3  # "It was slow..." is missing
    assert got.answer == 1.0 and got.updated == 1.0 and got.updated_first == 1.0
    got = judge(
        "The dashboard API answers in 400ms. Now the dashboard API answers in 250ms after caching.",
        30,
        q,
        conv,
    )
    assert got.updated == 1.0 and got.updated_first == 0.0
    got = judge("It was slow before we cached it.", 10, q, conv)
    assert got.touched == 0.5 and got.updated == 0.0 and got.updated_first == 0.0
    assert judge("25ms", 1, q, conv).answer == 0.0  # whole words only
    both = Question(
        "c",
        "knowledge_update",
        "How fast?",
        (2,),
        {"original_info": (2,), "updated_info": (2,)},
        None,
    )
    assert judge(text, 40, both, conv).updated_first == 1.0  # one message is not before itself


def test_passages_follow_sentences_within_the_limit() -> None:
    from longmem import passages

    text = "First sentence here. " * 30 + "\n" + "word " * 200
    cut = passages(text, 100)
    assert all(len(p) <= 100 for p in cut)
    assert (
        cut[0]
        == "First sentence here. First sentence here. First sentence here. First sentence here."
    )
    assert " ".join(" ".join(cut).split()) == " ".join(text.split())  # nothing lost


def test_fast_bm25_scores_as_locomo_bm25() -> None:
    import numpy as np

    from locomo import BM25
    from longmem import FastBM25

    docs = ["the dog Pixel runs", "pottery class on Tuesday", "dog and cat", "the the the"]
    for query in ("dog Pixel", "the class", "nothing here"):
        assert np.allclose(FastBM25(docs).scores(query), BM25(docs).scores(query))


def test_cross_validation_picks_on_the_other_conversations() -> None:
    from longmem import choose, cross_validate

    # two budgets; "a" is best on c1 and c2, "b" only on c3, where it wins by far
    scores = {
        "default": {"c1": [[0.5, 0.5]], "c2": [[0.5, 0.5]], "c3": [[0.2, 0.2]]},
        "a": {"c1": [[0.7, 0.7]], "c2": [[0.6, 0.6]], "c3": [[0.1, 0.1]]},
        "b": {"c1": [[0.4, 0.4]], "c2": [[0.4, 0.4]], "c3": [[1.0, 1.0]]},
    }
    assert choose(scores, ["c1", "c2", "c3"]) == "b"  # 0.6 against a's 0.467
    cv = cross_validate(scores, [100, 200])
    assert cv["fold_choices"] == {"c1": "b", "c2": "b", "c3": "a"}
    assert cv["in_sample_choice"] == "b"
    assert cv["cv"]["touched"][100] == pytest.approx((0.4 + 0.4 + 0.1) / 3)
    assert cv["in_sample"]["mean"] == pytest.approx(0.6)
    assert cv["default"]["mean"] == pytest.approx(0.4)
    tie = {"default": {"c1": [[0.5]], "c2": [[0.5]]}, "x": {"c1": [[0.5]], "c2": [[0.5]]}}
    assert cross_validate(tie, [1])["fold_choices"] == {"c1": "default", "c2": "default"}


def test_ingest_adds_a_refusing_batch_one_message_at_a_time() -> None:
    from datetime import datetime, timezone

    from longmem import Conversation, Said, ingest
    from tiermem.errors import ContentTooLargeError

    class Refusing:
        """What the benchmark calls of a Memory; refuses messages over 20 characters."""

        def __init__(self) -> None:
            self.added: list[tuple[str, str]] = []

        def check(self, content: str) -> None:
            if len(content) > 20:
                raise ContentTooLargeError("content", f"has {len(content)} characters")

        def add_messages(
            self, messages: list[dict[str, Any]], user_id: str, session_id: str
        ) -> None:
            for m in messages:
                self.check(m["content"])
            self.added += [(session_id, m["content"]) for m in messages]

        def add(self, *, user_id: str, session_id: str, content: str, **fields: Any) -> None:
            self.check(content)
            self.added.append((session_id, content))

        def flush(self) -> bool:
            return True

    when = datetime(2024, 3, 15, tzinfo=timezone.utc)
    texts = [(1, "short one"), (1, "x" * 30), (1, "short two"), (2, "short three")]
    said = [Said(i, "user", t, b, when) for i, (b, t) in enumerate(texts)]
    memory = Refusing()
    got = ingest(memory, Conversation("c", said, []), "u", "p-")
    assert memory.added == [
        ("p-batch-1", "short one"),
        ("p-batch-1", "short two"),
        ("p-batch-2", "short three"),
    ]
    assert got.messages == 3 and [r["id"] for r in got.refused] == [1]
    assert got.refused[0]["chars"] == 30
