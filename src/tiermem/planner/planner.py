"""The query planner: assembles, for one prompt, the context that fits the token budget.

Seed 001's five steps:

1. always the recent buffer (the newest messages of the session);
2. hybrid search (vector + keyword) over the long-term store, working memory and the
   buffer's older messages;
3. the user synopsis and the running summary;
4. rank by a blend of relevance, recency and importance, and deduplicate (same content,
   near duplicates, items already in the recent window);
5. fit to ``max_tokens``, counted with the configured counter: never over budget.

With the relevance floor on (:class:`~tiermem.planner.settings.FloorConfig`; off by
default), only memories with some absolute evidence (cosine similarity or the share of
the query's keywords) and a relevance not too far below the best memory's are offered,
so ``max_tokens`` is a cap: a context stops when the memories stop being relevant.

Retrieved memories are rendered as one system message grouped under their dates
(``[8 May 2023]``), newest first (a statement that updates an earlier one comes before
it), or in time order when the query asks about order or past time; one shared header,
which says which, costs fewer tokens than one message per memory.

The result, a :class:`Context`, says for each item which tier it came from, its score and
its tokens (:meth:`Context.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from tiermem.errors import InvalidSizeError
from tiermem.messages import Message, summary_message, transcript_line
from tiermem.planner.ranking import (
    LINES,
    Candidate,
    Excerpt,
    MarginalRelevance,
    WordSets,
    asks_summary,
    line_facts,
    named_speakers,
    rescale,
    specific,
    substrings,
    windows_named,
)
from tiermem.planner.settings import PlannerConfig
from tiermem.planner.temporal import asks_about_past, asks_order, asks_when, within
from tiermem.text import folded, keyword_counts, query_stems, term_set
from tiermem.tokens import newest_within
from tiermem.types import Context, ContextItem, Section

__all__ = ["Candidate", "QueryPlanner", "Rerank"]

if TYPE_CHECKING:
    from tiermem.tokens import TokenCounter

RETRIEVED_HEADER = "Relevant memories, oldest first:"
NEWEST_FIRST_HEADER = "Relevant memories, newest first:"
"""The retrieved section's first line, in time order or (a question about the present:
a newer statement first, marked so) newest first."""
SYNOPSIS_HEADER = "What is known about the user:"


@dataclass
class _Part:
    """One section of a context: its messages, their items and the messages' tokens."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    items: list[ContextItem] = field(default_factory=list)
    tokens: int = 0


class Rerank(NamedTuple):
    """An optional second stage (``memory.rerank``): ``rescore(query, documents,
    relevance)`` gives the best ``top_n`` candidates' new relevance (the reranker's
    scores blended in; their relevance unchanged when it fails or is late)."""

    rescore: Callable[[str, list[str], list[float]], list[float]]
    top_n: int


