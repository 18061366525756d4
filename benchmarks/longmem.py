"""BEAM long histories: tiermem's get_context beside dense, passage and BM25 baselines.

BEAM's 100K conversations (Tavakoli et al., ICLR 2026; the folder is given, never
downloaded) are about 100K tokens of one user and an assistant each, many messages long
(pasted code, plans: 300 to 9,000 characters). Each conversation is one user: every
message is added in order with ``Memory.add_messages`` (one session per batch of the chat,
dated by the batch's time anchor, messages 5 s apart; the ``->-> N,N`` index marker
stripped) into the embedded default (a SQLite file, the local MiniLM), then
``Memory.flush`` waits for the worker; adds plus flush is the ingest time. A message
``add`` refuses (``ContentTooLargeError``: longer than the embedder takes) is counted and
printed, never cut. Every question with evidence (``source_chat_ids``, dicts of lists
flattened) is asked with ``get_context(question, user, <a new session>, max_tokens=B)``.

In the same run, with the same budgets, the same tokenizer (o200k_base) and the same
rendering (one system message, items in time order under date labels: locomo.py's
``fit_turns``), four baselines, each packing its best items in score order until the
budget is full: **dense messages** (cosine of the question to each whole message, embedded
as one text by the same embedder, which keeps its first 256 tokens: what mem0, LangGraph
and LlamaIndex do), **dense passages** (each message cut into passages of at most 400
characters along sentence boundaries; a longer sentence is cut at words), **BM25
passages** (Okapi BM25 as locomo.py's, over the same passages) and the **recent window**
(the history's last messages that fit).

What is measured, per system and budget (the context's text is its messages' contents):

- **touched**: the share of a question's evidence messages of which at least one sentence
  of 30 characters or more (``tiermem.text.sentences``) is verbatim in the context
  (whitespace normalised on both sides); **sentences**: the share of those sentences in it;
- **answers**: of the questions whose ``answer`` has at most 8 words, the share whose
  answer (lowercased, whitespace collapsed, surrounding punctuation and quotes stripped)
  is in the lowercased context as whole words;
- **knowledge_update**: the share where an ``updated_info`` message is touched, and where
  it is touched and its first matching sentence comes before that of every touched
  ``original_info`` message (one that is not also an ``updated_info`` one: two questions
  name the same message as both);
- the mean tokens of the context, and touched by ability (abstention has no evidence);
- ``get_context`` latency per budget, each call timed with the embedder's cache emptied
  (it embeds the question), interleaved with one embedding of the question (the cache
  emptied too: no hit), and their ratio.

Cross-validation: the planner's settings (``tiermem.planner.settings.PlannerConfig``) at each point
of a small grid (``--grid``, ``--grid-json``), applied to the live Memory
(``memory.planner.settings``; a setting the retriever reads, such as ``k``, reopens a Memory
on the same SQLite file with the new configuration). Leave-one-conversation-out: each
held-out conversation is answered with the point of best mean touched share (over all
budgets) on the others; that figure is printed beside the in-sample best and the default.

``--one-user`` also stores all conversations under one user (each conversation's
questions asked of it) and prints the same figures beside the per-user ones. ``--store
DIR`` keeps the SQLite stores (and the baselines' vectors) there and reuses them: a run
that changes only the planner skips the ingest. A change of indexing (how messages are
embedded, the embedder, the store's schema) needs a fresh DIR.

Usage:
    python benchmarks/longmem.py ../shared/data/beam [--budgets 2000 4000 8000]
        [--conversations 1 2 3] [--one-user] [--store DIR] [--quick]
        [--grid default floor-on ...] [--grid-json FILE]
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
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from _common import reproduce_command, rich_table, write_json
from locomo import BM25, Turn, fit_turns, line, percentiles

RESULTS = Path(__file__).parent / "results"
MODEL = "local/all-MiniLM-L6-v2"
MARKER = re.compile(r"\s*->->\s*\d+,\d+\s*$")
ABILITIES = (
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
SYSTEMS = ("tiermem", "dense messages", "dense passages", "BM25 passages", "recent window")
SENTENCE_CHARS = 30
PASSAGE_CHARS = 400
SHORT_ANSWER_WORDS = 8
APART, ONE_USER = "beam-", "beam-all"
GRID: dict[str, dict[str, Any]] = {
    "default": {},
    "floor-on": {"floor": {"enabled": True}},
    "assistant-1": {"weights": {"assistant": 1.0}},
    "assistant-0.3": {"weights": {"assistant": 0.3}},
    "no-standing": {"standing": 0},
    "standing-3": {"standing": 3},
    "standing-12": {"standing": 12},
    "pool-400": {"k": 400},
}
"""Named planner settings: overrides of ``memory.planner`` (nested dicts), default first."""
RETRIEVER_FIELDS = ("recent_messages", "k", "follow_up", "pending_vectors", "standing")
"""PlannerConfig fields the retriever reads when a Memory is built (a change reopens it)."""


@dataclass
class Said:
    """One message of a conversation, its marker stripped, and its sentences of 30
    characters or more (whitespace normalised) by which a context is judged."""

    id: int
    role: str
    text: str
    batch: int
    timestamp: datetime
    sentences: tuple[str, ...] = ()


@dataclass
class Question:
    conversation: str
    ability: str
    question: str
    evidence: tuple[int, ...]
    groups: dict[str, tuple[int, ...]]
    answer: str | None


@dataclass
class Conversation:
    name: str
    messages: list[Said]
    questions: list[Question]
    by_id: dict[int, Said] = field(default_factory=dict)


def normal(text: str) -> str:
    return " ".join(text.split())


def flat_ids(value: Any) -> list[int]:
    """The message ids of a ``source_chat_ids`` (a list, a dict of lists, nested)."""
    if isinstance(value, dict):
        return [i for v in value.values() for i in flat_ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in flat_ids(v)]
    return [value] if isinstance(value, int) else []


def anchor_date(text: str | None) -> datetime | None:
    """'March-15-2024' -> an aware datetime (UTC), or None."""
    if not text:
        return None
    for fmt in ("%B-%d-%Y", "%b-%d-%Y"):
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return None


def load(folder: Path) -> Conversation:
    from tiermem.text import sentences

    chat = json.loads((folder / "chat.json").read_text())
    messages: list[Said] = []
    day = datetime(2024, 1, 1, tzinfo=timezone.utc)
    for n, batch in enumerate(chat, 1):
        said = [m for turn in batch["turns"] for m in turn]
        first_user = next((m for m in said if m["role"] == "user"), {})
        when = anchor_date(first_user.get("time_anchor")) or anchor_date(batch.get("time_anchor"))
        day = when or day + timedelta(days=1)
        number = batch.get("batch_number", n)
        for i, m in enumerate(said):
            text = MARKER.sub("", m["content"])
            own = [normal(s) for s in sentences(text)]
            long = tuple(dict.fromkeys(s for s in own if len(s) >= SENTENCE_CHARS))
            messages.append(
                Said(
                    m["id"],
                    m["role"],
                    text,
                    number,
                    day + timedelta(seconds=5 * i),
                    long or (normal(text),),
                )
            )
    by_id = {m.id: m for m in messages}
    questions = []
    probing = json.loads((folder / "probing_questions.json").read_text())
    for ability, asked in probing.items():
        for q in asked:
            source = q.get("source_chat_ids")
            evidence = tuple(i for i in dict.fromkeys(flat_ids(source)) if i in by_id)
            if not evidence:
                continue
            groups = (
                {k: tuple(i for i in flat_ids(v) if i in by_id) for k, v in source.items()}
                if isinstance(source, dict)
                else {}
            )
            answer = q.get("answer")
            short = isinstance(answer, str) and 0 < len(answer.split()) <= SHORT_ANSWER_WORDS
            questions.append(
                Question(
                    folder.name, ability, q["question"], evidence, groups, answer if short else None
                )
            )
    return Conversation(folder.name, messages, questions, by_id)


def beam_folders(path: Path) -> list[Path]:
    """The conversation folders (each with chat.json and probing_questions.json) of a BEAM
    folder: its own subfolders, else those of its ``100K`` folder; numbered ones in order."""
    for base in (path, path / "100K"):
        found = [p.parent for p in base.glob("*/probing_questions.json")]
        found = [f for f in found if (f / "chat.json").exists()]
        if found:
            return sorted(
                found,
                key=lambda f: (
                    not f.name.isdigit(),
                    int(f.name) if f.name.isdigit() else 0,
                    f.name,
                ),
            )
    return []


def beam_folder(text: str) -> Path:
    """An argparse ``type``: a BEAM folder, or a usage error naming it."""
    path = Path(text)
    if not beam_folders(path):
        raise argparse.ArgumentTypeError(
            f"{path} holds no BEAM conversations (N/chat.json with N/probing_questions.json)"
        )
    return path


# -- judging a context ------------------------------------------------------------------------


@dataclass
class Judged:
    """What one context holds of one question's evidence."""

    touched: float
    sentences: float
    tokens: int
    answer: float | None = None
    updated: float | None = None
    updated_first: float | None = None


