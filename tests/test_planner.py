"""QueryPlanner: ranking cues, budget shares and order, deduplication, never over budget."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import accumulate
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.errors import InvalidSizeError
from tiermem.messages import Message, summary_message
from tiermem.planner.planner import (
    EXCERPT_GAP,
    NEWEST_FIRST_HEADER,
    RETRIEVED_HEADER,
    SYNOPSIS_HEADER,
    Candidate,
    QueryPlanner,
)
from tiermem.planner.ranking import Excerpt, Substrings, specific, stacked
from tiermem.planner.settings import PlannerConfig
from tiermem.text import folded
from tiermem.tokens import get_token_counter
from tiermem.types.context import SECTIONS, Context

COUNTER = get_token_counter()
DAY = datetime(2023, 5, 8, 12, tzinfo=timezone.utc)


FLOOR = {"enabled": True}
"""The relevance floor on (it is off by default)."""


def planner(**settings_: object) -> QueryPlanner:
    return QueryPlanner(PlannerConfig(**settings_), counter=COUNTER)  # type: ignore[arg-type]


def cand(
    content: str, similarity: float | None = 0.5, source: str = "store", **fields: Any
) -> Candidate:
    return Candidate(content, source, similarity, key=folded(content), **fields)


def recount(ctx: Context) -> int:
    total = sum(COUNTER.count_message(Message.from_openai(m)) for m in ctx.messages)
    return total + (3 if ctx.messages else 0)


def section_tokens(ctx: Context, section: str) -> int:
    return sum(i.tokens for i in ctx.items if i.section == section)


# -- plan: inputs ------------------------------------------------------------------


def test_nothing_to_plan_is_an_empty_context() -> None:
    ctx = planner().plan("anything", max_tokens=100)
    assert (ctx.messages, ctx.items, ctx.total_tokens, ctx.max_tokens) == ([], [], 0, 100)
    assert ctx.explain().splitlines()[0] == "context for 'anything': 0/100 tokens"


@pytest.mark.parametrize("budget", [0, -1, True, False, 2.5, "100"])
def test_bad_budget(budget: object) -> None:
    with pytest.raises(InvalidSizeError, match="max_tokens"):
        planner().plan("q", max_tokens=budget)  # type: ignore[arg-type]


def test_default_budget_comes_from_the_settings() -> None:
    assert planner().plan("q").max_tokens == 4000
    assert planner(max_tokens=77).plan("q").max_tokens == 77


# -- sections: order and shares --------------------------------------------------------


def full_plan(p: QueryPlanner, budget: int = 1000) -> Context:
    recent = [Message("user", "hello there"), Message("assistant", "hi, how can I help?")]
    return p.plan(
        "the cat",
        max_tokens=budget,
        recent=recent,
        candidates=[cand("the cat is called Tom", 0.9, timestamp=DAY)],
        summary="we talked about pets",
        synopsis="Name: Ana",
    )


def test_default_order_and_rendering() -> None:
    ctx = full_plan(planner())
    assert [i.section for i in ctx.items] == [
        "synopsis",
        "summary",
        "retrieved",
        "recent",
        "recent",
    ]
    assert ctx.messages[0] == {"role": "system", "content": f"{SYNOPSIS_HEADER}\nName: Ana"}
    assert ctx.messages[1] == {
        "role": "system",
        "content": "Previous conversation summary: we talked about pets",
    }
    assert (
        ctx.messages[2]["content"] == f"{NEWEST_FIRST_HEADER}\n[8 May 2023]\nthe cat is called Tom"
    )
    assert ctx.messages[3:] == [
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi, how can I help?"},
    ]
    assert ctx.total_tokens == recount(ctx)


def test_configured_order() -> None:
    ctx = full_plan(planner(order=["recent", "retrieved", "synopsis", "summary"]))
    assert [i.section for i in ctx.items] == [
        "recent",
        "recent",
        "retrieved",
        "synopsis",
        "summary",
    ]
    assert ctx.messages[0]["content"] == "hello there"


def test_items_say_section_source_score_and_tokens() -> None:
    ctx = full_plan(planner())
    for item in ctx.items:
        assert item.section in SECTIONS and item.tokens > 0
    recent = [i for i in ctx.items if i.section == "recent"]
    assert {(i.source, i.score) for i in recent} == {("buffer", 1.0)}
    assert recent[0].tokens == COUNTER.count_message(Message("user", "hello there"))
    (found,) = [i for i in ctx.items if i.section == "retrieved"]
    assert found.source == "store" and 0 < found.score <= 1 and found.timestamp == DAY
    # a line's tokens: its text, its newline, and its date header (first of its date)
    assert found.tokens == COUNTER.count("the cat is called Tom\n") + COUNTER.count(
        "[8 May 2023]\n"
    )


def test_a_summary_or_synopsis_over_its_share_is_dropped_not_cut() -> None:
    long = "word " * 200  # about 200 tokens
    ctx = planner().plan("q", max_tokens=1000, summary=long, synopsis=long)
    assert ctx.items == []  # each share is 10 %: 100 tokens
    ctx = planner(shares={"summary": 0.5, "synopsis": 0.05}).plan(
        "q", max_tokens=1000, summary=long, synopsis=long
    )
    assert [i.section for i in ctx.items] == ["summary"]
    assert ctx.items[0].content == long  # whole, never truncated


def test_recent_share_keeps_the_newest_whole_messages() -> None:
    recent = [Message("user", f"message {i} " + "pad " * 20) for i in range(30)]
    ctx = planner().plan("q", max_tokens=500, recent=recent)
    kept = [i.content for i in ctx.items if i.section == "recent"]
    assert kept and kept == [m.text for m in recent[-len(kept) :]]
    assert section_tokens(ctx, "recent") <= 500 * 0.2
    assert len(kept) < 30


def test_recent_never_separates_a_tool_call_from_its_result() -> None:
    call = Message(
        "assistant",
        None,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    )
    result = Message("tool", "x " * 30, tool_call_id="c1")
    last = Message("assistant", "done")
    for budget in range(20, 400, 7):
        ctx = planner(shares={"recent": 1.0}).plan(
            "q", max_tokens=budget, recent=[call, result, last]
        )
        roles = [m["role"] for m in ctx.messages]
        assert roles in ([], ["assistant"], ["assistant", "tool", "assistant"]), (budget, roles)


def test_retrieved_share_caps_the_memories() -> None:
    candidates = [
        cand(f"memory number {i} about gardens and roses", 0.5 + i / 100) for i in range(50)
    ]
    ctx = planner(shares={"retrieved": 0.25}).plan(
        "gardens", max_tokens=1000, candidates=candidates
    )
    assert 0 < recount(ctx) <= 250 + 3


def test_retrieved_memories_are_rendered_in_time_order_under_their_dates() -> None:
    candidates = [
        cand("later thing", 0.9, timestamp=DAY + timedelta(days=30)),
        cand("earlier thing", 0.8, timestamp=DAY),
        cand("same day thing", 0.7, timestamp=DAY + timedelta(hours=2)),
        cand("undated thing", 0.6),
    ]
    ctx = planner().plan(
        "in what order did each thing happen", max_tokens=1000, candidates=candidates
    )
    assert ctx.messages[0]["content"].splitlines() == [
        RETRIEVED_HEADER,
        "[undated]",
        "undated thing",
        "[8 May 2023]",
        "earlier thing",
        "same day thing",
        "[7 June 2023]",
        "later thing",
    ]
    ctx = planner().plan("thing", max_tokens=1000, candidates=candidates)
    assert ctx.messages[0]["content"].splitlines() == [
        NEWEST_FIRST_HEADER,  # a statement that updates an earlier one comes before it
        "[7 June 2023]",
        "later thing",
        "[8 May 2023]",
        "same day thing",
        "earlier thing",
        "[undated]",
        "undated thing",
    ]
    scores = [i.score for i in ctx.items]
    assert scores == sorted(scores, reverse=True)  # items list the best first


def test_a_pool_of_duplicates_does_not_hide_what_follows_it() -> None:
    """Candidates are offered a stretch at a time (POOL_ROOMS times the room): when the
    best stretch is all one memory said again, the next stretch is offered."""
    same = [cand("The wifi password is kangaroo, said again", 0.9) for _ in range(60)]
    other = cand("The guest wifi password is wallaby", 0.1)
    ctx = planner().plan("wifi password", max_tokens=120, candidates=[*same, other])
    texts = [i.content for i in ctx.items]
    assert texts.count("The wifi password is kangaroo, said again") == 1
    assert "The guest wifi password is wallaby" in texts


# -- deduplication -----------------------------------------------------------------


def test_same_content_and_near_duplicates_appear_once() -> None:
    candidates = [
        cand("The wifi password is kangaroo", 0.9, source="store"),
        cand("the WIFI password is kangaroo!", 0.8, source="working"),
        cand("The wifi password is kangaroo.", 0.7, source="buffer"),
        cand("kangaroo is the wifi password", 0.6),  # same words, other order
        cand("The guest wifi password is wallaby", 0.5),
    ]
    ctx = planner().plan("wifi", max_tokens=1000, candidates=candidates)
    texts = sorted(i.content for i in ctx.items)
    assert texts == ["The guest wifi password is wallaby", "The wifi password is kangaroo"]
    strict = planner(near_duplicate=1.0).plan("wifi", max_tokens=1000, candidates=candidates)
    assert len(strict.items) == len(ctx.items)  # identical word sets are still one


def test_near_duplicate_threshold() -> None:
    base = " ".join(f"w{i}" for i in range(20))
    variant = base + " extra"  # Jaccard 20/21 = 0.95
    candidates = [cand(base, 0.9), cand(variant, 0.8)]
    assert (
        len(planner(near_duplicate=0.9).plan("w1", max_tokens=2000, candidates=candidates).items)
        == 1
    )
    assert (
        len(planner(near_duplicate=0.99).plan("w1", max_tokens=2000, candidates=candidates).items)
        == 2
    )


def test_recent_messages_are_not_repeated_as_memories() -> None:
    recent = [Message("user", "I love sailing", name="Ana")]
    candidates = [
        cand("I love sailing", 0.9),
        cand("Ana: I love sailing", 0.9),
        cand("user: I love sailing", 0.9),  # another speaker form: the role
        cand("Ana loves the sea", 0.5),
    ]
    ctx = planner().plan("sailing", max_tokens=1000, recent=recent, candidates=candidates)
    retrieved = [i.content for i in ctx.items if i.section == "retrieved"]
    assert "Ana loves the sea" in retrieved
    assert "I love sailing" not in retrieved and "Ana: I love sailing" not in retrieved


# -- relevance cues ----------------------------------------------------------------


def relevance(query: str, candidates: list[Candidate], **settings_: object) -> list[float]:
    planner(**settings_).rank_relevance(query, candidates)
    return [c.relevance for c in candidates]


def test_relevance_is_scaled_to_the_best() -> None:
    values = relevance("q", [cand("a", 0.9), cand("b", 0.5), cand("c", 0.1), cand("d", None)])
    assert values[0] == 1.0 and all(0.0 <= v <= 1.0 for v in values)
    assert values[0] > values[1] >= values[2] and values[3] == 0.0
    assert relevance("q", []) == []


def test_keyword_evidence_adds_to_the_vector_score() -> None:
    plain, with_keyword = cand("a", 0.6), cand("b", 0.6, keyword=5.0)
    others = [cand(f"x{i}", 0.2, keyword=0.1) for i in range(4)]
    values = relevance("q", [plain, with_keyword, *others])
    assert values[1] > values[0]


def test_session_cue_lifts_memories_of_a_relevant_conversation() -> None:
    on_topic = [cand(f"talk {i}", 0.9, session_id="hiking") for i in range(3)]
    a = cand("a line of the hiking talk", 0.4, session_id="hiking")
    b = cand("a line of another talk", 0.4, session_id="cooking")
    filler = [cand(f"cook {i}", 0.1, session_id="cooking") for i in range(3)]
    relevance("q", [*on_topic, a, b, *filler])
    assert a.relevance > b.relevance
    relevance("q", [*on_topic, a, b, *filler], weights={"session": 0.0})
    assert a.relevance == b.relevance


def test_neighbour_cue_lifts_the_message_next_to_a_match() -> None:
    match = cand("Ana: we got a puppy and named him", 0.9, message_id="m1")
    answer = cand("Ben: Rex, a great name", 0.0, message_id="m2", previous_id="m1")
    unrelated = cand("Ben: the weather is nice", 0.0, message_id="m9")
    values = relevance("puppy name", [match, answer, unrelated, cand("x", 0.1)])
    assert values[1] >= 0.5 * values[0] > values[2]
    values = relevance(
        "puppy name", [match, answer, unrelated, cand("x", 0.1)], weights={"neighbour": 0.0}
    )
    assert values[1] == values[2]


def test_a_question_hands_its_relevance_to_its_reply() -> None:
    """A line that asks shares the topic's words but rarely the answer, which the line
    after it holds: the question is discounted and its reply carries its relevance."""

    def lines() -> list[Candidate]:
        question = cand("Ana: what did you name the puppy?", 0.9, message_id="m1")
        reply = cand("Ben: we called him Rex", 0.0, message_id="m2", previous_id="m1")
        statement = cand("Ben: the puppy loves the park", 0.9, message_id="m9")
        return [question, reply, statement, cand("x", 0.1), cand("y", 0.2)]

    asked, replied, stated, *_ = relevance("puppy name", lines())
    assert asked < stated and replied == asked
    asked, replied, stated, *_ = relevance(
        "puppy name", lines(), weights={"question": 0.0, "reply": 0.5}
    )
    assert asked == stated and replied == 0.5 * asked


def test_a_when_question_lifts_the_lines_that_say_when() -> None:
    def lines() -> list[Candidate]:
        dated = cand("Jon: yesterday I went to a fair to show my studio", 0.5)
        undated = cand("Jon: I went to a fair to show my studio", 0.5)
        return [dated, undated, cand("x", 0.1), cand("y", 0.2)]

    dated, undated, *_ = relevance("When did Jon go to a fair?", lines())
    assert dated > undated
    dated, undated, *_ = relevance("Why did Jon go to a fair?", lines())
    assert dated == undated
    dated, undated, *_ = relevance("When did Jon go to a fair?", lines(), weights={"when": 0.0})
    assert dated == undated


def test_a_question_about_someone_prefers_what_they_said() -> None:
    """When the query names some of the pool's speakers, a line by someone it does not
    name loses ``speaker`` of its relevance; naming all of them, or none, says nothing."""

    def lines() -> list[Candidate]:
        return [
            cand("Melanie: I've been running farther lately", 0.5, message_id="m1"),
            cand("Caroline: I've been running farther lately", 0.5, message_id="m2"),
            cand("x", 0.1),
            cand("y", 0.2),
        ]

    named, other, *_ = relevance(
        "What does Melanie do to destress?", lines(), weights={"speaker": 0.2}
    )
    assert other == pytest.approx(0.8 * named)
    for query in ("What do Melanie and Caroline do?", "What do they do to destress?"):
        named, other, *_ = relevance(query, lines(), weights={"speaker": 0.2})
        assert named == other
    named, other, *_ = relevance("What does Melanie do?", lines(), weights={"speaker": 0.0})
    assert named == other


def test_a_line_like_the_rest_of_the_pool_ranks_below_one_that_is_specific() -> None:
    """``generic`` takes from a line's similarity its similarity to the pool's mean
    vector: of two lines as near the query, the one near everything else is no evidence."""

    def lines() -> list[Candidate]:
        generic = [cand(f"thanks {i}", 0.3, vector=_unit(1, 0.1 * i, 0)) for i in range(4)]
        return [
            cand("Ana: thanks, so sweet of you!", 0.6, vector=_unit(1, 0, 0.2)),
            cand("Ana: I took up pottery", 0.6, vector=_unit(0.2, 0, 1)),
            *generic,
        ]

    like_all, specific, *_ = relevance("q", lines(), weights={"generic": 0.2})
    assert specific > like_all
    like_all, specific, *_ = relevance("q", lines(), weights={"generic": 0.0})
    assert specific == like_all
    pool = lines()
    relevance("q", pool, weights={"generic": 0.2})
    assert [c.similarity for c in pool[:2]] == [0.6, 0.6]  # the floor reads it unchanged


def test_pool_vectors_are_stacked_only_when_each_is_a_float32_row_of_the_width() -> None:
    """``stacked`` (the generic cue's and the diversity order's matrix) joins the vectors'
    bytes only when each is a contiguous float32 vector of the width; any other pool
    (a vector missing, of another type or width, a strided view) gets None, and the
    generic cue then takes the rows it can: the same values either way."""
    rows = [_unit(1, 0.1 * i, 0.2).astype(np.float32) for i in range(4)]
    assert np.array_equal(stacked(rows, 3), np.stack(rows))
    wide = np.stack(rows).T.copy()  # a column of it is a strided view
    for other in (None, rows[0].astype(np.float64), rows[0][:2], wide[:, 0], rows[0][None]):
        assert stacked([*rows[1:], other], 3) is None
    pool = [cand(f"line {i}", 0.5, vector=v) for i, v in enumerate(rows)]
    as_float64 = [cand(f"line {i}", 0.5, vector=v.astype(np.float64)) for i, v in enumerate(rows)]
    assert specific(pool, 0.2) == specific(as_float64, 0.2)


def test_temporal_cue_lifts_memories_in_the_named_time() -> None:
    may = cand("we went to the lake", 0.5, timestamp=DAY)
    august = cand("we went to the beach", 0.5, timestamp=DAY + timedelta(days=90))
    relevance("what did we do on 8 May 2023?", [may, august])
    assert may.relevance > august.relevance
    relevance("what did we do in August?", [may, august])
    assert august.relevance > may.relevance
    relevance("what did we do?", [may, august])
    assert may.relevance == august.relevance
    relevance("what did we do on 8 May 2023?", [may, august], weights={"temporal": 0.0})
    assert may.relevance == august.relevance


def test_score_blends_relevance_recency_and_importance() -> None:
    p = planner()
    old = cand("old", timestamp=DAY, importance=0.5)
    new = cand("new", timestamp=DAY + timedelta(days=30), importance=0.5)
    old.relevance = new.relevance = 1.0
    newest = DAY + timedelta(days=30)
    assert p.score(new, newest) > p.score(old, newest)
    w = p.settings.weights
    expected = (w.similarity + w.recency * 0.5 + w.importance * 0.5) / (
        w.similarity + w.recency + w.importance
    )
    assert p.score(old, newest) == pytest.approx(expected)  # 30 days = one half-life
    important = cand("important", importance=1.0)
    important.relevance = 0.0
    assert p.score(important, None) == pytest.approx(
        w.importance / (w.similarity + w.recency + w.importance)
    )


def test_what_the_line_estimates_leave_is_filled_by_exact_count() -> None:
    lines = [f"Ana: line number {i} of the talk!" for i in range(60)]
    candidates = [cand(text, 0.9 - i / 200) for i, text in enumerate(lines)]
    fill = {"diversity": 0.0, "floor": {"enabled": False}}  # the filling, not the floor
    for budget in (60, 150, 400):
        ctx = planner(**fill).plan("q", max_tokens=budget, candidates=candidates)
        assert ctx.total_tokens == recount(ctx) <= budget
        shown = {i.content for i in ctx.items}
        assert not any(  # no line left out would still have fitted
            recount(
                planner(**fill).plan(
                    "q",
                    max_tokens=10_000,
                    candidates=[c for c in candidates if c.content in shown or c.content == extra],
                )
            )
            <= budget
            for extra in lines
            if extra not in shown
        )


def test_an_excerpts_cost_counts_its_header_and_the_gap_before_it() -> None:
    """Passages of one long message are shown under one header, with a gap line between
    spans that do not meet: each is counted when it is offered, so the items' tokens add
    up to the section's and a full section is not rendered over the room and cut."""
    text = "Part {n}: the rollout plan names the owner of step {n} and its deadline."
    spans = [(0, 70), (72, 140), (400, 470), (900, 970)]  # the first two meet
    candidates = [
        cand(
            text.format(n=n),
            0.9 - n / 100,
            timestamp=DAY,
            message_id=f"m1#{n}",
            excerpt=Excerpt("m1", "assistant", start, end),
        )
        for n, (start, end) in enumerate(spans)
    ]
    ctx = planner(diversity=0.0).plan("rollout plan", max_tokens=4000, candidates=candidates)
    section = ctx.messages[-1]["content"]
    assert section.count("assistant (excerpt of message m1):") == 1
    assert section.count(EXCERPT_GAP) == 2
    header = COUNTER.count_message(
        Message.from_openai({"role": "system", "content": RETRIEVED_HEADER})
    )
    assert header + section_tokens(ctx, "retrieved") == recount(ctx) - 3


