"""LoCoMo evidence recall within a token budget: tiermem's get_context beside baselines.

For each conversation (one user each): import every turn with ``Memory.add_messages``
(speaker kept as the message name, each session's date as the timestamps), then for every
question of categories 1-4 build a context and check which evidence turns' text it holds.

In the same run, with the same budget and the same rendering, three baselines:
buffer-only (the most recent turns), BM25-only and dense-only (MiniLM) retrieval, and
tiermem with its relevance floor off ("tiermem, no floor"), with its absolute check alone
("tiermem, absolute only": drop-off 0) and at each ``--floors`` drop-off (the least
relevance relative to the query's best memory), which shows what the floor saves in
tokens and what it costs in recall.
Tokens are counted with o200k_base over the whole rendered context.

Last, how well ``Memory.search``'s score separates, over all questions pooled, each
question's evidence turns from the user's other turns (ROC AUC, goal >= 0.85: one
search per question scores every turn), and what the ``min_score`` the docs recommend
keeps and leaves out. ``--auc-only`` ingests and measures that alone (minutes, not the
whole run).

With ``--embedders local/all-MiniLM-L6-v2 torch/all-MiniLM-L6-v2`` tiermem runs once per
embedder (the default ONNX one against sentence-transformers on PyTorch) and the recall of
each is printed side by side; the baselines run with the first.

Usage:
    python benchmarks/locomo.py ../shared/data/locomo [--budgets 500 1000 2000] [--quick]
        [--floors 0.25 0.35]
        [--embedders local/all-MiniLM-L6-v2 torch/all-MiniLM-L6-v2] [--auc-only]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from _common import locomo_folder, nearest_rank, reproduce_command, write_json

RESULTS = Path(__file__).parent / "results"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int
    timestamp: datetime


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[dict[str, Any]]
    by_id: dict[str, Turn] = field(default_factory=dict)


def parse_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware datetime (UTC)."""
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"unknown LoCoMo date {text!r}")


def load(path: Path) -> Conversation:
    data = json.loads(path.read_text())
    turns: list[Turn] = []
    n = 1
    while f"session_{n}" in data:
        when = parse_date(data[f"session_{n}_date_time"])
        for raw in data[f"session_{n}"]:
            turns.append(Turn(raw["dia_id"], raw["speaker"], raw["text"], n, when))
        n += 1
    questions = [q for q in data["qa"] if q.get("category") in (1, 2, 3, 4)]
    conversation = Conversation(path.stem, turns, questions)
    conversation.by_id = {t.dia_id: t for t in turns}
    return conversation


def evidence_turns(conversation: Conversation, question: dict[str, Any]) -> list[Turn]:
    ids = re.findall(r"D\d+:\d+", " ".join(question.get("evidence", [])))
    return [conversation.by_id[i] for i in dict.fromkeys(ids) if i in conversation.by_id]


def answerable(
    conversation: Conversation, questions: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], list[Turn]]]:
    """``questions`` paired with their evidence turns; those without any are left out."""
    asked = [(q, evidence_turns(conversation, q)) for q in questions]
    return [(q, wanted) for q, wanted in asked if wanted]


def line(turn: Turn) -> str:
    return f"{turn.speaker}: {turn.text}"


def ingest_turns(
    memory: Any, conversation: Conversation, user_id: str | None = None, prefix: str = ""
) -> None:
    """Add every turn to a tiermem ``Memory``, one ``add_messages`` call per session.

    The conversation is one user (``user_id``, by default its name); the speaker is kept
    as the message name, the session's date as its timestamp and the turn's dia_id in its
    metadata; sessions are ``{prefix}session_N``."""
    for session in sorted({t.session for t in conversation.turns}):
        memory.add_messages(
            [
                {
                    "role": "user",
                    "content": t.text,
                    "name": t.speaker,
                    "timestamp": t.timestamp,
                    "metadata": {"dia_id": t.dia_id},
                }
                for t in conversation.turns
                if t.session == session
            ],
            user_id=user_id or conversation.name,
            session_id=f"{prefix}session_{session}",
        )


# -- the history axis -----------------------------------------------------------------------