def answer_key(answer: str) -> str:
    return normal(answer.lower()).strip(" .,;:!?\"'`()[]")


def judge(text: str, tokens: int, question: Question, conv: Conversation) -> Judged:
    """Judge the context ``text`` (of ``tokens``) against ``question``'s evidence."""
    flat = normal(text)
    first: dict[int, int | None] = {}
    wanted = found = 0
    for i in question.evidence:
        positions = [p for p in (flat.find(s) for s in conv.by_id[i].sentences) if p >= 0]
        wanted += len(conv.by_id[i].sentences)
        found += len(positions)
        first[i] = min(positions) if positions else None
    touched = sum(p is not None for p in first.values()) / len(first)
    result = Judged(touched, found / wanted, tokens)
    if question.answer is not None:
        key = re.escape(answer_key(question.answer))
        result.answer = float(bool(re.search(rf"(?<!\w){key}(?!\w)", flat.lower())))
    if question.ability == "knowledge_update" and question.groups.get("updated_info"):
        renewed = question.groups["updated_info"]
        updated = [first[i] for i in renewed if first[i] is not None]
        # two of BEAM's questions name one message as both: it is not before itself
        original = [
            first[i]
            for i in question.groups.get("original_info", ())
            if i in first and i not in renewed
        ]
        touched_original = [p for p in original if p is not None]
        result.updated = float(bool(updated))
        result.updated_first = float(
            bool(updated) and all(min(updated) < p for p in touched_original)
        )
    return result


def context_text(context: Any) -> str:
    return "\n".join(str(m.get("content") or "") for m in context.messages)


# -- ingest and the stores ----------------------------------------------------------------------


