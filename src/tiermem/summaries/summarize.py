"""Summarizers: turn the messages that leave the buffer into a running summary.

Two implementations of one :class:`Summarizer` protocol:

* :class:`MemorySummarizer` asks an LLM, with the seed's prompt by default, and
  merges new messages into the previous summary when one is given. Its calls go
  through the model's circuit breaker (:func:`tiermem.breaker.breaker_for`): while it
  is open they raise :class:`~tiermem.breaker.CircuitOpenError` at once, and the
  buffer's pipeline and the store worker summarize with the offline summarizer instead.
* :class:`ExtractiveSummarizer` needs no model: it keeps the most informative
  sentences (names, numbers, dates, preferences, first-person facts) within a
  token or character budget. Deterministic, offline, and the fallback when an
  LLM fails.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.breaker import CircuitBreaker, aguarded, breaker_for, guarded
from tiermem.errors import ConfigError, InvalidSizeError, InvalidTypeError
from tiermem.llm.base import LLM
from tiermem.llm.factory import get_llm
from tiermem.text import FILLER_WORDS, sentences, words
from tiermem.tokens import CountsTokens, get_token_counter

MessageLike = Mapping[str, Any] | Any
"""A dict with ``role`` and ``content`` (``name`` optional) or an object with those attributes."""

DEFAULT_TEMPLATE = (
    "Summarize the following conversation concisely, "
    "focusing on key facts and important information:\n\n{conversation}"
)
"""Seed 000's prompt; ``{conversation}`` becomes one ``Role: content`` line per message."""

DEFAULT_MERGE_TEMPLATE = (
    "Here is a summary of the conversation so far:\n{summary}\n\n"
    "Update it with the new messages below. Keep every key fact from both "
    "(names, numbers, dates, preferences, decisions) and stay concise. "
    "Answer with the updated summary only.\n\n{conversation}"
)
"""Used when a previous summary exists, so the summary accumulates instead of being replaced."""


@runtime_checkable
class Summarizer(Protocol):
    """Summarizes messages, merging them into ``previous_summary`` when given."""

    def summarize(
        self, messages: Sequence[MessageLike], previous_summary: str | None = None
    ) -> str: ...

    async def asummarize(
        self, messages: Sequence[MessageLike], previous_summary: str | None = None
    ) -> str: ...


@runtime_checkable
class _Generates(Protocol):
    """The seed's model interface: ``generate(prompt) -> str``."""

    def generate(self, prompt: str) -> str: ...


# -- message rendering -----------------------------------------------------------------


def message_lines(messages: Sequence[MessageLike]) -> list[tuple[str, str]]:
    """``(label, text)`` per message; the label is the name if any, else the role in title case.

    Raises:
        InvalidTypeError: ``messages`` is not a list, or an item has no role.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(
            "messages", f"expected a list of messages, got {type(messages).__name__}"
        )
    out = []
    for i, message in enumerate(messages):
        if isinstance(message, Mapping):
            role, content, name = message.get("role"), message.get("content"), message.get("name")
        else:
            role = getattr(message, "role", None)
            content = getattr(message, "content", None)
            name = getattr(message, "name", None)
        if not isinstance(role, str) or not role:
            raise InvalidTypeError(f"messages[{i}].role", f"expected a non-empty str, got {role!r}")
        out.append((str(name) if name else role.title(), _text(content)))
    return out


def _text(content: Any) -> str:
    """Content as plain text: strings as is, text parts joined, None as empty."""
    if content is None:
        return ""
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        ).strip()
    return str(content)


def render_conversation(messages: Sequence[MessageLike]) -> str:
    """The seed's transcript: ``Role: content`` lines, each ending in a newline."""
    return "".join(f"{label}: {text}\n" for label, text in message_lines(messages))


# -- the LLM summarizer ----------------------------------------------------------------