class _Selection:
    """The memories taken so far and what a new one is checked against."""

    def __init__(self, planner: QueryPlanner, newest_first: bool = False) -> None:
        self.planner = planner
        self.newest_first = newest_first
        self.chosen: list[Candidate] = []
        self.costs: dict[int, int] = {}
        self._keys: set[str] = set()
        self._dates: set[str] = set()
        self._seen = WordSets()
        self._said: set[str] = set()
        self._excerpts: dict[str, list[Excerpt]] = {}  # the chosen excerpts by message
        self._lines: dict[int, int] = {}  # each offered candidate's line, in tokens

    def offer(self, candidate: Candidate, room: int) -> int | None:
        """Take ``candidate`` if it is new and its line fits ``room``: its token cost, or
        None (already taken, a near duplicate, or too long)."""
        cost = self.line(candidate)
        if cost > room or candidate.key in self._keys or self._restates_taken(candidate):
            return None  # most of a pool fails the first test: it comes first
        if candidate.excerpt is not None and self._covered(candidate.excerpt):
            return None
        date = _date_label(candidate.timestamp)
        if date not in self._dates:
            cost += self.planner._count(date + "\n")
        excerpt = candidate.excerpt
        if excerpt is not None:
            cost += self._opening(excerpt)
        if cost > room:
            return None
        words = term_set(candidate.content)
        if self._seen.near(words, self.planner.settings.near_duplicate):
            return None
        self._dates.add(date)
        self._keys.add(candidate.key)
        if candidate.message_id:
            self._said.add(candidate.message_id)
        if excerpt is not None:
            self._excerpts.setdefault(excerpt.message_id, []).append(excerpt)
        self._seen.add(words)
        self.chosen.append(candidate)
        self.costs[id(candidate)] = cost
        return cost

    def line(self, candidate: Candidate) -> int:
        """The tokens of ``candidate``'s line with its newline (counted once a plan)."""
        cost = self._lines.get(id(candidate))
        if cost is None:
            cost = self._lines[id(candidate)] = self.planner.line_tokens(candidate)
        return cost

    def _opening(self, excerpt: Excerpt) -> int:
        """The tokens ``excerpt`` adds besides its line: its message's header, for the
        message's first excerpt, else the gap line when it is next to none of them (a
        gap the render would add: counted, the section rarely comes out over the room)."""
        taken = self._excerpts.get(excerpt.message_id)
        if not taken:
            return self.planner._count(excerpt_header(excerpt) + "\n")
        if any(excerpt.next_to(other, EXCERPT_JOIN) for other in taken):
            return 0
        return self.planner._count(EXCERPT_GAP + "\n")

    def _covered(self, excerpt: Excerpt) -> bool:
        """Whether ``excerpt``'s text is shown already: its message whole, or another
        chosen excerpt of it that holds its span."""
        return excerpt.message_id in self._said or any(
            excerpt.within(other)
            for other in self._excerpts.get(excerpt.message_id, ())
            if other is not excerpt
        )

    def shown(self) -> list[Candidate]:
        """The chosen memories but the excerpts a later choice shows already (a standing
        instruction offered first, then its message whole or a passage holding it):
        never the same text twice."""
        return [c for c in self.chosen if c.excerpt is None or not self._covered(c.excerpt)]

    def _restates_taken(self, candidate: Candidate) -> bool:
        """A fact whose source messages are all taken adds nothing beside them."""
        return bool(candidate.source_ids) and self._said.issuperset(candidate.source_ids)