@dataclass
class Ingest:
    seconds: float
    messages: int
    refused: list[dict[str, Any]]
    reused: bool = False


def entry(m: Said) -> dict[str, Any]:
    return {"role": m.role, "content": m.text, "timestamp": m.timestamp, "metadata": {"id": m.id}}


def ingest(memory: Any, conv: Conversation, user: str, prefix: str) -> Ingest:
    """Add every message of ``conv`` to ``user``, one ``add_messages`` per batch (its
    session); a batch holding a message ``add`` refuses is added one message at a time,
    the refused ones counted. Adds and the worker's flush are timed."""
    from tiermem.errors import ContentTooLargeError

    refused: list[dict[str, Any]] = []
    start = time.perf_counter()
    for batch in dict.fromkeys(m.batch for m in conv.messages):
        said = [m for m in conv.messages if m.batch == batch]
        session = f"{prefix}batch-{batch}"
        try:
            memory.add_messages([entry(m) for m in said], user_id=user, session_id=session)
        except ContentTooLargeError:
            for m in said:
                try:
                    memory.add(user_id=user, session_id=session, **entry(m))
                except ContentTooLargeError as exc:
                    refused.append({"id": m.id, "chars": len(m.text), "error": str(exc)})
    if not memory.flush():
        print(f"conversation {conv.name}: the worker's flush did not finish", file=sys.stderr)
    return Ingest(time.perf_counter() - start, len(conv.messages) - len(refused), refused)