def history_groups(
    conversations: list[Conversation], times: int
) -> list[tuple[list[Conversation], list[Conversation]]]:
    """(stored, asked) pairs: ``times`` conversations lived by one user, and those of them
    whose questions are asked there, so each conversation is asked exactly once.

    Groups are taken in turn, wrapping around (five at x3: 1-2-3 asked 1-2-3, 4-5-1 asked
    4-5)."""
    n = len(conversations)
    return [
        (
            [conversations[(start + i) % n] for i in range(times)],
            conversations[start : start + times],
        )
        for start in range(0, n, times)
    ]


def ingest_history(memory: Any, conversations: list[Conversation], levels: list[int]) -> None:
    """Store, for each history size above x1, the groups of :func:`history_groups` as
    users ``x{size}-{group}`` (each conversation in its own sessions, with its own dates and
    speakers, as if the same user had lived them all); x1 is each conversation's own user."""
    for times in levels:
        if times == 1:
            continue
        for g, (stored, _) in enumerate(history_groups(conversations, times)):
            for conv in stored:
                ingest_turns(memory, conv, user_id=f"x{times}-{g}", prefix=f"{conv.name}-")
    memory.flush()


def history_axis(
    memory: Any,
    conversations: list[Conversation],
    levels: list[int],
    budgets: list[int],
    quick: bool,
) -> dict[str, Any]:
    """Recall and latency of ``get_context`` at each history size, interleaved.

    For every question, at every size in turn (the order rotating from one question to the
    next): one embedding of the question, then ``get_context`` at the first budget, both
    timed with the embedder's cache emptied (so each embeds the question), then the other
    budgets (recall only). The ratio of the two is the cost of gathering and planning over
    the embedding the call cannot avoid."""
    embedder = memory._tiers.embedder
    asked_by: dict[int, dict[str, tuple[str, str]]] = {}
    for times in levels:
        asked_by[times] = {}
        for g, (_, asked) in enumerate(history_groups(conversations, times)):
            for conv in asked:
                user = conv.name if times == 1 else f"x{times}-{g}"
                prefix = "" if times == 1 else f"{conv.name}-"
                asked_by[times][conv.name] = (user, f"{prefix}session_{conv.turns[-1].session}")
    recall_at: dict[int, dict[int, list[float]]] = {t: {b: [] for b in budgets} for t in levels}
    categories: dict[int, dict[int, list[float]]] = {t: {} for t in levels}
    embed_ms: list[float] = []
    context_ms: dict[int, list[float]] = {t: [] for t in levels}
    turn = 0
    for conv in conversations:
        questions = conv.questions[:20] if quick else conv.questions
        for q, wanted in answerable(conv, questions):
            turn += 1
            order = levels[turn % len(levels) :] + levels[: turn % len(levels)]
            for times in order:
                user, session = asked_by[times][conv.name]
                embedder.cache.clear()
                t0 = time.perf_counter()
                embedder.embed([q["question"]])
                embed_ms.append(1000 * (time.perf_counter() - t0))
                embedder.cache.clear()
                for budget in budgets:
                    t0 = time.perf_counter()
                    context = memory.get_context(q["question"], user, session, max_tokens=budget)
                    if budget == budgets[0]:
                        context_ms[times].append(1000 * (time.perf_counter() - t0))
                    got = recall(context.text(), wanted)
                    recall_at[times][budget].append(got)
                    if budget == budgets[-1]:
                        categories[times].setdefault(q["category"], []).append(got)
    p = {t: percentiles(v) for t, v in context_ms.items()}
    embedding = percentiles(embed_ms)
    return {
        "levels": levels,
        "recall": {t: {b: statistics.mean(v) for b, v in r.items()} for t, r in recall_at.items()},
        "category_recall": {
            t: {CATEGORIES[c]: statistics.mean(v) for c, v in sorted(r.items())}
            for t, r in categories.items()
        },
        "latency_ms": p,
        "embed_ms": embedding,
        "ratio_to_embedding": {
            t: {k: v[k] / embedding[k] for k in ("p50", "p95")} for t, v in p.items()
        },
        "messages": {
            t: max(
                sum(len(c.turns) for c in stored) for stored, _ in history_groups(conversations, t)
            )
            for t in levels
        },
    }


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": nearest_rank(ordered, 0.5), "p95": nearest_rank(ordered, 0.95)}