class QueryPlanner:
    """Ranks candidates from every tier and fits them to a token budget."""

    def __init__(self, settings: PlannerConfig | None = None, *, counter: TokenCounter) -> None:
        self.settings = settings or PlannerConfig()
        self.counter = counter
        self._counts: dict[str, int] = {}
        self._remember: Callable[[str, int], None] | None = getattr(counter, "remember", None)

    def rank_relevance(self, query: str, candidates: Sequence[Candidate]) -> None:
        """Set each candidate's ``relevance`` in [0, 1] from all the evidence at hand.

        1. vector and keyword scores, each rescaled so the pool's median is 0 and its best
           is 1, added with ``keyword_weight``;
        2. plus ``session_weight`` x the relevance of the session's best candidate (a line
           of a conversation that touches the query is more likely relevant);
        3. plus ``temporal_weight`` when the memory falls in a time the query names;
        4. minus ``question_weight`` for a message that asks (ends with "?"): a question
           shares the words of the topic it asks about but rarely holds the answer; and,
           when the query asks when, plus ``when_weight`` for a memory that says when
           ("yesterday", "last week", "3 years", a month:
           :func:`~tiermem.planner.temporal.says_when`);
        5. each message then gets at least ``neighbour_weight`` x the relevance of the
           message before or after it (answers often sit next to the matching line), and
           at least ``reply_weight`` x the relevance of the question it follows;
        6. a line the assistant said keeps ``assistant`` of its relevance (what the user
           said is what a memory is for; the assistant's answers follow from it), and
           a superseded fact keeps ``SUPERSEDED`` of its relevance unless the query asks
           about the past (the current version answers "where does Ana live?"); when the
           query names some of the pool's speakers but not all, a message said by one it
           does not name loses ``speaker_weight`` of its relevance ("What does Melanie do
           to relax?" is answered by what Melanie says).

        The vector score is the similarity to the query less ``generic_weight`` x the
        similarity to the pool's mean vector (:func:`specific`).
        """
        if not candidates:
            return
        w = self.settings.weights
        dense = rescale(specific(candidates, w.generic))
        keyword = rescale([c.keyword for c in candidates])
        weight, question = w.keyword, w.question
        when = w.when if w.when and asks_when(query) else 0.0
        lines: list[tuple[bool, str | None, bool]] = []
        base: list[float] = []
        context: dict[str, float] = {}  # each session's best
        for candidate, d, k in zip(candidates, dense, keyword, strict=True):  # one pass
            line = LINES.get(candidate.content) or line_facts(candidate.content)
            value = d + weight * k - (question if line[0] else 0.0)
            if when:
                value += when if line[2] else 0.0
            lines.append(line)
            base.append(value)
            sid = candidate.session_id
            if sid is not None and (sid not in context or value > context[sid]):
                context[sid] = value
        windows = windows_named(query, candidates) if w.temporal else []
        session = w.session
        own = [
            value + session * context.get(c.session_id or "", 0.0)
            for c, value in zip(candidates, base, strict=True)
        ]
        if windows:
            own = [
                v + w.temporal if within(c.timestamp, windows) else v
                for c, v in zip(candidates, own, strict=True)
            ]
        by_id = {c.message_id: i for i, c in enumerate(candidates) if c.message_id}
        final = list(own)
        reply, neighbour = w.reply, w.neighbour
        for i, candidate in enumerate(candidates):  # each pair raises the lower (as max())
            j = by_id.get(candidate.previous_id) if candidate.previous_id else None
            if j is not None:
                carried = (reply if lines[j][0] else neighbour) * own[j]
                if carried > final[i]:
                    final[i] = carried
                carried = neighbour * own[i]
                if carried > final[j]:
                    final[j] = carried
        if w.assistant < 1.0:
            final = [
                v * w.assistant if _by_assistant(c, line[1]) else v
                for c, line, v in zip(candidates, lines, final, strict=True)
            ]
        if not asks_about_past(query):
            final = [
                v if c.current else v * SUPERSEDED for c, v in zip(candidates, final, strict=True)
            ]
        speakers = (
            [
                None if c.message_id is None else line[1]
                for c, line in zip(candidates, lines, strict=True)
            ]
            if w.speaker
            else []
        )
        named = named_speakers(query, speakers)
        if named:
            kept, spared = 1.0 - w.speaker, {None, *named}
            final = [v if s in spared else v * kept for s, v in zip(speakers, final, strict=True)]
        top = max(final) or 1.0
        for candidate, value in zip(candidates, final, strict=True):
            candidate.relevance = (0.0 if value < 0.0 else value) / top  # max(value, 0.0)

    def above_floor(
        self, query: str, candidates: Sequence[Candidate], room: int | None = None
    ) -> list[Candidate]:
        """The candidates with enough evidence to be offered (``floor``).

        With the floor on, sets each candidate's ``keywords`` (:func:`_set_keywords`) and
        keeps those with absolute evidence: the similarity reaches ``floor.similarity``,
        the ``keywords`` reach ``floor.keywords``, the memory falls in a time the query
        names ("in March 2025"), or (``floor.neighbours``) the message right before or
        after it in its session passes on similarity or keywords. When those hold more
        than ``room`` tokens (or ``room`` is None), only the ones whose ``relevance`` (set
        by :meth:`rank_relevance`) reaches ``floor.relevance`` stay: the relevance is
        relative to the pool, which tells the strong evidence from the weak only when the
        pool is larger than the context. With the floor off, all are kept.
        """
        floor = self.settings.floor
        if not floor.enabled:
            return list(candidates)
        _set_keywords(query, candidates)
        windows = windows_named(query, candidates)
        similar, matching = floor.similarity, floor.keywords
        passed = {  # on their own evidence
            id(c)
            for c in candidates
            if (c.similarity is not None and c.similarity >= similar) or c.keywords >= matching
        }
        kept = set(passed)
        if windows:  # in a time the query names
            kept.update(id(c) for c in candidates if within(c.timestamp, windows))
        if floor.neighbours:
            by_id = {c.message_id: c for c in candidates if c.message_id}
            for candidate in candidates:
                before = by_id.get(candidate.previous_id) if candidate.previous_id else None
                if before is not None and id(before) in passed:
                    kept.add(id(candidate))
                if before is not None and id(candidate) in passed:
                    kept.add(id(before))
        passing = [c for c in candidates if id(c) in kept]
        if room is not None and not self._exceeds(passing, room):
            return passing
        return [c for c in passing if c.relevance >= floor.relevance]

    def _exceeds(self, candidates: Sequence[Candidate], room: int) -> bool:
        """Whether the lines of ``candidates`` take more than ``room`` tokens (counted
        until they do)."""
        used = 0
        for candidate in candidates:
            used += self.line_tokens(candidate)
            if used > room:
                return True
        return False

    def score(self, candidate: Candidate, newest: datetime | None) -> float:
        """``w_sim * relevance + w_rec * recency + w_imp * importance`` (weights sum to 1).

        ``relevance`` is in [0, 1] (fused search rank); ``recency`` is
        ``0.5 ** (age_days / half_life)`` with age measured from the user's newest
        memory, so importing an old history does not make all of it "old".
        """
        w = self.settings.weights
        total = w.similarity + w.recency + w.importance
        recency = 0.0
        if candidate.timestamp is not None and newest is not None:
            age_days = max((newest - candidate.timestamp).total_seconds(), 0.0) / 86400
            recency = 0.5 ** (age_days / self.settings.recency_half_life_days)
        value = (
            w.similarity * candidate.relevance
            + w.recency * recency
            + w.importance * candidate.importance
        )
        return value / total

    def plan(
        self,
        query: str,
        *,
        max_tokens: int | None = None,
        recent: Sequence[Message] = (),
        candidates: Sequence[Candidate] = (),
        summary: str | None = None,
        synopsis: str | None = None,
        rerank: Rerank | None = None,
    ) -> Context:
        """Build the context: sections in the configured order, within ``max_tokens``
        (``rerank``: a second stage that rescores the best candidates)."""
        budget = self.settings.max_tokens if max_tokens is None else max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidSizeError("max_tokens", f"must be an int >= 1, got {budget!r}")
        shares = self.settings.shares.model_dump()
        left = budget - _REPLY_PRIMING
        parts: dict[Section, _Part] = {}
        notes: tuple[tuple[Section, str | None], ...] = (
            ("synopsis", synopsis),
            ("summary", summary),
        )
        for section, text in notes:
            if text:
                cap = min(left, int(budget * shares.get(section, 0.0)))
                parts[section] = self._note(section, text, cap)
                left -= parts[section].tokens
        cap = min(left, int(budget * shares.get("recent", 0.0)))
        parts["recent"] = self._recent(recent, cap)
        left -= parts["recent"].tokens
        kept = len(parts["recent"].items)
        shown = recent[len(recent) - kept :] if kept else []
        recent_keys = {folded(m.text) for m in shown} | {folded(transcript_line(m)) for m in shown}
        recent_ids = {m.message_id for m in shown}
        notes_shown = substrings(" ".join(i.content for p in parts.values() for i in p.items))
        fresh = [
            c
            for c in candidates
            if not c.passages  # a long message: its passages stand for it
            and c.key not in recent_keys
            and (c.excerpt is None or c.excerpt.message_id not in recent_ids)
            and not notes_shown.hold(c.content.strip(" ."))
        ]
        self.rank_relevance(query, fresh)
        if rerank is not None:
            _rescore(query, fresh, rerank)
        cap = min(left, int(budget * shares.get("retrieved", 1.0)))
        parts["retrieved"] = self._retrieved(
            query,
            self.above_floor(query, fresh, cap),
            cap,
            self._standing(query, fresh),
            not asks_order(query),
        )
        ordered = [parts[section] for section in self.settings.order if section in parts]
        messages = [m for part in ordered for m in part.messages]
        items = [i for part in ordered for i in part.items]
        total = sum(part.tokens for part in ordered) + (_REPLY_PRIMING if messages else 0)
        return Context(messages, items, total, budget, query)

    # -- sections ---------------------------------------------------------------------

    def _note(self, section: Section, text: str, cap: int) -> _Part:
        message = (
            summary_message(text)
            if section == "summary"
            else {"role": "system", "content": f"{SYNOPSIS_HEADER}\n{text}"}
        )
        tokens = self._tokens(message)
        if tokens > cap:
            return _Part()
        return _Part([message], [ContextItem(section, section, text, 1.0, tokens)], tokens)

    def _recent(self, recent: Sequence[Message], cap: int) -> _Part:
        kept = newest_within(recent, self.counter, cap)
        items = [
            ContextItem(
                "recent",
                "buffer",
                m.text,
                1.0,
                self.counter.count_message(m),
                m.timestamp,
                message_id=m.message_id,
            )
            for m in kept
        ]
        return _Part([m.to_openai() for m in kept], items, sum(i.tokens for i in items))

    def _standing(self, query: str, candidates: Sequence[Candidate]) -> list[Candidate]:
        """What to offer first: the user's standing instructions and preferences, the
        nearest ``standing`` whose similarity reaches ``standing_similarity``; and, when
        the query asks for a summary, the session summaries found for it."""
        least = self.settings.standing_similarity
        pinned = sorted(
            (c for c in candidates if c.standing and c.similarity is not None),
            key=lambda c: -(c.similarity or 0.0),
        )
        found = [c for c in pinned if c.kind != "summary" and (c.similarity or 0.0) >= least]
        summaries = [c for c in pinned if c.kind == "summary"] if asks_summary(query) else []
        return found[: self.settings.standing] + summaries

    def _retrieved(
        self,
        query: str,
        candidates: Sequence[Candidate],
        cap: int,
        first: Sequence[Candidate] = (),
        newest_first: bool = False,
    ) -> _Part:
        """The best memories within ``cap``, rendered as one message (newest date first
        unless the query asks about order or time); ``first`` (the standing
        instructions that apply) are offered before the others.

        Lines are first counted one by one, each with its newline; tokens can still merge
        across lines, so the exact count of what was taken decides whether more lines fit,
        until none does.
        """
        newest = max((c.timestamp for c in candidates if c.timestamp), default=None)
        for candidate in (*candidates, *first):
            candidate.score = self.score(candidate, newest)
        ranked = sorted(candidates, key=lambda c: -c.score)
        selection = _Selection(self, newest_first)
        header = used = self._tokens({"role": "system", "content": _header(newest_first)})
        for candidate in first:
            used += selection.offer(candidate, cap - used) or 0
        waiting = self._offer_ranked(ranked, selection, used, cap)
        part = self._fit_rendered(query, selection, cap)
        while waiting and cap - part.tokens >= _MIN_LINE_TOKENS:
            used, left = part.tokens or header, []
            for candidate in waiting:
                cost = selection.offer(candidate, cap - used)
                if cost is None:
                    left.append(candidate)
                else:
                    used += cost
            if len(left) == len(waiting):
                break
            waiting = left
            part = self._fit_rendered(query, selection, cap)
        return part

    def _offer_ranked(
        self, ranked: list[Candidate], selection: _Selection, used: int, cap: int
    ) -> list[Candidate]:
        """Offer ``ranked`` best first by marginal relevance, a stretch at a time that
        holds :data:`POOL_ROOMS` times the room left, until the room is filled: the
        candidates of the stretches offered that were not taken (offered again once the
        rendered count is known). The rest of a pool of hundreds is never reached, and
        offering it cost more than all else in a context."""
        start = 0
        while start < len(ranked) and cap - used >= _MIN_LINE_TOKENS:
            end, room, costs = start, POOL_ROOMS * (cap - used), []
            while end < len(ranked) and room >= 0:
                costs.append(selection.line(ranked[end]))
                room -= costs[-1]
                end += 1
            stretch, start = ranked[start:end], end
            if min(costs) > cap - used:  # the tail of a full context: none of it fits
                continue
            order = MarginalRelevance(stretch, self.settings.diversity, selection.chosen, costs)
            while cap - used >= _MIN_LINE_TOKENS:
                candidate = order.best(cap - used)
                if candidate is None:
                    break
                used += selection.offer(candidate, cap - used) or 0
        taken = {id(c) for c in selection.chosen}
        return [c for c in ranked[:start] if id(c) not in taken]

    def _fit_rendered(self, query: str, selection: _Selection, cap: int) -> _Part:
        """The chosen memories as one message within ``cap`` (dropping the lowest scored
        in the rare case that token merges at line joins push it over)."""
        while selection.chosen:
            chosen = selection.shown()
            _set_keywords(query, chosen)
            lines = _render(chosen, selection.newest_first)
            message = {"role": "system", "content": "\n".join(lines)}
            tokens = self._lines_tokens(lines, message, chosen)
            if tokens <= cap:
                items = [
                    ContextItem(
                        "retrieved",
                        c.source,
                        c.content,
                        c.score,
                        selection.costs[id(c)],
                        c.timestamp,
                        c.memory_id,
                        c.similarity,
                        c.keywords,
                        c.sources,
                        c.excerpt.message_id if c.excerpt else c.message_id,
                        (c.excerpt.start, c.excerpt.end) if c.excerpt else None,
                    )
                    for c in chosen
                ]
                return _Part([message], items, tokens)
            selection.chosen.remove(min(chosen, key=lambda c: c.score))
        return _Part()

    def line_tokens(self, candidate: Candidate) -> int:
        """Tokens of ``candidate``'s line with its newline ("!\\n" is often one token):
        counted when it was indexed, if by this counter, else counted now."""
        stored = self._stored(candidate)
        return self._count(candidate.content + "\n") if stored is None else stored

    def _stored(self, candidate: Candidate) -> int | None:
        """The tokens of ``candidate``'s line counted when it was indexed, if by this
        counter."""
        counted = candidate.counted
        return counted[1] if counted is not None and counted[0] == self.counter.name else None

    def _count(self, text: str) -> int:
        """Tokens of ``text``, cached: the same memories come back query after query."""
        tokens = self._counts.get(text)
        if tokens is None:
            if len(self._counts) >= _COUNT_CACHE:
                self._counts.clear()
            tokens = self._counts[text] = self.counter.count(text)
        return tokens

    def _tokens(self, message: dict[str, Any]) -> int:
        return self.counter.count_message(Message.from_openai(message))

    def _lines_tokens(
        self, lines: list[str], message: dict[str, Any], shown: Sequence[Candidate] = ()
    ) -> int:
        """:meth:`_tokens` of ``message``, a system message of ``lines``: from the lines'
        cached counts when the counter can (``count_lines_message``), the lines of the
        ``shown`` memories counted when they were indexed given to it first."""
        count = getattr(self.counter, "count_lines_message", None)
        if count is None:
            return self._tokens(message)
        if self._remember is not None:
            for candidate in shown:
                stored = self._stored(candidate)
                if stored is not None:
                    self._remember(candidate.content + "\n", stored)
        return int(count(lines))