class MemorySummarizer:
    """Summarizes with an LLM (seed 000's ``MemorySummarizer``).

    Args:
        model: an :class:`~tiermem.llm.LLM`, a model string for
            :func:`~tiermem.llm.get_llm` (``"openai/gpt-4o-mini"``), or any object
            with ``generate(prompt) -> str``.
        template: prompt for a first summary; must contain ``{conversation}``.
        merge_template: prompt when a previous summary exists; must contain
            ``{summary}`` and ``{conversation}``. Literal braces are written ``{{ }}``.
        **options: passed to every ``complete`` call (``temperature``, ``max_tokens``).
    """

    def __init__(
        self,
        model: LLM | str | Any,
        template: str = DEFAULT_TEMPLATE,
        merge_template: str = DEFAULT_MERGE_TEMPLATE,
        **options: Any,
    ) -> None:
        _check_template("template", template, ("conversation",))
        _check_template("merge_template", merge_template, ("summary", "conversation"))
        if isinstance(model, str):
            model = get_llm(model)
        if not isinstance(model, (LLM, _Generates)):
            raise InvalidTypeError(
                "model",
                f"{type(model).__name__} has neither complete() nor generate()",
                "pass an LLM, a model string like 'openai/gpt-4o-mini', or an object "
                "with generate(prompt)",
            )
        self.model = model
        self.template = template
        self.merge_template = merge_template
        self.options = options

    @property
    def breaker(self) -> CircuitBreaker:
        """The model's circuit breaker (shared with every other use of the model)."""
        return breaker_for(self.model)

    def prompt(self, messages: Sequence[MessageLike], previous_summary: str | None = None) -> str:
        """The prompt sent to the model (useful to inspect or log)."""
        conversation = render_conversation(messages)
        if previous_summary:
            return self.merge_template.format(summary=previous_summary, conversation=conversation)
        return self.template.format(conversation=conversation)

    @stepped
    def summarize(
        self, messages: Sequence[MessageLike], previous_summary: str | None = None
    ) -> Steps[str]:
        """Summarize ``messages``, merged into ``previous_summary`` when given.

        Raises:
            CircuitOpenError: the model failed several times in a row and rests (no call
                was made); the model's own error otherwise.
        """
        if not messages:
            return previous_summary or ""
        return cast(str, (yield self.prompt(messages, previous_summary)))

    asummarize = stepped_twin(summarize)

    def _step(self, prompt: str, /) -> str:
        """The model's answer to ``prompt`` (:meth:`summarize`'s one wait), through its
        breaker."""
        model = self.model
        if isinstance(model, LLM):
            return guarded(model, lambda: model.complete(prompt, **self.options)).text.strip()
        return str(guarded(model, lambda: model.generate(prompt))).strip()

    async def _astep(self, prompt: str, /) -> str:
        """:meth:`_step` awaited (a sync-only model runs in a thread)."""
        model = self.model
        if not isinstance(model, LLM):
            return await asyncio.to_thread(self._step, prompt)
        answer = await aguarded(model, lambda: model.acomplete(prompt, **self.options))
        return answer.text.strip()


def _check_template(field: str, template: str, names: tuple[str, ...]) -> None:
    if not isinstance(template, str):
        raise InvalidTypeError(field, f"expected str, got {type(template).__name__}")
    try:
        template.format(**{name: "" for name in names})
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            field,
            f"cannot be formatted ({exc!r})",
            f"use only the placeholders {', '.join('{' + n + '}' for n in names)}; "
            "write literal braces as {{ }}",
        ) from exc
    for name in names:
        if "{" + name + "}" not in template:
            raise ConfigError(field, f"lacks the {{{name}}} placeholder")


# -- the extractive summarizer ---------------------------------------------------------

