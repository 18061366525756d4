"""The retriever: gathers the planner's inputs for one prompt.

For a query it reads the session's recent window and running summary and searches the
store by keyword while the query is embedded, then by vector; embeds the user's newest
messages not indexed yet (``memory.planner.pending_vectors``); adds the working memory's
and the session buffer's nearest and the user's synopsis. One strategy, written once as
a stepped method (:meth:`Retriever.gather`), run by the sync and the async driver. The
planner (:class:`~tiermem.planner.planner.QueryPlanner`, a pure function of these
inputs) ranks and fits them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple, TypeVar, cast

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.breaker import model_unavailable
from tiermem.errors import TiermemError
from tiermem.facts.worker import fact_line
from tiermem.memory.retention import Retention
from tiermem.memory.wiring import Tiers
from tiermem.messages import Message, transcript_line
from tiermem.planner.planner import Candidate
from tiermem.planner.ranking import Excerpt, asks_summary
from tiermem.stores.ops import Op, SearchOp
from tiermem.stores.transcript import GenerationOp
from tiermem.text import (
    FILLER_WORDS,
    STEM_LETTERS,
    folded,
    keyword_matches,
    query_stems,
    sentences,
    words,
)
from tiermem.tokens import LINE_TOKENS, stored_count
from tiermem.types.filters import NO_FILTER, MemoryFilter

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class PlannerInputs:
    """What :meth:`~tiermem.planner.planner.QueryPlanner.plan` takes besides the query."""

    recent: list[Message] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    summary: str | None = None
    synopsis: str | None = None
    degraded: list[str] = field(default_factory=list)
    """What was down (:attr:`~tiermem.types.Context.degraded`)."""


class Retriever:
    """Gathers a context's inputs from every tier of one Memory."""

    def __init__(
        self,
        tiers: Tiers,
        retention: Retention,
        window: int,
        pool: int,
        follow_up: int = 0,
        standing: int = 0,
    ) -> None:
        self.tiers = tiers
        self.retention = retention
        self.window = window
        self.pool = pool
        self.follow_up = follow_up
        self.standing = standing

    @stepped
    def gather(
        self,
        query: str,
        user_id: str,
        session_id: str | None,
        finish: Callable[[PlannerInputs], T],
    ) -> Steps[T]:
        """``finish(inputs)`` of the recent window, summary, candidates and synopsis for
        ``query``.

        One strategy, two drivers (:meth:`_step`, :meth:`_astep`): the query is embedded
        from the start, beside the reads and the keyword search; then the vector search,
        in a batch whose results are shaped, with the synopsis read, the candidates made
        and ``finish`` called, in one call (``abatch_then``: in one thread, so an event
        loop only awaits it). Blocking, the keyword search runs in a search thread, beside
        the embedding and the vector search (:meth:`_step`); awaited, it goes in the
        reads' batch, and a vector ready at once (cached) lets every read and search go
        in the last batch. An embedder that is down: the candidates are what the keyword
        search found."""
        reads = self._reads(user_id, session_id)
        assemble = partial(self._assemble, query, user_id, session_id, reads)
        if not query.strip():
            return cast(T, (yield _Then([], reads, lambda found: finish(assemble(found, None)))))
        keyword: list[Op] = [self._keyword_op(query, user_id)]
        embedded, found = yield _Beside([query], reads, keyword)
        batch: list[Op] = [] if found is not None else [*reads, *keyword]
        vector, down = None, None
        if isinstance(embedded, TiermemError):
            down = embedder_down(embedded)
        else:
            vector = embedded[0]
            batch += self._vector_ops(vector, user_id, query)

        def then(results: list[Any]) -> T:
            return finish(assemble(results, vector, down))

        return cast(T, (yield _Then(found or [], batch, then)))

    agather = stepped_twin(gather)

    def _step(self, step: _Beside | _Then, /) -> Any:
        """Run a wait of :meth:`gather` blocking. A :class:`_Beside`: where the store reads
        apart (PostgreSQL's pool), the embedding and the ``aside`` searches each in a
        search thread (:class:`_Aside`) while this thread reads; on SQLite's one
        connection (a search in a thread would make the reads wait) the reads first,
        then the searches aside in a search thread while this thread embeds. A
        :class:`_Then`: its batch, then what is still running aside."""
        store = self.tiers.store
        if isinstance(step, _Then):
            results = store.batch(step.ops) if step.ops else []
            found = [r for f in step.found for r in (f.result() if isinstance(f, _Aside) else [f])]
            return step.then([*found, *results])
        pool = self.tiers.search_pool()
        if not self.tiers.reads_apart:
            found = store.batch(step.ops)
            aside = _Aside(pool, self._searched, step.aside)
            return _unless_failed(lambda: self._embedded(step.texts), aside), [*found, aside]
        embedding = _Aside(pool, self._embedded, step.texts)
        aside = _Aside(pool, self._searched, step.aside)
        found = _unless_failed(lambda: store.batch(step.ops), embedding, aside)
        return embedding.result(), [*found, aside]

    def _searched(self, ops: list[Op]) -> list[Any]:
        """The results of searches run aside, a keyword search's hits made candidates
        there too (:class:`_KeywordHits`: in the search thread, while the query is
        embedded)."""
        results = self.tiers.store.batch(ops)
        return [
            _KeywordHits(r) if isinstance(op, SearchOp) and op.mode == "keyword" else r
            for op, r in zip(ops, results, strict=True)
        ]

    async def _astep(self, step: _Beside | _Then, /) -> Any:
        """:meth:`_step` on a store that reads natively in async calls (PostgreSQL): the
        embedding a task (a vector the embedder has cached costs no thread: then the
        reads go with the vector search, ``found`` is None), the reads and the searches
        aside in one of the store's batches."""
        store = self.tiers.store
        if isinstance(step, _Then):
            before = step.found
            return await store.abatch_then(step.ops, lambda hits: step.then([*before, *hits]))
        embedding = asyncio.ensure_future(self._aembedded(step.texts))
        try:
            await asyncio.sleep(0)  # a cached vector is ready now
            found = None if embedding.done() else await store.abatch([*step.ops, *step.aside])
            return await embedding, found
        finally:  # a failure: nothing left running, no exception left unread
            embedding.cancel()  # no-op on a task that is done
            await asyncio.gather(embedding, return_exceptions=True)

    def _embedded(self, texts: list[str]) -> Any:
        """The texts' vectors, or the error that the embedder gave (:func:`embedder_down`
        says whether it is down)."""
        try:
            return self.tiers.embed(texts)
        except TiermemError as exc:
            return exc

    async def _aembedded(self, texts: list[str]) -> Any:
        try:
            return await self.tiers.aembed(texts)
        except TiermemError as exc:
            return exc

    def _assemble(
        self,
        query: str,
        user_id: str,
        session_id: str | None,
        reads: list[Op],
        found: list[Any],
        vector: Any,
        down: str | None = None,
    ) -> PlannerInputs:
        """The planner's inputs from the results of :meth:`_reads`, then (with the query's
        ``vector``, or ``down``: why the embedder gave none) of the keyword and the
        vector search: what :meth:`gather` does after the I/O."""
        read = _Read(self, user_id, session_id, reads, found[: len(reads)])
        inputs = read.inputs()
        if down is not None:
            inputs.degraded.append(down)
        if vector is not None or down is not None:
            keyword_hits, *searched = found[len(reads) :]
            vector_hits, *pinned = searched or [[]]
            own = self._embed_pending(read.unindexed) if vector is not None else {}
            inputs.candidates = self._candidates(
                query, read, vector, own, vector_hits, keyword_hits, pinned
            )
        inputs.synopsis = self._synopsis(user_id, read.generation)
        return inputs

    def _reads(self, user_id: str, session_id: str | None) -> list[Op]:
        """The store reads of a context besides the searches, in one batch: the
        conversation's (see :meth:`Retention.context_reads`) and the user's generation
        (what the synopsis is checked against)."""
        reads = self.retention.context_reads(user_id, session_id, self.window)
        if self.tiers.synopses is not None:
            reads.append(GenerationOp(user_id))
        return reads

    def _keyword_op(self, query: str, user_id: str) -> SearchOp:
        return SearchOp(user_id, "keyword", None, query, self.pool, count_access=False, shared=True)

    def _vector_ops(self, vector: Any, user_id: str, query: str) -> list[Op]:
        """The vector search; the search among the user's standing instructions and
        preferences (``planner.standing``: the nearest few reach the context whatever
        the other memories' ranks); and, for a query that asks for a summary, among the
        session summaries (:data:`SUMMARIES`)."""
        # after the unindexed rows were read: a row the worker indexes in between is in
        # the index, or in both (the planner keeps one)
        ops: list[Op] = [self._vector_op(vector, user_id, self.pool)]
        if self.standing:
            ops.append(self._vector_op(vector, user_id, self.standing, STANDING_FILTER))
        if asks_summary(query):
            ops.append(self._vector_op(vector, user_id, SUMMARIES, SUMMARY_FILTER))
        return ops

    @staticmethod
    def _vector_op(
        vector: Any, user_id: str, limit: int, where: MemoryFilter = NO_FILTER
    ) -> SearchOp:
        """One vector search of a context: its hits' accesses are not counted (the planner
        records those it keeps) and its records may be the store's own."""
        return SearchOp(
            user_id, "vector", vector, None, limit, where, count_access=False, shared=True
        )

    def _synopsis(self, user_id: str, generation: int | None) -> str | None:
        """The synopsis for a context (None when synopses are disabled)."""
        synopses = self.tiers.synopses
        if synopses is None:
            return None
        return str(synopses.get(user_id, generation=generation).render())

    def _candidates(
        self,
        query: str,
        read: _Read,
        vector: Any,
        pending: dict[int, Any],
        vector_hits: list[Any],
        keyword_hits: list[Any],
        pinned: list[list[Any]],
    ) -> list[Candidate]:
        """The searches' hits, the unindexed rows, the working memory's and the session
        buffer's nearest, as the planner's candidates. The hits of the searches among
        standing instructions and summaries (``pinned``) are marked ``standing``."""
        by_keyword = _by_keyword(keyword_hits)
        if vector is None:  # the embedder is down: what the keywords find
            return [*by_keyword.values(), *_unindexed_candidates(query, read.unindexed)]
        pool, user_id = self.pool, read.user_id
        by_id: dict[int, Candidate] = {}  # by the memory id's integer (a UUID hashes in Python)
        for hit in vector_hits:  # the vector hits first, in their order; then the others
            key = hit.record.id.int
            found = by_keyword.pop(key, None)
            if found is None:
                found = _from_record(hit.record, similarity=hit.score)
            else:
                found.similarity = hit.score
            by_id[key] = found
        for key, found in by_keyword.items():
            embedding = found.vector
            found.similarity = float(embedding @ vector) if embedding is not None else None
            by_id[key] = found
        for hit in (hit for hits in pinned for hit in hits):
            key = hit.record.id.int
            found = by_id.get(key) or _from_record(hit.record, similarity=hit.score)
            found.standing = True
            by_id[key] = found
        if self.follow_up:
            leads = [
                h.record.content
                for h in (*vector_hits[: self.follow_up], *keyword_hits[: self.follow_up])
            ]
            self._follow(query, leads, user_id, vector, by_id)
        candidates = list(by_id.values())
        unindexed = read.unindexed
        if unindexed:
            # a pending row competes with the index's nearest: offered when as near as
            # the farthest vector hit of a full pool, or when it shares query keywords
            nearest = vector_hits[-1].score if len(vector_hits) >= pool else -math.inf
            candidates += _unindexed_candidates(query, unindexed, vector, pending, nearest)
        working = self.tiers.built_working
        if working is not None:
            for item in working.search(vector, k=pool, user_id=user_id):
                candidates.append(
                    Candidate(
                        content=item.content,
                        source="working",
                        similarity=item.similarity,
                        key=folded(item.content),
                    )
                )
        candidates += self._buffered(vector, user_id, read.session_id)
        return candidates

    def _follow(
        self, query: str, leads: list[str], user_id: str, vector: Any, by_id: dict[int, Candidate]
    ) -> None:
        """A second keyword search for what the best first hits name (:func:`leads_of`):
        its hits join the pool with a keyword score up to ``FOLLOW_SHARE`` of the first
        search's best, so a line about a person or thing the answer runs through can rank."""
        terms = leads_of(query, leads)
        if not terms:
            return
        op = SearchOp(user_id, "keyword", None, terms, self.pool, count_access=False)
        (hits,) = self.tiers.store.batch([op])
        first = [c.keyword for c in by_id.values() if c.keyword is not None]
        top = max((h.score for h in hits), default=0.0)
        if not hits or top <= 0:
            return
        scale = FOLLOW_SHARE * (max(first) if first else 1.0) / top
        for hit in hits:
            score = hit.score * scale
            found = by_id.get(hit.record.id.int)
            if found is not None:
                found.keyword = max(found.keyword or 0.0, score)
                continue
            embedding = hit.record.embedding
            similarity = float(embedding @ vector) if embedding is not None else None
            by_id[hit.record.id.int] = _from_record(hit.record, similarity, keyword=score)

    def _embed_pending(self, rows: list[Any]) -> dict[int, Any]:
        """The vectors of :meth:`_fresh` rows by seq (the query's was made beside the
        reads; there are usually none). The embedder's cache (by content hash) keeps
        them, so a later call, or this process's worker, reuses them."""
        fresh = self._fresh(rows)
        if not fresh:
            return {}
        try:
            vectors = self.tiers.embed([transcript_line(r.message) for r in fresh])
        except TiermemError as exc:  # a row the worker will mark failed: keyword search
            log.debug("embedding the pending messages failed: %s", exc)
            return {}
        return {r.seq: v for r, v in zip(fresh, vectors, strict=True)}

    def _fresh(self, rows: list[Any]) -> list[Any]:
        """The user's newest ``planner.pending_vectors`` messages not indexed yet, to embed
        (failed rows, which the embedder refused, are left to keyword
        search, as all are when the embedder refuses one before the worker marked it
        failed)."""
        limit = self.tiers.config.memory.planner.pending_vectors
        return [r for r in rows if r.state == "pending"][:limit]

    def _buffered(self, vector: Any, user_id: str, session_id: str | None) -> list[Candidate]:
        """The session's buffered messages, searched by vector (retention without the
        store: the working memory forgets under memory pressure, the buffer does not)."""
        buffer = self.retention.buffer(user_id, session_id)
        if buffer is None or not self.tiers.config.memory.buffer.vector_search:
            return []
        found = []
        for message, similarity in buffer.vector_search(
            vector, self.tiers.embedder, self.pool, None
        ):
            line = transcript_line(message)
            found.append(
                Candidate(
                    content=line,
                    source="buffer",
                    similarity=similarity,
                    timestamp=message.timestamp,
                    key=folded(line),
                    session_id=session_id,
                    message_id=message.message_id,
                )
            )
        return found