_REPLY_PRIMING = 3  # OpenAI adds 3 tokens that prime the reply
SUPERSEDED = 0.5
"""The share of its relevance a superseded fact keeps when the query is not about the past."""
_MIN_LINE_TOKENS = 4  # no memory line is cheaper: stop filling below this
POOL_ROOMS = 3
"""Candidates are offered a stretch at a time that holds this many times the room left
(2 left out 0.01 of BEAM's evidence at 2,000 tokens; 3 none, and plans in half the time)."""
_COUNT_CACHE = 100_000


def _rescore(query: str, candidates: Sequence[Candidate], rerank: Rerank) -> None:
    """The best ``rerank.top_n`` candidates' relevance from the second stage."""
    best = sorted(candidates, key=lambda c: -c.relevance)[: rerank.top_n]
    if best:
        relevance = [c.relevance for c in best]
        new = rerank.rescore(query, [c.content for c in best], relevance)
        for candidate, value in zip(best, new, strict=True):
            candidate.relevance = value


def _set_keywords(query: str, candidates: Sequence[Candidate]) -> None:
    """Set each candidate's ``keywords``: the share of the query's keywords it holds,
    words compared by their first five letters (for the floor, and the items shown)."""
    wanted = len(query_stems(query))
    counts = keyword_counts(query, [c.content for c in candidates])
    for candidate, found in zip(candidates, counts, strict=True):
        candidate.keywords = found / wanted if wanted else 0.0