class Stores:
    """Where the SQLite stores live: ``--store DIR`` (kept, with a manifest of what each
    holds, and the baselines' vectors), else a temporary folder removed at the end."""

    def __init__(self, folder: Path | None) -> None:
        self.keep = folder is not None
        self.dir = folder or Path(tempfile.mkdtemp(prefix="tiermem-longmem-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.dir / "manifest.json"
        self.manifest: dict[str, Any] = (
            json.loads(self.manifest_path.read_text()) if self.manifest_path.exists() else {}
        )

    def done(self, db: str, conv: str) -> Ingest | None:
        info = self.manifest.get(db, {}).get(conv)
        return None if info is None else Ingest(**{**info, "reused": True})

    def record(self, db: str, conv: str, info: Ingest) -> None:
        self.manifest.setdefault(db, {})[conv] = {
            "seconds": info.seconds,
            "messages": info.messages,
            "refused": info.refused,
        }
        self.manifest_path.write_text(json.dumps(self.manifest, indent=2))

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Opened:
    """A Memory on one SQLite file and how to reopen it with other planner settings."""

    path: Path
    embedder: Any
    counter: Any
    memory: Any = None

    def open(self, settings: Any = None) -> Any:
        from tiermem import Memory

        config = None if settings is None else {"memory": {"planner": settings.model_dump()}}
        self.memory = Memory(
            str(self.path), config=config, embedder=self.embedder, token_counter=self.counter
        )
        return self.memory

    def apply(self, settings: Any) -> Any:
        """The Memory with planner ``settings``: set on the live planner, or (a field the
        retriever reads changed) a Memory reopened on the same file with them."""
        built = self.memory.config.memory.planner
        if any(getattr(built, f) != getattr(settings, f) for f in RETRIEVER_FIELDS):
            self.memory.close()
            self.open(settings)
        self.memory.planner.settings = settings
        return self.memory


def build(
    stores: Stores,
    db: str,
    conversations: list[Conversation],
    one_user: bool,
    embedder: Any,
    counter: Any,
) -> tuple[Opened, dict[str, Ingest]]:
    """Open (and fill what is missing of) the store ``db``; each conversation's ingest."""
    opened = Opened(stores.dir / f"{db}.db", embedder, counter)
    memory = opened.open()
    ingests: dict[str, Ingest] = {}
    for conv in conversations:
        user, prefix = user_of(conv, one_user)
        info = stores.done(db, conv.name)
        if info is None:
            # a run stopped in the middle of this conversation left part of it: drop it
            batches = {f"{prefix}batch-{m.batch}" for m in conv.messages}
            for session in memory.sessions(user):
                if session.session_id in batches:
                    memory.forget_session(user, session.session_id)
            info = ingest(memory, conv, user, prefix)
            stores.record(db, conv.name, info)
        ingests[conv.name] = info
        note = " (reused store: the time of its build)" if info.reused else ""
        print(
            f"{'one user' if one_user else 'per user'}: conversation {conv.name} ingested, "
            f"{info.messages} messages in {info.seconds:.1f} s, "
            f"{len(info.refused)} refused{note}",
            flush=True,
        )
        for r in info.refused:
            print(f"  refused message {r['id']} ({r['chars']} characters): {r['error']}")
    return opened, ingests


def ingest_ratio(conv: Conversation, rounds: int = 2) -> dict[str, Any]:
    """The ingest of ``conv`` into a new store with ``memory.passages`` off (each message
    one unit, as before passages) and on, in turn, ``rounds`` times each (a new embedder
    each time: nothing cached); the median seconds of each and their ratio."""
    from tiermem import Memory
    from tiermem.embeddings import get_embedder

    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        for mode in seconds:
            folder = Path(tempfile.mkdtemp(prefix="tiermem-ingest-"))
            config = {"memory": {"passages": {"enabled": mode == "on"}}}
            memory = Memory(str(folder / "m.db"), config=config, embedder=get_embedder(MODEL))
            try:
                seconds[mode].append(ingest(memory, conv, "ingest", "").seconds)
            finally:
                memory.close()
                shutil.rmtree(folder, ignore_errors=True)
    off, on = (statistics.median(seconds[m]) for m in ("off", "on"))
    print(
        f"ingest of conversation {conv.name}: passages off {off:.1f} s, on {on:.1f} s "
        f"(median of {rounds}, in turn): {on / off:.2f}x",
        flush=True,
    )
    return {"conversation": conv.name, "seconds": seconds, "ratio": on / off}


def user_of(conv: Conversation, one_user: bool) -> tuple[str, str]:
    """The user a conversation is stored under and its sessions' prefix."""
    return (ONE_USER, f"{conv.name}-") if one_user else (APART + conv.name, "")


# -- asking tiermem -----------------------------------------------------------------------------


class Progress:
    """A count on stderr, rewritten in place."""

    def __init__(self, label: str, total: int) -> None:
        self.label, self.total, self.done, self.shown = label, total, 0, 0

    def step(self, n: int = 1) -> None:
        self.done += n
        if self.done < self.total and self.done - self.shown < self.total / 50:
            return  # about fifty updates in all
        self.shown = self.done
        end = "\n" if self.done >= self.total else ""
        print(f"\r{self.label}: {self.done}/{self.total}", end=end, file=sys.stderr, flush=True)


Judgements = dict[int, list[Judged]]
"""Per budget, one Judged per question (in the run's question order)."""


def ask_tiermem(
    memory: Any,
    conversations: list[Conversation],
    budgets: list[int],
    one_user: bool,
    label: str,
    timed: bool = False,
) -> tuple[Judgements, dict[str, Any]]:
    """Every question at every budget; with ``timed``, each call timed with the
    embedder's cache emptied, interleaved with one embedding of the question."""
    embedder = memory.embedder
    judged: Judgements = {b: [] for b in budgets}
    context_ms: dict[int, list[float]] = {b: [] for b in budgets}
    embed_ms: list[float] = []
    progress = Progress(label, sum(len(c.questions) for c in conversations))
    if timed and conversations:  # the first call's one-time costs are not timed
        warm = user_of(conversations[0], one_user)[0]
        memory.get_context("warm up", warm, "warm-up", max_tokens=budgets[0])
    for conv in conversations:
        user, _ = user_of(conv, one_user)
        for n, q in enumerate(conv.questions):
            session = f"question-{conv.name}-{n}"
            for budget in budgets:
                if timed:
                    embedder.cache.clear()
                    t0 = time.perf_counter()
                    embedder.embed([q.question])
                    embed_ms.append(1000 * (time.perf_counter() - t0))
                    embedder.cache.clear()
                t0 = time.perf_counter()
                context = memory.get_context(q.question, user, session, max_tokens=budget)
                context_ms[budget].append(1000 * (time.perf_counter() - t0))
                assert context.total_tokens <= budget, (context.total_tokens, budget)
                judged[budget].append(judge(context_text(context), context.total_tokens, q, conv))
            progress.step()
    latency: dict[str, Any] = {}
    if timed:
        embedding = percentiles(embed_ms)
        per = {b: percentiles(v) for b, v in context_ms.items()}
        latency = {
            "get_context_ms": per,
            "embed_ms": embedding,
            "ratio": {b: {k: v[k] / embedding[k] for k in ("p50", "p95")} for b, v in per.items()},
        }
    return judged, latency


# -- baselines ------------------------------------------------------------------------------------


class FastBM25(BM25):
    """locomo.py's BM25 (the same scores), its term counts made once and each query
    scored over the passages holding its terms only (20,000 passages, 179 questions)."""

    def __init__(self, docs: list[str]) -> None:
        super().__init__(docs)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, doc in enumerate(self.docs):
            for term, f in Counter(doc).items():
                self.postings.setdefault(term, []).append((i, f))
        self.lengths = np.array([len(d) for d in self.docs], dtype=float)

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n)
        for t in re.findall(r"\w+", query.lower()):
            if t not in self.postings:
                continue
            idf = math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
            for i, f in self.postings[t]:
                out[i] += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * self.lengths[i] / self.avg))
        return out


def passages(text: str, limit: int = PASSAGE_CHARS) -> list[str]:
    """``text`` cut into passages of at most ``limit`` characters along sentence boundaries
    (spans of the original text); a sentence longer than ``limit`` is cut at words."""
    from tiermem.text import sentences

    spans: list[tuple[int, int]] = []
    at = 0
    for s in sentences(text):
        start = text.find(s, at)
        if start < 0:
            continue
        at = start + len(s)
        while at - start > limit:  # a long sentence: pieces ending at a space
            cut = text.rfind(" ", start + 1, start + limit + 1)
            cut = cut if cut > start else start + limit
            spans.append((start, cut))
            start = cut + (text[cut] == " ")
        spans.append((start, at))
    out: list[str] = []
    first, last = None, 0
    for start, end in spans:
        if first is not None and end - first > limit:
            out.append(text[first:last])
            first = None
        if first is None:
            first = start
        last = end
    if first is not None:
        out.append(text[first:last])
    return [p for p in out if p.strip()]


@dataclass
class Pool:
    """A history's messages and passages (locomo Turns: the role as speaker) and their
    vectors."""

    messages: list[Turn]
    message_vectors: np.ndarray
    passages: list[Turn]
    passage_vectors: np.ndarray