class _Beside(NamedTuple):
    """A wait of :meth:`Retriever.gather`: the ``texts`` embedded while the ``ops`` and
    the ``aside`` ops are read (``aside``: a search that may run apart). Answered with
    the vectors (or the embedder's error) and the ops' then the aside ops' results (a
    blocking driver's aside ones an :class:`_Aside` still running); None for the
    results when the vectors were ready before the reads began (they are left to the
    next batch)."""

    texts: list[str]
    ops: list[Op]
    aside: list[Op]


class _Then(NamedTuple):
    """A wait of :meth:`Retriever.gather`: ``then`` of the results ``found`` before and
    of the ``ops``, in one call (``abatch_then``)."""

    found: list[Any]
    ops: list[Op]
    then: Callable[[list[Any]], Any]


def _unless_failed(work: Callable[[], T], *aside: _Aside) -> T:
    """``work()``; when it fails, the work ``aside`` is cancelled (a thread that started
    it finishes it, unread)."""
    try:
        return work()
    except BaseException:
        for started in aside:
            started.cancel()
        raise


class _Aside:
    """Work in a search thread, while the caller does other work; run by the caller
    when no search thread started it by the time its result is wanted (a busy
    machine, or every search thread taken)."""

    def __init__(self, pool: ThreadPoolExecutor, work: Callable[..., Any], *args: Any) -> None:
        self.work, self.args = work, args
        self.future = pool.submit(work, *args)

    def result(self) -> Any:
        return self.work(*self.args) if self.future.cancel() else self.future.result()

    def cancel(self) -> None:
        self.future.cancel()