# -- baselines ------------------------------------------------------------------------------


class BM25:
    """Okapi BM25 (k1=1.5, b=0.75) over the turns of one conversation."""

    def __init__(self, docs: list[str]) -> None:
        self.docs = [re.findall(r"\w+", d.lower()) for d in docs]
        self.df = Counter(w for d in self.docs for w in set(d))
        self.avg = sum(map(len, self.docs)) / max(len(self.docs), 1)
        self.n = len(self.docs)

    def scores(self, query: str) -> np.ndarray:
        terms = re.findall(r"\w+", query.lower())
        out = np.zeros(self.n)
        for i, doc in enumerate(self.docs):
            tf = Counter(doc)
            for t in terms:
                if t in tf:
                    idf = math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    f = tf[t]
                    out[i] += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * len(doc) / self.avg))
        return out


def fit_turns(turns: list[Turn], budget: int, counter: Any) -> tuple[str, int]:
    """Render ranked turns like tiermem does (date groups, time order) within ``budget``.

    Returns the rendered text and the tokens it takes."""
    from tiermem.messages import Message
    from tiermem.planner.planner import Candidate, QueryPlanner
    from tiermem.planner.settings import PlannerConfig

    planner = QueryPlanner(counter=counter)
    candidates = [
        Candidate(line(t), "baseline", timestamp=t.timestamp, key=t.dia_id, relevance=1.0 - i / 300)
        for i, t in enumerate(turns[:300])
    ]
    planner.settings = PlannerConfig(weights={"recency": 0.0, "importance": 0.0})
    messages = planner._retrieved("", candidates, budget - 3).messages
    tokens = sum(counter.count_message(Message.from_openai(m)) for m in messages)
    assert tokens <= budget
    return "\n".join(m["content"] for m in messages), tokens


# -- the search score's separation ------------------------------------------------------------

AUC_GOAL = 0.85
THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
MESSAGES = {"memory_type": "message"}


def roc_auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """The ROC AUC of scores ``positive`` against ``negative``: the chance that a random
    positive scores above a random negative (ties count a half; Mann-Whitney U)."""
    values = np.concatenate([positive, negative])
    order = np.argsort(values, kind="mergesort")
    _, inverse, counts = np.unique(values[order], return_inverse=True, return_counts=True)
    average = np.cumsum(counts) - (counts - 1) / 2  # each tie group's mean 1-based rank
    ranks = np.empty(len(values))
    ranks[order] = average[inverse]
    n, m = len(positive), len(negative)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * m))


def score_separation(memory: Any, conversations: list[Conversation], quick: bool) -> dict[str, Any]:
    """``Memory.search``'s score of every turn of the user for every question (one search
    with ``k`` the user's turn count scores them all), pooled over all questions: the
    ROC AUC of the evidence turns against the others, and what each ``min_score`` keeps
    of the evidence turns and leaves out of the others. It counts accesses: run it after
    the contexts."""
    from tiermem.stores.relevance import RECOMMENDED_MIN_SCORE

    evidence: list[float] = []
    other: list[float] = []
    per_question: list[tuple[np.ndarray, np.ndarray]] = []
    for conv in conversations:
        questions = conv.questions[:20] if quick else conv.questions
        turns = memory.stats(conv.name).by_type.get("message", 0)
        for q, wanted in answerable(conv, questions):
            hits = memory.search(q["question"], conv.name, k=turns, filters=MESSAGES)
            by_id = {h.record.metadata.get("dia_id"): h.score for h in hits}
            by_line = {h.record.content: h.score for h in hits}  # a repeated line: one memory
            score = {t.dia_id: by_id.get(t.dia_id, by_line.get(line(t), 0.0)) for t in conv.turns}
            ids = {t.dia_id for t in wanted}
            right = np.array([score[i] for i in ids])
            rest = np.array([s for i, s in score.items() if i not in ids])
            evidence += right.tolist()
            other += rest.tolist()
            per_question.append((right, rest))
    pos, neg = np.array(evidence), np.array(other)
    thresholds = sorted({*THRESHOLDS, RECOMMENDED_MIN_SCORE})
    return {
        "auc": roc_auc(pos, neg),
        "goal": AUC_GOAL,
        "questions": len(per_question),
        "evidence_turns": len(pos),
        "other_turns": len(neg),
        "recommended": RECOMMENDED_MIN_SCORE,
        "thresholds": {
            t: {
                "evidence_kept": float((pos >= t).mean()),
                "others_left_out": float((neg < t).mean()),
                "questions_with_evidence": float(
                    statistics.mean(bool((r >= t).any()) for r, _ in per_question)
                ),
                "median_kept": float(
                    statistics.median(int((r >= t).sum() + (o >= t).sum()) for r, o in per_question)
                ),
            }
            for t in thresholds
        },
    }