def embed_all(embedder: Any, texts: list[str], label: str, batch: int = 256) -> np.ndarray:
    """``texts`` embedded in batches, a count on stderr; a text over the embedder's
    ``max_chars`` is cut there (the model reads only its first 256 tokens anyway)."""
    limit = getattr(embedder, "max_chars", 200_000)
    progress = Progress(label, len(texts))
    rows = []
    for start in range(0, len(texts), batch):
        chunk = [t[:limit] for t in texts[start : start + batch]]
        rows.append(np.asarray(embedder.embed(chunk), dtype=np.float32))
        progress.step(len(chunk))
    return np.concatenate(rows) if rows else np.zeros((0, embedder.dimension), np.float32)


def pool_of(conv: Conversation, embedder: Any, stores: Stores) -> Pool:
    """The baselines' pool of one conversation (vectors kept in a ``--store`` folder)."""

    turns = [
        Turn(f"{conv.name}:{m.id}", m.role, m.text, m.batch, m.timestamp) for m in conv.messages
    ]
    cut = [
        Turn(f"{conv.name}:{m.id}:{k}", m.role, p, m.batch, m.timestamp)
        for m in conv.messages
        for k, p in enumerate(passages(m.text))
    ]
    cache = stores.dir / f"vectors-{conv.name}.npz"
    if stores.keep and cache.exists():
        saved = np.load(cache)
        if saved["messages"].shape[0] == len(turns) and saved["passages"].shape[0] == len(cut):
            return Pool(turns, saved["messages"], cut, saved["passages"])
    vectors = embed_all(embedder, [line(t) for t in turns], f"embedding {conv.name}'s messages")
    pieces = embed_all(embedder, [line(t) for t in cut], f"embedding {conv.name}'s passages")
    if stores.keep:
        np.savez(cache, messages=vectors, passages=pieces)
    return Pool(turns, vectors, cut, pieces)


def merged(pools: list[Pool]) -> Pool:
    """One user's pool of several histories, in the order they were added."""
    return Pool(
        [t for p in pools for t in p.messages],
        np.concatenate([p.message_vectors for p in pools]),
        [t for p in pools for t in p.passages],
        np.concatenate([p.passage_vectors for p in pools]),
    )


def ask_baselines(
    pool: Pool,
    conversations: list[Conversation],
    budgets: list[int],
    embedder: Any,
    counter: Any,
    label: str,
) -> dict[str, Judgements]:
    """Every baseline's judgements of every question at every budget."""

    bm25 = FastBM25([line(t) for t in pool.passages])
    judged: dict[str, Judgements] = {s: {b: [] for b in budgets} for s in SYSTEMS[1:]}
    progress = Progress(label, sum(len(c.questions) for c in conversations))
    recent = list(reversed(pool.messages))
    for conv in conversations:
        for q in conv.questions:
            qv = np.asarray(embedder.embed([q.question])[0], dtype=np.float32)
            orders = {
                "dense messages": [
                    pool.messages[i] for i in np.argsort(-(pool.message_vectors @ qv))[:300]
                ],
                "dense passages": [
                    pool.passages[i] for i in np.argsort(-(pool.passage_vectors @ qv))[:300]
                ],
                "BM25 passages": [
                    pool.passages[i]
                    for i in np.argsort(-bm25.scores(q.question), kind="stable")[:300]
                ],
                "recent window": recent,
            }
            for budget in budgets:
                for name, ranked in orders.items():
                    text, tokens = fit_turns(ranked, budget, counter)
                    tokens += 3 if text else 0  # the reply priming a Context counts too
                    judged[name][budget].append(judge(text, tokens, q, conv))
            progress.step()
    return judged


# -- figures --------------------------------------------------------------------------------------


def mean_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.mean(present) if present else None


def figures(judged: Judgements, questions: list[Question]) -> dict[str, Any]:
    """Means per budget: touched, sentences, answers, tokens, knowledge updates, abilities."""
    out: dict[str, Any] = {}
    for budget, rows in judged.items():
        by_ability: dict[str, list[float]] = {}
        for q, j in zip(questions, rows, strict=True):
            by_ability.setdefault(q.ability, []).append(j.touched)
        out[budget] = {
            "touched": statistics.mean(j.touched for j in rows),
            "sentences": statistics.mean(j.sentences for j in rows),
            "answers": mean_of([j.answer for j in rows]),
            "tokens": statistics.mean(j.tokens for j in rows),
            "updated_touched": mean_of([j.updated for j in rows]),
            "updated_first": mean_of([j.updated_first for j in rows]),
            "ability": {a: statistics.mean(by_ability[a]) for a in ABILITIES if a in by_ability},
        }
    return out


# -- the grid and cross-validation --------------------------------------------------------------


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def planner_settings(base: Any, overrides: dict[str, Any]) -> Any:
    """``base`` (a PlannerConfig) with ``overrides`` (nested dicts) applied, validated."""
    from tiermem.planner.settings import PlannerConfig

    return PlannerConfig.model_validate(deep_merge(base.model_dump(), overrides))


GridScores = dict[str, dict[str, list[list[float]]]]
"""Per grid point, per conversation, per question: the touched share at each budget."""


def choose(scores: GridScores, conversations: list[str]) -> str:
    """The grid point with the best mean touched share over ``conversations``' questions
    and every budget (the first on a tie: the default is first)."""
    points = list(scores)

    def mean(point: str) -> float:
        return statistics.mean(v for c in conversations for row in scores[point][c] for v in row)

    return max(points, key=lambda p: (round(mean(p), 9), -points.index(p)))