class _Read:
    """The results of :meth:`Retriever._reads`, shaped."""

    def __init__(
        self,
        retriever: Retriever,
        user_id: str,
        session_id: str | None,
        reads: list[Op],
        found: list[Any],
    ) -> None:
        self.user_id, self.session_id = user_id, session_id
        generation = bool(reads) and type(reads[-1]) is GenerationOp
        state = retriever.retention.context_state(
            user_id, session_id, retriever.window, found[:-1] if generation else found
        )
        self.recent, self.summary, self.unindexed = state
        self.generation = int(found[-1]) if generation else None

    def inputs(self) -> PlannerInputs:
        """The planner's inputs so far (no candidates nor synopsis yet)."""
        return PlannerInputs(recent=self.recent, summary=self.summary)


STANDING_FILTER = MemoryFilter(memory_types=("preference",))
"""What the search among standing instructions and preferences looks at."""
SUMMARY_FILTER = MemoryFilter(memory_types=("summary",))
"""What the search among session summaries looks at."""
SUMMARIES = 2
"""Session summaries nearest a query that asks for a summary, offered first."""
FOLLOW_SHARE = 0.5
"""The share of the first keyword search's best score a follow-up hit can reach."""


def leads_of(query: str, lines: list[str]) -> str:
    """The names, capitalised spans and numbers of ``lines`` (each ``speaker: text``)
    that the query does not already hold: a capitalised word not opening a sentence, or a
    number; as one keyword query."""
    asked = query_stems(query)
    found: list[str] = []
    for line in lines:
        _, _, text = line.partition(": ")
        for sentence in sentences(text):
            for word in words(sentence)[1:]:
                if not (word[0].isupper() or word[0].isdigit()):
                    continue
                term = word.lower().strip("'’-.,:/")
                if term and term not in FILLER_WORDS and term[:STEM_LETTERS] not in asked:
                    found.append(term)
    return " ".join(dict.fromkeys(found))