def test_the_best_memories_fill_a_small_budget() -> None:
    candidates = [cand(f"filler memory number {i}", 0.1) for i in range(30)]
    candidates.append(cand("the one that matters", 0.99))
    ctx = planner().plan("q", max_tokens=40, candidates=candidates)
    assert "the one that matters" in [i.content for i in ctx.items]
    assert ctx.total_tokens <= 40


def _unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_diversity_prefers_a_memory_that_adds_something_new() -> None:
    def pool() -> list[Candidate]:
        return [
            cand("Ana: we adopted a cat", 0.9, vector=_unit(1, 0, 0)),
            cand("Ana: we adopted a kitten", 0.85, vector=_unit(1, 0.1, 0)),
            cand("Ana: I started pottery", 0.8, vector=_unit(0, 1, 0)),
            *[cand(f"filler {i} " + "word " * 60, 0.1, vector=_unit(0, 0, 1)) for i in range(5)],
        ]

    assert COUNTER.count("Ana: I started pottery") <= COUNTER.count("Ana: we adopted a kitten")
    two = (
        planner().plan("q", max_tokens=1000, candidates=pool()[:2]).total_tokens + 5
    )  # room for line estimates, not a 3rd line
    chosen = {
        diversity: [
            i.content
            for i in planner(diversity=diversity).plan("q", max_tokens=two, candidates=pool()).items
        ]
        for diversity in (0.0, 0.3)
    }
    assert sorted(chosen[0.0]) == ["Ana: we adopted a cat", "Ana: we adopted a kitten"]
    assert sorted(chosen[0.3]) == ["Ana: I started pottery", "Ana: we adopted a cat"]