def report_scores(scores: dict[str, Any]) -> None:
    """The score's separation and the recommended ``min_score`` (with the others)."""
    from _common import rich_table

    auc, goal = scores["auc"], scores["goal"]
    table = rich_table(
        f"Memory.search scores, {scores['questions']} questions pooled "
        f"({scores['evidence_turns']} evidence turns, {scores['other_turns']} other turns): "
        f"ROC AUC {auc:.3f} (goal >= {goal:g}: {'met' if auc >= goal else 'missed'})",
        ["min_score", "evidence kept", "others left out", "questions kept", "median kept"],
    )
    for t, row in scores["thresholds"].items():
        mark = " *" if float(t) == scores["recommended"] else ""
        table.add_row(
            f"{float(t):g}{mark}",
            f"{row['evidence_kept']:.1%}",
            f"{row['others_left_out']:.1%}",
            f"{row['questions_with_evidence']:.1%}",
            f"{row['median_kept']:.0f}",
        )
    table.caption = "* the min_score the docs recommend"
    from rich.console import Console

    Console().print(table)
    best = scores["thresholds"][
        next(t for t in scores["thresholds"] if float(t) == scores["recommended"])
    ]
    print(
        f"search score ROC AUC {auc:.3f} (goal >= {goal:g}); min_score "
        f"{scores['recommended']:g} keeps {best['evidence_kept']:.1%} of the evidence turns "
        f"and leaves out {best['others_left_out']:.1%} of the other turns"
    )


# -- the run --------------------------------------------------------------------------------


def recall(text: str, turns: list[Turn]) -> float:
    return sum(t.text in text for t in turns) / len(turns)