def _unindexed_candidates(
    query: str,
    rows: list[Any],
    vector: Any = None,
    vectors: dict[int, Any] | None = None,
    nearest: float = math.inf,
) -> list[Candidate]:
    """The user's messages not indexed yet, scored as indexed ones are: by cosine to the
    query ``vector`` for those embedded with it (``vectors``, by seq), offered when at
    least ``nearest``; and by how many query keywords a line holds (the planner's
    keyword relevance: :func:`~tiermem.text.keyword_matches`)."""
    vectors = vectors or {}
    found = []
    for row in rows:
        message = row.message
        line = transcript_line(message)
        score = keyword_matches(query, line)
        own = vectors.get(row.seq)
        similarity = None if own is None else float(own @ vector)
        if score or (similarity is not None and similarity >= nearest):
            found.append(
                Candidate(
                    content=line,
                    source="store",
                    similarity=similarity,
                    keyword=float(score) if score else None,
                    timestamp=message.timestamp,
                    key=folded(line),
                    session_id=row.session_id,
                    message_id=message.message_id,
                    previous_id=row.previous_id,
                    vector=own,
                )
            )
    return found


def embedder_down(exc: TiermemError) -> str:
    """The note a context carries when the embedder could not embed its query; raises
    ``exc`` again when it is about the query rather than the embedder being down."""
    if not model_unavailable(exc):
        raise exc
    return f"embedder: {type(exc).__name__}: {exc}; found by keyword only"