def test_diversity_ignores_memories_without_vectors() -> None:
    candidates = [cand("alpha one", 0.9), cand("alpha two", 0.8, vector=_unit(1, 0))]
    ctx = planner(diversity=1.0).plan("q", max_tokens=200, candidates=candidates)
    assert [i.content for i in ctx.items] == ["alpha one", "alpha two"]


@pytest.mark.parametrize("diversity", [-0.1, 1.5, "lots"])
def test_diversity_is_validated(diversity: object) -> None:
    with pytest.raises(ValueError, match="diversity"):
        PlannerConfig(diversity=diversity)


# -- never over budget -------------------------------------------------------------

words = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
texts = st.one_of(
    st.lists(words, min_size=1, max_size=6).map(" ".join),  # short lines: a few tokens each
    st.text(min_size=1, max_size=300),
)
shares = st.fixed_dictionaries({s: st.sampled_from([0.0, 0.1, 0.5, 1.0]) for s in SECTIONS})


def edges(recent: list[Message], summary: str | None, synopsis: str | None) -> list[int]:
    """The budgets at which the notes and the newest messages just fit, in the order the
    planner fills them: the reply's priming plus each running sum of their sizes."""
    notes = [
        {"role": "system", "content": f"{SYNOPSIS_HEADER}\n{synopsis}"} if synopsis else None,
        summary_message(summary) if summary else None,
    ]
    sizes = [COUNTER.count_message(Message.from_openai(n)) for n in notes if n]
    sizes += [COUNTER.count_message(m) for m in reversed(recent)]
    return list(accumulate(sizes, initial=3))[1:]