def cross_validate(scores: GridScores, budgets: list[int]) -> dict[str, Any]:
    """Leave one conversation out: each held-out conversation's questions answered with
    the point chosen on the others. The CV figure beside the in-sample best (chosen and
    scored on all) and the default (the first point), per budget and over the budgets."""
    points = list(scores)
    names = list(scores[points[0]])

    def figure(rows: list[list[float]]) -> dict[str, Any]:
        return {
            "touched": {b: statistics.mean(r[i] for r in rows) for i, b in enumerate(budgets)},
            "mean": statistics.mean(v for r in rows for v in r),
        }

    picks = {held: choose(scores, [c for c in names if c != held]) for held in names}
    best = choose(scores, names)
    return {
        "fold_choices": picks,
        "in_sample_choice": best,
        "cv": figure([row for held in names for row in scores[picks[held]][held]]),
        "in_sample": figure([row for c in names for row in scores[best][c]]),
        "default": figure([row for c in names for row in scores[points[0]][c]]),
    }


def grid_rows(
    judged: Judgements, conversations: list[Conversation], budgets: list[int]
) -> dict[str, list[list[float]]]:
    """``judged`` as GridScores' rows of one point."""
    out: dict[str, list[list[float]]] = {}
    n = 0
    for conv in conversations:
        out[conv.name] = [
            [judged[b][n + i].touched for b in budgets] for i in range(len(conv.questions))
        ]
        n += len(conv.questions)
    return out


def load_grid(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> dict[str, dict[str, Any]]:
    """The grid points to run: ``--grid`` names (built-in or from ``--grid-json``); by
    default all built-in ones, or the default and the file's. The default always first."""
    from pydantic import ValidationError

    from tiermem.planner.settings import PlannerConfig

    available = dict(GRID)
    own: dict[str, Any] = {}
    if args.grid_json:
        own = json.loads(Path(args.grid_json).read_text())
        if not isinstance(own, dict) or not all(isinstance(v, dict) for v in own.values()):
            parser.error("--grid-json: expected an object of name -> planner overrides")
        available |= own
    names = args.grid or (["default", *own] if own else list(GRID))
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"--grid: unknown {unknown}; known: {list(available)}")
    chosen = {"default": {}} | {n: available[n] for n in names}
    for name, overrides in chosen.items():
        try:
            planner_settings(PlannerConfig(), overrides)
        except (ValidationError, TypeError, AttributeError) as exc:
            parser.error(f"grid point {name!r}: {exc}")
    return chosen


# -- the run ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tiermem.embeddings import get_embedder
    from tiermem.tokens import get_token_counter

    budgets = args.budgets
    conversations = [load(f) for f in args.folders]
    questions = [q for c in conversations for q in c.questions]
    counter = get_token_counter("gpt-4o", exact=True)
    embedder = get_embedder(MODEL)
    embedder.embed(["warm up"])
    stores = Stores(args.store)
    result: dict[str, Any] = {
        "embedder": MODEL,
        "conversations": [c.name for c in conversations],
        "questions": len(questions),
        "budgets": budgets,
        "store": str(args.store) if args.store else None,
        "grid_points": args.grid_points,
        "question_list": [
            {"conversation": q.conversation, "ability": q.ability, "question": q.question}
            for q in questions
        ],
    }
    seconds: dict[str, float] = {}
    result["seconds"] = seconds
    clock = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal clock
        seconds[phase] = time.perf_counter() - clock
        clock = time.perf_counter()

    try:
        opened, ingests = build(stores, "apart", conversations, False, embedder, counter)
        result["ingest"] = {n: vars(i) for n, i in ingests.items()}
        lap("ingest")
        memory = opened.memory
        default = memory.config.memory.planner
        judged: dict[str, Judgements] = {}
        judged["tiermem"], result["latency"] = ask_tiermem(
            memory, conversations, budgets, False, "tiermem (per user)", timed=True
        )
        lap("tiermem")
        scores: GridScores = {"default": grid_rows(judged["tiermem"], conversations, budgets)}
        grid_tokens: dict[str, dict[int, float]] = {
            "default": {b: statistics.mean(j.tokens for j in judged["tiermem"][b]) for b in budgets}
        }
        for name, overrides in args.grid_points.items():
            if name == "default":
                continue
            memory = opened.apply(planner_settings(default, overrides))
            point, _ = ask_tiermem(memory, conversations, budgets, False, f"grid: {name}")
            scores[name] = grid_rows(point, conversations, budgets)
            grid_tokens[name] = {b: statistics.mean(j.tokens for j in point[b]) for b in budgets}
        opened.memory.close()
        lap("grid")
        result["grid"] = {
            "touched": {
                n: {
                    b: statistics.mean(r[i] for rows in s.values() for r in rows)
                    for i, b in enumerate(budgets)
                }
                for n, s in scores.items()
            },
            "tokens": grid_tokens,
            "cv": cross_validate(scores, budgets) if len(conversations) > 1 else None,
        }
        pools = [pool_of(c, embedder, stores) for c in conversations]
        for conv, pool in zip(conversations, pools, strict=True):
            got = ask_baselines(
                pool, [conv], budgets, embedder, counter, f"baselines on {conv.name}"
            )
            for name, per in got.items():
                for b in budgets:
                    judged.setdefault(name, {x: [] for x in budgets})[b] += per[b]
        lap("baselines")
        result["systems"] = {s: figures(judged[s], questions) for s in SYSTEMS}
        result["per_question"] = {
            s: {b: [j.touched for j in judged[s][b]] for b in budgets} for s in SYSTEMS
        }
        if args.one_user:
            result["one_user"] = run_one_user(
                stores, conversations, pools, budgets, embedder, counter
            )
            lap("one user")
    finally:
        stores.close()
    return result