def _by_keyword(hits: list[Any]) -> dict[int, Candidate]:
    """Keyword hits as candidates by memory id (its integer), in their order (no
    similarity yet): made already when ``hits`` are :class:`_KeywordHits`."""
    if isinstance(hits, _KeywordHits):
        return hits.candidates
    return {hit.record.id.int: _from_record(hit.record, None, keyword=hit.score) for hit in hits}


class _KeywordHits(list):  # type: ignore[type-arg]
    """A keyword search's hits with their candidates (:func:`_by_keyword`), made in the
    search thread that ran it: about half of making a context's candidates, done while
    the calling thread embeds the query."""

    def __init__(self, hits: list[Any]) -> None:
        super().__init__(hits)
        self.candidates = _by_keyword(hits)


def _from_record(record: Any, similarity: float | None, keyword: float | None = None) -> Candidate:
    """A stored memory as a candidate: its fields that depend on the record alone (its
    line, dedup key, links) made once per record object (:data:`_FIELDS`)."""
    key = record.id.int
    kept = _FIELDS.get(key)
    if kept is None or kept[0]() is not record:
        if len(_FIELDS) >= _KEPT:
            _FIELDS.clear()
        kept = _FIELDS[key] = (weakref.ref(record), _record_fields(record))
    (
        line,
        created,
        importance,
        folded_key,
        session,
        message,
        previous,
        memory,
        current,
        sources,
        ids,
        excerpt,
        passages,
        kind,
        counted,
    ) = kept[1]
    return Candidate(  # positional, in field order: a third of the time of keywords
        line, "store", similarity, keyword, created, importance, folded_key, session,
        message, previous, memory, record.embedding, 0.0, 0.0, 0.0, current, sources, ids,
        excerpt, passages, False, kind, counted,
    )  # fmt: skip