def budgets(edges: list[int]) -> st.SearchStrategy[int]:
    """A budget a token either side of an edge (where a fit off by one shows), a small
    one, or any."""
    near = [st.integers(max(1, edge - 1), edge + 1) for edge in edges]
    return st.one_of(*near, st.integers(1, 60), st.integers(1, 2500))


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    recent=st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "system"]), texts), max_size=12
    ),
    memories=st.lists(
        st.tuples(
            texts,
            st.none() | st.floats(-1, 1),
            st.none() | st.floats(0, 10),
            st.none() | st.integers(0, 2000),
            st.sampled_from([None, "s1", "s2"]),
        ),
        max_size=40,
    ),
    summary=st.none() | texts,
    synopsis=st.none() | texts,
    order=st.permutations(list(SECTIONS)),
    share=shares,
    query=st.text(max_size=80),
    floor=st.booleans(),
)
def test_plan_never_exceeds_the_budget(
    data: st.DataObject,
    recent: list[tuple[str, str]],
    memories: list[tuple[str, float | None, float | None, int | None, str | None]],
    summary: str | None,
    synopsis: str | None,
    order: list[str],
    share: dict[str, float],
    query: str,
    floor: bool,
) -> None:
    messages = [Message(role, text) for role, text in recent]
    budget = data.draw(budgets(edges(messages, summary, synopsis)), "budget")
    candidates = [
        cand(
            text,
            sim,
            keyword=kw,
            timestamp=None if day is None else DAY + timedelta(days=day),
            session_id=sid,
        )
        for text, sim, kw, day, sid in memories
    ]
    ctx = planner(order=order, shares=share, floor={"enabled": floor}).plan(
        query,
        max_tokens=budget,
        recent=messages,
        candidates=candidates,
        summary=summary,
        synopsis=synopsis,
    )
    assert ctx.total_tokens == recount(ctx) <= budget
    assert [i.section for i in ctx.items] == sorted((i.section for i in ctx.items), key=order.index)
    assert all(0.0 <= c.relevance <= 1.0 for c in candidates)