def run_one_user(
    stores: Stores,
    conversations: list[Conversation],
    pools: list[Pool],
    budgets: list[int],
    embedder: Any,
    counter: Any,
) -> dict[str, Any]:
    """Every conversation under one user: tiermem and the baselines over its whole history."""
    questions = [q for c in conversations for q in c.questions]
    db = "one-user-" + "-".join(c.name for c in conversations)
    opened, ingests = build(stores, db, conversations, True, embedder, counter)
    apart = Opened(stores.dir / "apart.db", embedder, counter).open()
    judged: dict[str, Judgements] = {}
    try:
        judged["tiermem"], latency = ask_tiermem(
            opened.memory, conversations, budgets, True, "tiermem (one user)", timed=True
        )
        paired = paired_latency(apart, opened.memory, conversations, budgets)
    finally:
        opened.memory.close()
        apart.close()
    judged |= ask_baselines(
        merged(pools), conversations, budgets, embedder, counter, "baselines (one user)"
    )
    return {
        "ingest": {n: vars(i) for n, i in ingests.items()},
        "latency": latency,
        "paired_ms": paired,
        "p50_ratio_to_apart": {
            b: statistics.median(paired["one user"][b]) / statistics.median(paired["apart"][b])
            for b in budgets
        },
        "systems": {s: figures(judged[s], questions) for s in SYSTEMS},
    }


def paired_latency(
    apart: Any, one: Any, conversations: list[Conversation], budgets: list[int]
) -> dict[str, dict[int, list[float]]]:
    """``get_context`` on the apart and on the one-user store, each question at each
    budget on both in turn (which goes first alternates), the embedder's cache emptied
    before each: a shared machine's load falls on both alike, so their ratio holds where
    two runs minutes apart do not (the same code measured 1.22x and 1.40x that way). Each
    question was asked before: the runs are warm alike."""
    ms: dict[str, dict[int, list[float]]] = {
        w: {b: [] for b in budgets} for w in ("apart", "one user")
    }
    sides = [("apart", apart, False), ("one user", one, True)]
    progress = Progress("one user / apart, in turn", sum(len(c.questions) for c in conversations))
    turn = 0
    for conv in conversations:
        for n, q in enumerate(conv.questions):
            for budget in budgets:
                for name, memory, together in sides if turn % 2 == 0 else sides[::-1]:
                    user, _ = user_of(conv, together)
                    memory.embedder.cache.clear()
                    t0 = time.perf_counter()
                    memory.get_context(
                        q.question, user, f"paired-{conv.name}-{n}", max_tokens=budget
                    )
                    ms[name][budget].append(1000 * (time.perf_counter() - t0))
                turn += 1
            progress.step()
    return ms


# -- the report ---------------------------------------------------------------------------------------


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def report(result: dict[str, Any], command: str) -> None:
    from rich.console import Console

    console = Console(width=max(Console().width, 120))
    budgets = result["budgets"]
    ingests = result["ingest"]
    refused = sum(len(i["refused"]) for i in ingests.values())
    print(
        "ingest (adds + flush), per conversation: "
        + ", ".join(f"{n}: {i['seconds']:.1f} s" for n, i in ingests.items())
        + f"; total {sum(i['seconds'] for i in ingests.values()):.1f} s; "
        f"{sum(i['messages'] for i in ingests.values())} messages added, {refused} refused"
    )
    title = (
        f"BEAM evidence within a budget ({result['questions']} questions, "
        f"{len(result['conversations'])} conversations, one user each)"
    )
    console.print(summary_table(title, result["systems"], budgets))
    for budget in budgets:
        console.print(ability_table(result["systems"], budget))
    lat = result["latency"]
    table = rich_table(
        f"get_context latency (per user), query embedding included; one embedding of the "
        f"question p50 {lat['embed_ms']['p50']:.1f} ms, p95 {lat['embed_ms']['p95']:.1f} ms",
        ["budget", "p50 ms", "p95 ms", "p50 / embed", "p95 / embed"],
    )
    for b in budgets:
        per, ratio = lat["get_context_ms"][b], lat["ratio"][b]
        table.add_row(
            str(b),
            f"{per['p50']:.1f}",
            f"{per['p95']:.1f}",
            f"{ratio['p50']:.2f}x",
            f"{ratio['p95']:.2f}x",
        )
    console.print(table)
    report_grid(console, result)
    if result.get("one_user"):
        report_one_user(console, result)
    print(
        "time of each part: "
        + ", ".join(f"{phase} {s:.0f} s" for phase, s in result["seconds"].items())
    )
    print(f"reproduce: {command}")


def summary_table(title: str, systems: dict[str, Any], budgets: list[int]) -> Any:
    table = rich_table(
        title,
        [
            "system",
            "budget",
            "touched",
            "sentences",
            "answers",
            "KU updated",
            "KU updated first",
            "tokens",
        ],
        left=2,
    )
    for b in budgets:
        for name, per in systems.items():
            f = per[b]
            table.add_row(
                name,
                str(b),
                share(f["touched"]),
                share(f["sentences"]),
                share(f["answers"]),
                share(f["updated_touched"]),
                share(f["updated_first"]),
                f"{f['tokens']:.0f}",
            )
    return table