def _record_fields(record: Any) -> _Fields:
    metadata = record.metadata or {}
    content, current, sources, source_ids = fact_line(record)
    passages = int(metadata.get("passages") or 0)
    return (
        content,
        record.created_at,
        record.importance,
        "" if passages else folded(record.content),  # its passages stand for it: no key
        record.session_id,
        metadata.get("message_id"),
        metadata.get("previous_id"),
        record.id,
        current,
        sources,
        source_ids,
        _excerpt(record.memory_type, metadata),
        passages,
        record.memory_type,
        stored_count(metadata.get(LINE_TOKENS), record.content_hash)
        if content is record.content
        else None,
    )


def _excerpt(memory_type: str, metadata: dict[str, Any]) -> Excerpt | None:
    """Where a passage or a standing instruction sits in its message (None for any
    other memory)."""
    message = metadata.get("excerpt_of")
    if memory_type not in ("passage", "preference") or not message:
        return None
    return Excerpt(
        str(message),
        str(metadata.get("speaker") or ""),
        int(metadata.get("start") or 0),
        int(metadata.get("end") or 0),
    )


_Fields = tuple[
    str, datetime, float, str, "str | None", "str | None", "str | None", uuid.UUID, bool,
    tuple[str, ...], tuple[str, ...], "Excerpt | None", int, str, "tuple[str, int] | None",
]  # fmt: skip
"""A stored memory's candidate fields but the scores and vector, in :class:`Candidate`'s
order: line, time, importance, dedup key, session, message, previous message, memory id,
current, sources and their message ids, where a passage sits, how many passages a long
message has, the memory's type and its line's tokens counted when it was indexed."""
_FIELDS: dict[int, tuple[weakref.ref[Any], _Fields]] = {}
"""Each stored record's candidate fields (:data:`_Fields`), by the memory id's
integer, with the record they were made of: a search that shares its records (SQLite's
row cache, :class:`~tiermem.stores.ops.SearchOp` ``shared``) returns the same record
objects prompt after prompt, so the line, its dedup key and its links are made once per
record (about 1.5 µs of the 2 µs a candidate took), not once per hit. A record read
anew is another object: its fields are made again. Kept by weak reference: no record is
held past its store's cache."""
_KEPT = 20_000
"""Records whose fields are kept at most (the cache starts over when full): as many as
SQLite's row cache holds (``ROW_CACHE``), else a user of more rows than this (ten
100K-token histories: 17,000 rows) made a quarter of its candidates' fields anew."""