# -- the relevance floor ------------------------------------------------------------


def test_the_floor_leaves_out_memories_without_evidence_so_the_budget_is_a_cap() -> None:
    relevant = [cand(f"Ana bakes with rye flour, batch {i}.", 0.6) for i in range(3)]
    unrelated = [cand(f"The bus to the office left late on day {i}.", 0.1) for i in range(30)]
    ctx = planner(floor=FLOOR).plan(
        "which flour?", max_tokens=2000, candidates=relevant + unrelated
    )
    assert {i.content for i in ctx.items} == {c.content for c in relevant}
    assert ctx.total_tokens < 100  # far under the budget: nothing else was relevant
    off = planner(floor={"enabled": False}).plan(
        "which flour?", max_tokens=2000, candidates=relevant + unrelated
    )
    assert len(off.items) == 33  # without the floor the budget is filled


def test_the_floor_is_absolute_not_relative_to_the_pool() -> None:
    weak = [cand(f"Weak line {i} about nothing much.", 0.2 + i / 100) for i in range(5)]
    ctx = planner(floor=FLOOR).plan("flour", max_tokens=2000, candidates=weak)
    assert ctx.items == []  # the best of a weak pool is still weak
    relevance = sorted(c.relevance for c in weak)
    assert relevance[-1] == 1.0  # though its relative relevance is the top one


