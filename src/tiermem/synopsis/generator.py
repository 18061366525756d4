"""How a synopsis is written: by an LLM, or offline from the user's memories."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.breaker import aguarded, guarded
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.llm.base import LLM
from tiermem.llm.factory import get_llm
from tiermem.stores.records import calculate_importance
from tiermem.text import FILLER_WORDS, STEM_LETTERS, term_set
from tiermem.types.checks import check_user_id
from tiermem.types.records import MemoryRecord, utcnow
from tiermem.types.synopsis import CONTEXT_TYPES, IDENTITY_TYPES, TIERS, Synopsis

log = logging.getLogger(__name__)

SYSTEM_PROMPT = "You write short, factual user profiles for an AI assistant's memory."

PROMPT = (
    "Create a user profile from these memories. Answer with exactly two sections:\n"
    "IDENTITY: who the user is - name, preferences, traits (stable facts).\n"
    "CONTEXT: what the user is doing now - recent topics, current goals.\n"
    "Use only what the memories say; write 'unknown' for a section with nothing to say. "
    "Keep each section under {max_words} words.\n\n"
    "Facts and preferences (most important first):\n{identity}\n\n"
    "Recent activity (newest first):\n{context}"
)
"""The generator's prompt; ``{identity}`` and ``{context}`` are lists of memories."""