def _by_assistant(candidate: Candidate, speaker: str | None) -> bool:
    """Whether the assistant said ``candidate`` (a passage names its message's speaker;
    a message line starts with it, ``speaker``)."""
    said = candidate.excerpt.speaker if candidate.excerpt is not None else speaker
    return said == "assistant"


_MONTHS = tuple(datetime(2000, month, 1).strftime("%B") for month in range(1, 13))


def _date_label(timestamp: datetime | None) -> str:
    if timestamp is None:
        return "[undated]"
    return f"[{timestamp.day} {_MONTHS[timestamp.month - 1]} {timestamp.year}]"


def excerpt_header(excerpt: Excerpt) -> str:
    """The line above the passages shown of one long message: who said it, and the id
    that ``get_message`` takes to read it whole."""
    return f"{excerpt.speaker} (excerpt of message {excerpt.message_id}):"


EXCERPT_JOIN = 4
"""Characters (whitespace) between two shown spans of a message read as no gap."""
EXCERPT_GAP = "[...]"
"""The line between two passages of one message that are not next to each other."""


def _render(chosen: list[Candidate], newest_first: bool = False) -> list[str]:
    """The lines of the retrieved section: the header, then the memories under their
    dates, oldest first (or, with ``newest_first``, the newest first: a statement that
    updates an earlier one comes before it); the passages of one long message
    together, in their order, under one :func:`excerpt_header` (:data:`EXCERPT_GAP`
    where passages between them are left out)."""
    epoch = datetime.min.replace(tzinfo=timezone.utc)

    def order(c: Candidate) -> tuple[datetime, str, int]:
        at = _aware(c.timestamp) or epoch
        return (at, c.excerpt.message_id, c.excerpt.start) if c.excerpt else (at, c.key, 0)

    ranked = sorted(chosen, key=order)
    if newest_first:  # the newest message first; a message's passages in their order
        said: dict[tuple[datetime, str], list[Candidate]] = {}
        for candidate in ranked:
            key = order(candidate)
            said.setdefault((key[0], key[1] if candidate.excerpt else ""), []).append(candidate)
        ranked = [c for lines in reversed(said.values()) for c in lines]
    lines = [_header(newest_first)]
    last = None
    shown: Excerpt | None = None  # the passage just rendered
    for candidate in ranked:
        date = _date_label(candidate.timestamp)
        if date != last:
            lines.append(date)
            last = date
        excerpt = candidate.excerpt
        if excerpt is not None:
            if shown is None or shown.message_id != excerpt.message_id:
                lines.append(excerpt_header(excerpt))
            elif excerpt.start > shown.end + EXCERPT_JOIN:
                lines.append(EXCERPT_GAP)
        shown = excerpt
        lines.append(candidate.content)
    return lines


def _header(newest_first: bool) -> str:
    return NEWEST_FIRST_HEADER if newest_first else RETRIEVED_HEADER


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=timezone.utc)