def test_the_drop_off_ends_a_context_where_the_evidence_falls_away_from_the_best() -> None:
    strong = [cand(f"Ana bakes rye loaves at the fair, stall {i}.", 0.8) for i in range(4)]
    weak = [cand(f"Bo mentioned the weather on walk {i}.", 0.3 + i / 1000) for i in range(80)]
    ctx = planner(floor=FLOOR).plan("what does Ana bake?", max_tokens=500, candidates=strong + weak)
    assert {i.content for i in ctx.items} == {c.content for c in strong}
    assert all(c.relevance < 0.25 for c in weak)  # relevance is relative: the best is 1
    filled = planner(floor={**FLOOR, "relevance": 0.0}).plan(
        "what does Ana bake?", max_tokens=500, candidates=strong + weak
    )
    assert len(filled.items) > 30 and filled.total_tokens > 450  # absolute evidence only


def test_the_drop_off_leaves_a_pool_that_fits_whole() -> None:
    pool = [cand(f"Ana bakes rye loaves, batch {i}.", 0.8 - i / 10) for i in range(5)]
    ctx = planner().plan("what does Ana bake?", max_tokens=1000, candidates=pool)
    assert len(ctx.items) == 5  # all have absolute evidence and all fit: nothing to cut
    assert min(c.relevance for c in pool) < 0.25