_HEADER = re.compile(
    r"^[ \t>#*_\-]*(?:\d+[.)][ \t]*)?[*_]*[ \t]*(identity|context)[ \t]*[*_]*[ \t]*"
    r"(?::|-|–|—|$)[ \t*_]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_FENCE = re.compile(r"^```[a-z]*\s*$", re.IGNORECASE | re.MULTILINE)
_NAME_STATEMENT = re.compile(r"\b(name is|named|called|i am [A-Z]|i'm [A-Z])", re.IGNORECASE)
_ITEM_CHARS = 300


class SynopsisGenerator:
    """Writes a :class:`Synopsis` from a user's memories.

    Offline (no LLM, or the LLM failed or answered without the two sections): the
    identity tier lists the user's facts and preferences by seed 001's importance score
    (statements of the user's name first); the context tier lists the newest context,
    summary and message memories. Deterministic for a given list of memories.

    Args:
        llm: an :class:`~tiermem.llm.LLM`, a model string such as ``"openai/gpt-4o-mini"``,
            or None for offline only.
        max_items: memories used per tier (in the prompt and offline).
        max_chars: longest text of one tier; longer text is cut at a word boundary.
        **options: passed to every LLM call (``temperature``, ``max_tokens``, ...).
    """

    def __init__(
        self,
        llm: LLM | str | None = None,
        *,
        max_items: int = 10,
        max_chars: int = 800,
        **options: Any,
    ) -> None:
        if isinstance(llm, str):
            llm = get_llm(llm)
        if llm is not None and not isinstance(llm, LLM):
            raise InvalidTypeError(
                "llm", f"{type(llm).__name__} is not an LLM", "pass get_llm('openai/gpt-4o-mini')"
            )
        for name, value, minimum in (("max_items", max_items, 1), ("max_chars", max_chars, 40)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise InvalidSizeError(name, f"must be an int >= {minimum}, got {value!r}")
        self.llm = llm
        self.max_items = max_items
        self.max_chars = max_chars
        self.options = options

    @stepped
    def generate(self, user_id: str, memories: Sequence[MemoryRecord]) -> Steps[Synopsis]:
        """The user's synopsis; never raises because of the LLM (falls back offline).

        The LLM is called behind its circuit breaker (:func:`tiermem.breaker.breaker_for`):
        after a few failures in a row it is skipped for a cool-down, so the synopsis is
        offline at once (and cached briefly: the service asks the LLM again later).
        """
        user_id, records = self._inputs(user_id, memories)
        if self.llm is None or not records:
            return self.offline(user_id, records)
        messages = self.messages(records)
        try:  # behind the model's breaker: while it is open, offline at once
            answer = yield messages
        except Exception as exc:  # any provider failure degrades to offline
            return self._fallback(user_id, records, _failure(exc))
        return self._from_answer(user_id, records, answer)

    agenerate = stepped_twin(generate)

    def _step(self, messages: list[dict[str, str]], /) -> str:
        """The LLM's answer to ``messages`` (:meth:`generate`'s one wait), through its
        breaker."""
        llm = self.llm
        assert llm is not None
        return guarded(llm, lambda: llm.complete(messages, **self.options)).text

    async def _astep(self, messages: list[dict[str, str]], /) -> str:
        llm = self.llm
        assert llm is not None
        return (await aguarded(llm, lambda: llm.acomplete(messages, **self.options))).text

    def offline(self, user_id: str, memories: Sequence[MemoryRecord]) -> Synopsis:
        """The deterministic synopsis, without an LLM."""
        user_id, records = self._inputs(user_id, memories)
        identity, context = self.select(records)
        return Synopsis(
            user_id=user_id,
            identity=_grouped(identity, self.max_chars),
            context=_grouped(context, self.max_chars),
            generated_at=utcnow(),
            source="offline",
        )

    def select(
        self, memories: Sequence[MemoryRecord]
    ) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
        """The memories each tier uses: (identity, context), at most ``max_items`` each.

        Identity: facts and preferences, name statements first, then by
        :func:`~tiermem.stores.records.calculate_importance` measured at the newest memory's
        time. Context: context memories, then summaries, then messages, newest first.
        Duplicates (same text ignoring case and spacing) and near-duplicates (the same
        content words, or one more: :func:`near_duplicates`) count once.
        """
        now = max((m.created_at for m in memories), default=utcnow())

        def identity_key(m: MemoryRecord) -> tuple[bool, float, float, str]:
            unnamed = _NAME_STATEMENT.search(m.content) is None
            score = calculate_importance(m, now=now)
            return (unnamed, -score, -m.created_at.timestamp(), m.content)

        def context_key(m: MemoryRecord) -> tuple[int, float, str]:
            return (CONTEXT_TYPES.index(m.memory_type), -m.created_at.timestamp(), m.content)

        identity = sorted(
            (m for m in memories if m.memory_type in IDENTITY_TYPES), key=identity_key
        )
        context = sorted((m for m in memories if m.memory_type in CONTEXT_TYPES), key=context_key)
        return _unique(identity, self.max_items), _unique(context, self.max_items)

    def messages(self, memories: Sequence[MemoryRecord]) -> list[dict[str, str]]:
        """The chat messages sent to the LLM (useful to inspect or log)."""
        identity, context = self.select(memories)
        prompt = PROMPT.format(
            max_words=max(20, self.max_chars // 6),
            identity=_bullets(identity),
            context=_bullets(context),
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]

    def _inputs(
        self, user_id: str, memories: Sequence[MemoryRecord]
    ) -> tuple[str, list[MemoryRecord]]:
        """Validate; keep only the user's own records (another user's never leak in)."""
        user_id = check_user_id(user_id)
        if isinstance(memories, (str, bytes)) or not isinstance(memories, Sequence):
            raise InvalidTypeError(
                "memories", f"expected a list of MemoryRecord, got {type(memories).__name__}"
            )
        for i, memory in enumerate(memories):
            if not isinstance(memory, MemoryRecord):
                raise InvalidTypeError(
                    f"memories[{i}]", f"expected a MemoryRecord, got {type(memory).__name__}"
                )
        return user_id, [m for m in memories if m.user_id == user_id]

    def _from_answer(self, user_id: str, records: list[MemoryRecord], answer: str) -> Synopsis:
        sections = parse_sections(answer)
        if sections is None:
            why = f"the LLM answer ({len(answer)} characters) lacks IDENTITY or CONTEXT"
            return self._fallback(user_id, records, why)
        identity, context = sections
        return Synopsis(
            user_id=user_id,
            identity=self._bounded(identity),
            context=self._bounded(context),
            generated_at=utcnow(),
            source="llm",
        )

    def _fallback(self, user_id: str, records: list[MemoryRecord], why: str) -> Synopsis:
        # while the model's breaker is open, each synopsis says so at debug level only
        level = logging.DEBUG if "CircuitOpenError" in why else logging.WARNING
        log.log(level, "synopsis for a user falls back to offline: %s", why)
        return self.offline(user_id, records)

    def _bounded(self, text: str) -> str:
        return _cut(text.strip(), self.max_chars)


def _failure(exc: Exception) -> str:
    return f"the LLM call failed ({type(exc).__name__}: {str(exc)[:200]})"


def parse_sections(answer: str) -> tuple[str, str] | None:
    """``(identity, context)`` from an LLM answer, or None if either section is missing.

    Accepts ``IDENTITY: ...`` / ``## Identity`` / ``**Identity:**`` headers in any case and
    order, code fences, and a JSON object with ``identity`` and ``context`` strings.
    A section that says only "unknown" or "none" becomes empty.
    """
    if not isinstance(answer, str):
        return None
    text = _FENCE.sub("", answer).strip()
    found = _json_sections(text) or _header_sections(text)
    if found is None:
        return None
    identity, context = (_blank_unknown(s) for s in found)
    return None if not identity and not context else (identity, context)


def _json_sections(text: str) -> tuple[str, str] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    identity, context = lowered.get("identity"), lowered.get("context")
    if not isinstance(identity, str) or not isinstance(context, str):
        return None
    return identity, context


def _header_sections(text: str) -> tuple[str, str] | None:
    starts: dict[str, re.Match[str]] = {}
    for match in _HEADER.finditer(text):
        starts.setdefault(match.group(1).lower(), match)
    if set(starts) != set(TIERS):
        return None
    ordered = sorted(starts.items(), key=lambda item: item[1].start())
    bodies: dict[str, str] = {}
    for i, (name, match) in enumerate(ordered):
        end = ordered[i + 1][1].start() if i + 1 < len(ordered) else len(text)
        bodies[name] = (match.group(2) + text[match.end() : end]).strip()
    return bodies["identity"], bodies["context"]


def _blank_unknown(text: str) -> str:
    text = re.sub(r"\n{3,}", "\n\n", text.strip())
    return "" if text.strip(" .*_()[]").lower() in {"", "unknown", "none", "n/a"} else text


_NEGATIONS = frozenset({"no", "not", "nor", "never", "t"})  # "t": the end of "don't"
"""Words a gist keeps although they are filler: "Likes tea" and "Does not like tea"
must stay two memories."""


def gist(text: str) -> frozenset[str]:
    """The stems of ``text``'s content words (stop words and filler left out, negations
    kept): "I prefer tea over coffee" and "Prefers tea to coffee." share theirs."""
    return frozenset(
        term[:STEM_LETTERS]
        for term in term_set(text)
        if term not in FILLER_WORDS or term in _NEGATIONS
    )


def near_duplicates(first: frozenset[str], second: frozenset[str]) -> bool:
    """Whether two gists say the same thing: equal, or one is the other plus one word
    that is neither a negation nor a number ("Ana prefers tea to coffee" and "Prefers tea
    over coffee"), with at least three words in common."""
    if not first or not second:
        return False
    if first == second:
        return True
    small, large = sorted((first, second), key=len)
    extra = large - small
    return (
        small < large
        and len(small) >= 3
        and len(extra) == 1
        and not any(t in _NEGATIONS or t[0].isdigit() for t in extra)
    )


def _unique(memories: list[MemoryRecord], limit: int) -> list[MemoryRecord]:
    """``memories`` in order, each said once: the same text (ignoring case and spacing)
    or a near-duplicate (:func:`near_duplicates`) counts once, at the place of the first
    and in the longer of the two wordings."""
    seen: set[str] = set()
    out: list[MemoryRecord] = []
    gists: list[frozenset[str]] = []
    for memory in memories:
        norm = " ".join(memory.content.lower().split()).strip(" .!")
        if not norm or norm in seen:
            continue
        seen.add(norm)
        this = gist(memory.content)
        twin = next((i for i, g in enumerate(gists) if near_duplicates(g, this)), None)
        if twin is not None:
            if len(this) > len(gists[twin]):  # the more specific wording, in the first's place
                out[twin], gists[twin] = memory, this
            continue
        if len(out) == limit:
            break
        out.append(memory)
        gists.append(this)
    return out


def _clean(text: str, limit: int = _ITEM_CHARS) -> str:
    return _cut(" ".join(text.split()), limit)


def _bullets(memories: list[MemoryRecord]) -> str:
    if not memories:
        return "- (none)"
    return "\n".join(
        f"- [{m.memory_type}, {m.created_at.date().isoformat()}] {_clean(m.content)}"
        for m in memories
    )


_LABELS = {
    "fact": "Facts",
    "preference": "Preferences",
    "context": "Goals",
    "summary": "Recent topics",
    "message": "Recently said",
}


def _grouped(memories: list[MemoryRecord], limit: int) -> str:
    """One line per memory type, ``Label: item; item``, in first-appearance order.

    Items are taken in rank order while the text fits in ``limit`` characters; each
    item is cut to a quarter of the limit so one long memory cannot crowd out the rest.
    """
    groups: dict[str, list[str]] = {}
    text = ""
    for memory in memories:
        item = _clean(memory.content, max(40, limit // 4)).rstrip(" .;")
        groups.setdefault(memory.memory_type, []).append(item)
        candidate = _render_groups(groups)
        if len(candidate) > limit:
            groups[memory.memory_type].pop()
            break
        text = candidate
    return text


def _render_groups(groups: dict[str, list[str]]) -> str:
    return "\n".join(
        f"{_LABELS[kind]}: {'; '.join(items)}." for kind, items in groups.items() if items
    )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;.") + "…"