_NUMBER_TEXT = (
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty "
    "fifty hundred thousand million dozen first second third half"
)
_NUMBER_WORDS = frozenset(_NUMBER_TEXT.split())
_TIME_WORDS = re.compile(
    r"\b(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|today|"
    r"tonight|tomorrow|weekend|week|month|year|years|ago|last|next|since|birthday|morning|"
    r"evening|summer|winter|spring|autumn|fall)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(i|we)(\s+\w+ly)?\s+(like|love|loved|enjoy|enjoyed|prefer|hate|hated|dislike|adore|"
    r"want|wanted|need|can't stand|am into|am allergic)\b|\bmy fav(ou)?rite\b|\ballergic\b",
    re.IGNORECASE,
)
_FIRST_PERSON_FACT = re.compile(
    r"\b(i am|i'm|i was|i have|i've|i had|i got|i went|i started|i finished|i made|i work|"
    r"i live|i moved|i bought|i joined|i took|i plan|i'm planning|i decided|we went|we got|"
    r"we have|my \w+)\b",
    re.IGNORECASE,
)
_LABELLED = re.compile(r"^([^:\n]{1,40}):\s+(.+)$")
_SHORT_WORDS = 4
_DUPLICATE_OVERLAP = 0.6


@dataclass
class _Unit:
    """One candidate sentence with its speaker label and position (older = smaller)."""

    position: int
    label: str
    text: str
    score: float = 0.0
    cost: int = 0


class ExtractiveSummarizer:
    """Keeps the most informative sentences of the messages within a bounded length.

    Each sentence is scored on general signals of information: capitalized names,
    numbers and dates, preferences ("I love", "my favorite"), first-person facts
    ("I moved", "my sister"), and how specific its content words are within the
    batch; short phatic sentences and questions score low. Sentences are picked
    best first per unit of length, skipping near-duplicates, then printed in
    conversation order as ``Label: sentence`` lines. A previous summary's
    sentences compete with the new ones, so merging never exceeds the bound.

    Args:
        max_tokens: bound on the summary's length in tokens (counted by ``token_counter``).
        max_chars: bound in characters instead (used when ``max_tokens`` is None).
        token_counter: anything with ``count(text) -> int``; default the tiermem counter.
    """

    def __init__(
        self,
        max_tokens: int | None = 256,
        max_chars: int | None = None,
        token_counter: CountsTokens | None = None,
    ) -> None:
        if max_tokens is None and max_chars is None:
            raise InvalidSizeError("max_tokens", "both max_tokens and max_chars are None")
        for field, value in (("max_tokens", max_tokens), ("max_chars", max_chars)):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise InvalidSizeError(field, f"{value!r} must be a positive int")
        self.max_tokens = max_tokens
        self.max_chars = max_chars if max_tokens is None else None
        self._counter = token_counter

    @property
    def limit(self) -> int:
        """The bound, in tokens or characters."""
        return self.max_tokens if self.max_tokens is not None else int(self.max_chars or 0)

    def length(self, text: str) -> int:
        """Length of ``text`` in the summarizer's unit (tokens or characters)."""
        if self.max_tokens is None:
            return len(text)
        if self._counter is None:
            self._counter = get_token_counter()
        return int(self._counter.count(text))

    def summarize(
        self, messages: Sequence[MessageLike], previous_summary: str | None = None
    ) -> str:
        """Summary of ``previous_summary`` plus ``messages`` within the bound."""
        lines = message_lines(messages)
        if previous_summary is not None and not isinstance(previous_summary, str):
            raise InvalidTypeError(
                "previous_summary",
                f"expected str or None, got {type(previous_summary).__name__}",
            )
        units = _summary_units(previous_summary or "")
        for label, text in lines:
            units.extend(_Unit(len(units), label, s) for s in sentences(text))
        return self._select(units)

    asummarize = stepped_twin(summarize)  # in memory (pure CPU, fast): runs at once

    def _select(self, units: list[_Unit]) -> str:
        """Greedy choice by score per sqrt(length), skipping near-duplicates; then trim."""
        if not units:
            return ""
        _score(units)
        for unit in units:
            unit.cost = max(self.length(_line(unit)), 1)
        order = sorted(units, key=lambda u: (-u.score / math.sqrt(u.cost), u.position))
        chosen: list[_Unit] = []
        seen: list[set[str]] = []
        budget = self.limit
        for unit in order:
            if unit.cost > budget or unit.score <= 0:
                continue
            words = _content_words(unit.text)
            if any(_repeats(words, other) for other in seen):
                continue
            chosen.append(unit)
            seen.append(words)
            budget -= unit.cost
        if not chosen:
            return self._truncate(order[0])
        chosen.sort(key=lambda u: u.position)
        text = _render(chosen)
        while len(chosen) > 1 and self.length(text) > self.limit:
            chosen.remove(min(chosen, key=lambda u: (u.score, -u.position)))
            text = _render(chosen)
        return text if self.length(text) <= self.limit else self._truncate(chosen[0])

    def _truncate(self, unit: _Unit) -> str:
        """The best sentence cut to the bound, when no whole sentence fits."""
        words = _line(unit).split()
        while words and self.length(" ".join(words) + " …") > self.limit:
            words.pop()
        return " ".join(words) + " …" if words else ""