def test_all_the_query_keywords_let_a_dissimilar_memory_in() -> None:
    found = cand("Moinho Velho supplies the rye.", 0.05)
    half = cand("Moinho is a word for mill.", 0.05)
    ctx = planner(floor=FLOOR).plan(
        "Who is Moinho Velho?", max_tokens=500, candidates=[found, half]
    )
    assert [i.content for i in ctx.items] == [found.content]
    assert ctx.items[0].keywords == 1.0 and ctx.items[0].similarity == 0.05
    loose = planner(floor={**FLOOR, "keywords": 0.5}).plan(
        "Who is Moinho Velho?", max_tokens=500, candidates=[found, half]
    )
    assert len(loose.items) == 2


def test_words_meet_by_their_first_five_letters() -> None:
    painted = cand("Mel painted a sunrise last week.", 0.1)
    ctx = planner().plan("When did Mel paint the sunrise?", max_tokens=500, candidates=[painted])
    assert [i.content for i in ctx.items] == [painted.content]


def test_the_neighbours_of_a_relevant_message_pass_the_floor() -> None:
    question = cand("Ana: What did you bake for the fair?", 0.7, message_id="m1", session_id="s")
    answer = cand("Bo: Mostly rye loaves.", 0.2, message_id="m2", previous_id="m1", session_id="s")
    far = cand("Bo: It rained all day.", 0.2, message_id="m9", previous_id="m8", session_id="s")
    ctx = planner(floor={**FLOOR, "neighbours": True}).plan(
        "what was baked for the fair", max_tokens=500, candidates=[question, answer, far]
    )
    assert {i.content for i in ctx.items} == {question.content, answer.content}
    alone = planner(floor=FLOOR).plan(
        "what was baked for the fair", max_tokens=500, candidates=[question, answer, far]
    )
    assert [i.content for i in alone.items] == [question.content]