def ability_table(systems: dict[str, Any], budget: int, who: str = "one user each") -> Any:
    table = rich_table(
        f"Evidence touched by ability within {budget} tokens ({who})", ["ability", *systems]
    )
    for ability in ABILITIES:
        if any(ability in per[budget]["ability"] for per in systems.values()):
            table.add_row(
                ability, *(share(per[budget]["ability"].get(ability)) for per in systems.values())
            )
    return table


def report_grid(console: Any, result: dict[str, Any]) -> None:
    budgets, grid = result["budgets"], result["grid"]
    table = rich_table(
        "tiermem's planner settings (grid): evidence touched / mean tokens",
        ["point", "overrides", *(f"{b} tokens" for b in budgets), "mean"],
        left=2,
    )
    for name, touched in grid["touched"].items():
        table.add_row(
            name,
            json.dumps(result["grid_points"][name]),
            *(f"{touched[b]:.3f} / {grid['tokens'][name][b]:.0f}" for b in budgets),
            f"{statistics.mean(touched.values()):.3f}",
        )
    console.print(table)
    cv = grid["cv"]
    if cv is None:
        print("cross-validation needs two conversations or more")
        return

    def cells(part: dict[str, Any]) -> str:
        return (
            " / ".join(f"{part['touched'][b]:.3f}" for b in budgets) + f" (mean {part['mean']:.3f})"
        )

    print(
        f"leave-one-conversation-out, touched within {' / '.join(map(str, budgets))} tokens: "
        f"CV {cells(cv['cv'])}; in-sample best ({cv['in_sample_choice']}) {cells(cv['in_sample'])}; "
        f"default {cells(cv['default'])}"
    )
    print("fold choices: " + ", ".join(f"{h}: {p}" for h, p in cv["fold_choices"].items()))


def report_one_user(console: Any, result: dict[str, Any]) -> None:
    budgets, one = result["budgets"], result["one_user"]
    title = f"All {len(result['conversations'])} conversations under one user (apart -> one user)"
    table = rich_table(
        title,
        ["system", "budget", "touched", "sentences", "answers", "KU updated first", "tokens"],
        left=2,
    )
    for b in budgets:
        for name in SYSTEMS:
            a, o = result["systems"][name][b], one["systems"][name][b]
            table.add_row(
                name,
                str(b),
                *(
                    f"{share(a[k])} -> {share(o[k])}"
                    for k in ("touched", "sentences", "answers", "updated_first")
                ),
                f"{a['tokens']:.0f} -> {o['tokens']:.0f}",
            )
    console.print(table)
    for budget in budgets:
        console.print(ability_table(one["systems"], budget, "all under one user"))
    lat = one["latency"]
    print(
        "get_context one user: "
        + "; ".join(
            f"{b} tokens p50 {lat['get_context_ms'][b]['p50']:.1f} ms, p95 "
            f"{lat['get_context_ms'][b]['p95']:.1f} ms ({lat['ratio'][b]['p50']:.2f}x / "
            f"{lat['ratio'][b]['p95']:.2f}x one embedding), p50 one user / apart, asked "
            f"in turn, {one['p50_ratio_to_apart'][b]:.2f}x"
            for b in budgets
        )
    )
    print(
        f"one-user ingest {sum(i['seconds'] for i in one['ingest'].values()):.1f} s, "
        f"{sum(len(i['refused']) for i in one['ingest'].values())} refused"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=beam_folder, help="the BEAM folder (its 100K/N or N)")
    parser.add_argument("--budgets", type=int, nargs="+", help="default 2000 4000 8000")
    parser.add_argument("--conversations", nargs="+", help="folder names, e.g. 1 2 3")
    parser.add_argument("--one-user", action="store_true", help="also all under one user")
    parser.add_argument("--store", type=Path, help="keep and reuse the SQLite stores here")
    parser.add_argument("--quick", action="store_true", help="2 conversations, 2000 4000")
    parser.add_argument("--grid", nargs="+", help=f"grid points to run (built in: {list(GRID)})")
    parser.add_argument("--grid-json", help="a JSON file of name -> planner overrides")
    parser.add_argument(
        "--ingest-ratio",
        action="store_true",
        help="also time the first conversation's ingest with passages off and on, side by side",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "longmem.json")
    args = parser.parse_args(argv)
    folders = beam_folders(args.data_dir)
    if args.conversations:
        by_name = {f.name: f for f in folders}
        missing = [n for n in args.conversations if n not in by_name]
        if missing:
            parser.error(f"--conversations: no {missing} in {args.data_dir}")
        folders = [by_name[n] for n in args.conversations]
    elif args.quick:
        folders = folders[:2]
    args.folders = folders
    args.budgets = sorted(args.budgets or ([2000, 4000] if args.quick else [2000, 4000, 8000]))
    if any(b < 1 for b in args.budgets):
        parser.error("--budgets must be positive")
    args.grid_points = load_grid(args, parser)
    result = run(args)
    if args.ingest_ratio:
        result["ingest_ratio"] = ingest_ratio(load(folders[0]))
    write_json(args.out, json.loads(json.dumps(result, default=str)))
    report(result, reproduce_command(__file__, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