def _summary_units(summary: str) -> list[_Unit]:
    """Sentences of a previous summary, keeping ``Label:`` prefixes written by :func:`_render`."""
    units: list[_Unit] = []
    for line in summary.splitlines():
        match = _LABELLED.match(line.strip())
        label, body = (match.group(1), match.group(2)) if match else ("", line)
        units.extend(_Unit(len(units), label, s) for s in sentences(body))
    return units


def _line(unit: _Unit) -> str:
    return f"{unit.label}: {unit.text}" if unit.label else unit.text


def _render(units: list[_Unit]) -> str:
    """``Label: s1 s2`` lines, joining consecutive sentences of the same label."""
    lines: list[str] = []
    last_label: str | None = None
    for unit in units:
        if lines and unit.label == last_label:
            lines[-1] += " " + unit.text
        else:
            lines.append(_line(unit))
        last_label = unit.label
    return "\n".join(lines)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in words(text) if w.lower() not in FILLER_WORDS}


def _repeats(words: set[str], other: set[str]) -> bool:
    """True if a sentence with ``words`` says little that one with ``other`` did not:
    most of its content words are shared and what is new holds no number."""
    if not words or not other:
        return False
    new = words - other
    shared = 1 - len(new) / len(words)
    return shared > _DUPLICATE_OVERLAP and not any(w[0].isdigit() for w in new)


def _score(units: list[_Unit]) -> None:
    """Score every unit in place; see :class:`ExtractiveSummarizer` for the signals."""
    document_frequency: Counter[str] = Counter()
    for unit in units:
        document_frequency.update(_content_words(unit.text))
    total = len(units)
    for unit in units:
        unit.score = _informativeness(unit.text, document_frequency, total)


def _informativeness(text: str, df: Counter[str], total: int) -> float:
    found = words(text)
    if len(found) < _SHORT_WORDS and not any(c.isdigit() for c in text):
        return 0.0
    content = {w.lower() for w in found if w.lower() not in FILLER_WORDS}
    # Specific words (rare in this batch) carry facts; words in every sentence do not.
    specificity = sum(math.log(1 + total / df[w]) for w in content) / math.log(1 + total)
    names = sum(1 for w in found[1:] if w[0].isupper() and w not in ("I", "I'm", "I've"))
    numbers = sum(1 for w in found if w[0].isdigit() or w.lower() in _NUMBER_WORDS)
    score = specificity + min(names, 3) + min(numbers, 2)
    score += 1.0 if _TIME_WORDS.search(text) else 0.0
    score += 1.5 if _PREFERENCE.search(text) else 0.0
    score += 1.0 if _FIRST_PERSON_FACT.search(text) else 0.0
    if text.rstrip().endswith("?"):
        score *= 0.5
    return score