def test_a_memory_in_the_time_the_query_names_passes_the_floor() -> None:
    inside = cand("We opened the shop.", 0.1, timestamp=datetime(2025, 3, 10, tzinfo=timezone.utc))
    outside = cand(
        "We closed for holidays.", 0.1, timestamp=datetime(2025, 8, 1, tzinfo=timezone.utc)
    )
    ctx = planner(floor=FLOOR).plan(
        "What happened in March 2025?", max_tokens=500, candidates=[inside, outside]
    )
    assert [i.content for i in ctx.items] == [inside.content]


def test_explain_shows_the_absolute_evidence_beside_the_score() -> None:
    items = [cand("Ana bakes with rye flour.", 0.61), cand("Rye flour is dark.", 0.55)]
    ctx = planner().plan("rye flour", max_tokens=500, candidates=items)
    lines = ctx.explain().splitlines()
    assert lines[1].split() == ["section", "source", "score", "sim", "kw", "tokens", "content"]
    row = next(ln.split() for ln in lines if "Ana bakes" in ln)
    assert row[3:5] == ["0.610", "1.00"] and float(row[2]) > 0.9  # relative score of the best


@pytest.mark.parametrize(
    "floor",
    [
        {"similarity": 1.5},
        {"similarity": -2},
        {"keywords": 0},
        {"keywords": 1.2},
        {"relevance": -0.1},
        {"relevance": 1.5},
    ],
)
def test_bad_floor_settings_are_refused(floor: dict[str, float]) -> None:
    from tiermem.config.model import TiermemConfig
    from tiermem.errors import ConfigError

    with pytest.raises(ConfigError, match=r"memory\.planner\.floor"):
        TiermemConfig.load({"memory": {"planner": {"floor": floor}}})


@settings(max_examples=300, deadline=None)
@given(st.text("ab. ", max_size=40), st.lists(st.text("ab. ", max_size=12), max_size=20))
def test_substrings_holds_what_in_finds(text: str, needles: list[str]) -> None:
    """The planner's check that a memory is already in the notes (``Substrings``, which
    searches only when a needle's start is in the text) answers as ``in`` does."""
    shown = Substrings(text)
    for needle in [*needles, text, text[3:14], text[5:], ""]:
        assert shown.hold(needle) is (needle in text)


def test_lines_counted_when_indexed_are_not_counted_again() -> None:
    """A stored memory's line counted by the worker with this counter (``counted``) costs
    what was counted, and the section is counted from it: the tokenizer sees none of
    those lines. A count by another counter is not taken; the context is exact either way."""
    from tiermem.tokens import TiktokenCounter

    counter = TiktokenCounter()
    encode = counter._wait()
    encoded: list[str] = []
    counter._encode = lambda text: encoded.append(text) or encode(text)
    said = [
        f"Ana: the deadline for module {n} is the {n + 3}th of March, not later" for n in range(6)
    ]
    counted = [cand(t, timestamp=DAY, counted=(counter.name, len(encode(t + "\n")))) for t in said]
    other = cand("Bo: I prefer PostgreSQL for this", timestamp=DAY, counted=("approx", 1))
    ctx = QueryPlanner(PlannerConfig(), counter=counter).plan(
        "deadline for the module", max_tokens=400, candidates=[*counted, other]
    )
    assert {i.content for i in ctx.items} == {*said, other.content}
    assert not {t + "\n" for t in said} & set(encoded)
    assert other.content + "\n" in encoded
    total = sum(len(encode(m["content"])) + 3 for m in ctx.messages) + 3
    assert ctx.total_tokens == total