def run(
    data_dir: Path,
    budgets: list[int],
    quick: bool,
    floors: list[float],
    model: str = "local/all-MiniLM-L6-v2",
    baselines: bool = True,
    history: tuple[int, ...] = (1,),
    scores_only: bool = False,
) -> dict[str, Any]:
    from tiermem import Memory
    from tiermem.embeddings import get_embedder
    from tiermem.tokens import get_token_counter

    counter = get_token_counter("gpt-4o", exact=True)
    embedder = get_embedder(model)
    files = sorted(data_dir.glob("*.json"))
    if quick:
        files = files[:1]
    conversations = [load(f) for f in files]
    tmp = Path(tempfile.mkdtemp(prefix="tiermem-locomo-"))
    scores: dict[str, dict[int, list[float]]] = {}
    at_k: dict[int, list[float]] = {5: [], 10: []}
    per_conversation: dict[str, list[float]] = {}
    tokens: dict[int, list[int]] = {b: [] for b in budgets}
    variant_tokens: dict[str, dict[int, list[int]]] = {}
    latency: list[float] = []
    ingest = 0.0
    axis: dict[str, Any] = {}
    memory = Memory(str(tmp / "locomo.db"), embedder=embedder)
    embedder.embed(["warm up"])
    default = memory.planner.settings
    no_floor = default.floor.model_copy(update={"enabled": False})
    variants = {"tiermem, no floor": default.model_copy(update={"floor": no_floor})}
    for name, value in [("absolute only", 0.0), *((f"drop-off {v:g}", v) for v in floors)]:
        floor = default.floor.model_copy(update={"enabled": True, "relevance": value})
        variants[f"tiermem, {name}"] = default.model_copy(update={"floor": floor})
    try:
        if scores_only:  # the score's separation alone: ingest, then one search a question
            start = time.perf_counter()
            for conv in conversations:
                ingest_turns(memory, conv)
            memory.flush()
            ingest = time.perf_counter() - start
            return {
                "embedder": model,
                "conversations": [c.name for c in conversations],
                "ingest_s": ingest,
                "scores": score_separation(memory, conversations, quick),
            }
        for conv in conversations:
            questions = conv.questions[:20] if quick else conv.questions
            start = time.perf_counter()
            ingest_turns(memory, conv)
            memory.flush()
            ingest += time.perf_counter() - start
            last_session = f"session_{conv.turns[-1].session}"
            asked = answerable(conv, questions)
            for q, wanted in asked:  # tiermem alone first, so the timings are its own
                for budget in budgets:
                    t0 = time.perf_counter()
                    context = memory.get_context(
                        q["question"], conv.name, last_session, max_tokens=budget
                    )
                    if budget == budgets[0]:  # the first call embeds the question: time it
                        latency.append(time.perf_counter() - t0)
                    assert context.total_tokens <= budget, (context.total_tokens, budget)
                    tokens[budget].append(context.total_tokens)
                    scores.setdefault("tiermem", {}).setdefault(budget, []).append(
                        recall(context.text(), wanted)
                    )
                    if budget == max(budgets):
                        per_conversation.setdefault(conv.name, []).append(
                            scores["tiermem"][budget][-1]
                        )
                        ranked = sorted(
                            (i for i in context.items if i.section == "retrieved"),
                            key=lambda i: -i.score,
                        )
                        for k in at_k:
                            top = "\n".join(i.content for i in ranked[:k])
                            at_k[k].append(recall(top, wanted))
            for name, settings in variants.items():  # the same questions, another floor
                memory.planner.settings = settings
                for q, wanted in asked:
                    for budget in budgets:
                        context = memory.get_context(
                            q["question"], conv.name, last_session, max_tokens=budget
                        )
                        variant_tokens.setdefault(name, {}).setdefault(budget, []).append(
                            context.total_tokens
                        )
                        scores.setdefault(name, {}).setdefault(budget, []).append(
                            recall(context.text(), wanted)
                        )
                memory.planner.settings = default
            if not baselines:
                continue
            docs = [line(t) for t in conv.turns]
            bm25 = BM25(docs)
            dense = embedder.embed(docs)
            for q, wanted in asked:
                qv = embedder.embed([q["question"]])[0]
                orders = {
                    "buffer-only": list(reversed(conv.turns)),
                    "bm25-only": [conv.turns[i] for i in np.argsort(-bm25.scores(q["question"]))],
                    "dense-only": [conv.turns[i] for i in np.argsort(-(dense @ qv))],
                }
                for budget in budgets:
                    for name, ranked_turns in orders.items():
                        text, _ = fit_turns(ranked_turns, budget, counter)
                        scores.setdefault(name, {}).setdefault(budget, []).append(
                            recall(text, wanted)
                        )
        levels = [t for t in history if t <= len(conversations)]
        if baselines and levels:  # after x1's questions: its users' timings are their own
            ingest_history(memory, conversations, levels)
            axis = history_axis(memory, conversations, levels, budgets, quick)
        separation = score_separation(memory, conversations, quick)  # last: counts accesses
    finally:
        memory.close()
        shutil.rmtree(tmp, ignore_errors=True)
    history_tokens = statistics.mean(
        counter.count("\n".join(line(t) for t in c.turns)) for c in conversations
    )
    lat = sorted(latency)
    return {
        "embedder": model,
        "conversations": [c.name for c in conversations],
        "questions": len(scores["tiermem"][budgets[0]]),
        "budgets": budgets,
        "recall": {n: {b: statistics.mean(v) for b, v in per.items()} for n, per in scores.items()},
        "recall_at_k": {k: statistics.mean(v) for k, v in at_k.items() if v},
        "per_conversation": {n: statistics.mean(v) for n, v in per_conversation.items()},
        "mean_tokens": {b: statistics.mean(v) for b, v in tokens.items()},
        "floor": default.floor.model_dump(),
        "variant_tokens": {
            n: {b: statistics.mean(v) for b, v in per.items()} for n, per in variant_tokens.items()
        },
        "latency_ms": {
            "p50": 1000 * lat[len(lat) // 2],
            "p95": 1000 * lat[int(len(lat) * 0.95) - 1],
        },
        "ingest_s": ingest,
        "history_tokens": history_tokens,
        "history": axis,
        "scores": separation,
    }


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(
        title=f"LoCoMo evidence recall ({result['questions']} questions, "
        f"{len(result['conversations'])} conversations)"
    )
    table.add_column("method")
    for b in result["budgets"]:
        table.add_column(f"{b} tokens", justify="right")
    for name, per in result["recall"].items():
        table.add_row(name, *(f"{per[b]:.3f}" for b in result["budgets"]))
    console.print(table)
    console.print(
        f"recall@5 {result['recall_at_k'].get(5, 0):.3f}  recall@10 {result['recall_at_k'].get(10, 0):.3f}  "
        f"mean tokens {', '.join(f'{b}: {v:.0f}' for b, v in result['mean_tokens'].items())}"
    )
    floor = result["floor"]
    off = result["variant_tokens"].get("tiermem, no floor", {})
    floor_table = Table(
        title=f"Relevance floor (default: similarity {floor['similarity']:g}, keywords "
        f"{floor['keywords']:g}, neighbours {floor['neighbours']}, drop-off "
        f"{floor['relevance']:g}): mean tokens / recall"
    )
    floor_table.add_column("tiermem")
    for b in result["budgets"]:
        floor_table.add_column(f"{b} tokens", justify="right")
    rows = {"default floor": (result["mean_tokens"], result["recall"]["tiermem"])}
    rows |= {n: (t, result["recall"][n]) for n, t in result["variant_tokens"].items()}
    off_recall = result["recall"].get("tiermem, no floor", {})
    for name, (tokens, recalls) in rows.items():
        cells = []
        for b in result["budgets"]:
            cell = f"{tokens[b]:.0f} / {recalls[b]:.3f}"
            if off and name != "tiermem, no floor":  # against no floor: tokens saved, recall
                cell = (
                    f"{tokens[b]:.0f} ({1 - tokens[b] / off[b]:.1%} fewer) / "
                    f"{recalls[b]:.3f} ({recalls[b] - off_recall[b]:+.4f})"
                )
            cells.append(cell)
        floor_table.add_row(name, *cells)
    console.print(floor_table)
    spread = ", ".join(f"{n}: {v:.3f}" for n, v in result["per_conversation"].items())
    console.print(f"tiermem at {max(result['budgets'])} tokens per conversation: {spread}")
    console.print(
        f"get_context latency (query embedding included) p50 {result['latency_ms']['p50']:.1f} ms, "
        f"p95 {result['latency_ms']['p95']:.1f} ms; "
        f"ingest {result['ingest_s']:.1f} s; full history about {result['history_tokens']:.0f} tokens"
    )
    if result.get("history"):
        report_history(result["history"], result["budgets"])
    report_scores(result["scores"])
    for model, other in result.get("compared", {}).items():
        gaps = ", ".join(
            f"{b}: {other['recall'][b]:.3f} ({other['recall'][b] - result['recall']['tiermem'][b]:+.3f})"
            for b in result["budgets"]
        )
        console.print(
            f"tiermem with {model} (vs {result['embedder']}): recall {gaps}; "
            f"get_context p50 {other['latency_ms']['p50']:.1f} ms; ingest {other['ingest_s']:.1f} s"
        )
    print(f"reproduce: {command}")


def report_history(axis: dict[str, Any], budgets: list[int]) -> None:
    """The history-size table and the goals: x_max within 0.01 of x1 in recall and
    within 1.2x in latency; get_context within 2x (p50) and 3x (p95) one embedding."""
    from _common import rich_table

    categories = list(next(iter(axis["category_recall"].values())))
    table = rich_table(
        "History size: each conversation's questions asked of a user who also lived others "
        f"(get_context timed interleaved with one embedding of the question, "
        f"p50 {axis['embed_ms']['p50']:.1f} ms, p95 {axis['embed_ms']['p95']:.1f} ms)",
        [
            "history",
            "messages",
            *(f"{b} tokens" for b in budgets),
            *(f"{c} @{budgets[-1]}" for c in categories),
            "p50 ms",
            "p95 ms",
            "p50 / embed",
            "p95 / embed",
        ],
    )
    for t in axis["levels"]:
        lat, ratio = axis["latency_ms"][t], axis["ratio_to_embedding"][t]
        table.add_row(
            f"x{t}",
            str(axis["messages"][t]),
            *(f"{axis['recall'][t][b]:.3f}" for b in budgets),
            *(f"{axis['category_recall'][t][c]:.3f}" for c in categories),
            f"{lat['p50']:.1f}",
            f"{lat['p95']:.1f}",
            f"{ratio['p50']:.2f}x",
            f"{ratio['p95']:.2f}x",
        )
    from rich.console import Console

    Console().print(table)
    first, last = axis["levels"][0], axis["levels"][-1]
    r = {t: axis["recall"][t] for t in (first, last)}
    lat = axis["latency_ms"]
    gap = r[last][budgets[-1]] - r[first][budgets[-1]]
    slower = lat[last]["p50"] / lat[first]["p50"]
    print(
        f"x{last} vs x{first}: recall at {budgets[-1]} {gap:+.3f} (goal within 0.01: "
        f"{'met' if abs(gap) <= 0.01 else 'missed'}), get_context p50 {slower:.2f}x "
        f"(goal <= 1.2x: {'met' if slower <= 1.2 else 'missed'}); get_context / one "
        f"embedding at x{first}: p50 {axis['ratio_to_embedding'][first]['p50']:.2f}x "
        f"(goal <= 2x), p95 {axis['ratio_to_embedding'][first]['p95']:.2f}x (goal <= 3x)"
    )


def compare(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run's result, with tiermem's figures of the other embedders beside it."""
    first = results[0]
    first["compared"] = {
        r["embedder"]: {
            "recall": r["recall"]["tiermem"],
            "latency_ms": r["latency_ms"],
            "ingest_s": r["ingest_s"],
        }
        for r in results[1:]
    }
    return first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=locomo_folder)
    parser.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--quick", action="store_true", help="one conversation, 20 questions")
    parser.add_argument(
        "--floors",
        type=float,
        nargs="*",
        default=[0.25, 0.35],
        help="drop-offs (floor.relevance) to compare with the default and with none",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "locomo.json")
    parser.add_argument(
        "--embedders",
        nargs="+",
        default=["local/all-MiniLM-L6-v2"],
        help="run tiermem with each (baselines with the first), e.g. torch/all-MiniLM-L6-v2",
    )
    parser.add_argument(
        "--history",
        type=int,
        nargs="*",
        default=[1, 3, 5],
        help="history sizes: each conversation asked of a user who also lived this many "
        "conversations in all (capped at the number of conversations; none: skip the axis)",
    )
    parser.add_argument(
        "--auc-only",
        action="store_true",
        help="only the search score's separation (ROC AUC) and the min_score table: "
        "ingest and one search per question (about 2 minutes for five conversations)",
    )
    args = parser.parse_args(argv)
    budgets = sorted(args.budgets)
    if args.auc_only:
        result = run(args.data_dir, budgets, args.quick, [], args.embedders[0], scores_only=True)
        write_json(args.out, json.loads(json.dumps(result, default=str)))
        report_scores(result["scores"])
        print(f"reproduce: {reproduce_command(__file__, argv)}")
        return 0
    result = compare(
        [
            run(
                args.data_dir,
                budgets,
                args.quick,
                args.floors,
                model,
                baselines=i == 0,
                history=tuple(sorted(set(args.history))),
            )
            for i, model in enumerate(args.embedders)
        ]
    )
    write_json(args.out, json.loads(json.dumps(result, default=str)))
    report(result, reproduce_command(__file__, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
