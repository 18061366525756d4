"""A :class:`Context` is what ``get_context`` returns: OpenAI-format messages and, per
:class:`ContextItem`, which tier it came from, its score and its tokens."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tiermem.messages import Message, to_anthropic_messages

__all__ = ["SECTIONS", "Context", "ContextItem", "Section"]

Section = Literal["synopsis", "summary", "retrieved", "recent"]
SECTIONS: tuple[Section, ...] = ("synopsis", "summary", "retrieved", "recent")


@dataclass(frozen=True)
class ContextItem:
    """One item of a context: what tier it came from, its score and its tokens
    (``memory_id``: the long-term memory it is, for items from the store; ``message_id``:
    the message it is, or, with ``span``, the characters of that message's text it shows
    as an excerpt: ``Memory.get_message`` returns the whole message).

    ``score`` is relative to the other candidates of the same query (the best has
    relevance 1); ``similarity`` (cosine to the query) and ``keywords`` (share of the
    query's keywords it holds) are the absolute evidence the relevance floor checks.
    """

    section: Section
    source: str
    content: str
    score: float
    tokens: int
    timestamp: datetime | None = None
    memory_id: uuid.UUID | None = None
    similarity: float | None = None
    keywords: float | None = None
    sources: tuple[str, ...] = ()
    message_id: str | None = None
    span: tuple[int, int] | None = None


@dataclass
class Context:
    """The context for one prompt: OpenAI-format messages and why each part is there."""

    messages: list[dict[str, Any]]
    items: list[ContextItem]
    total_tokens: int
    max_tokens: int
    query: str = ""
    degraded: list[str] = field(default_factory=list)
    """What was down while the context was built, one note each (``"embedder: ..."``:
    no vector for the query, so keyword search, the recent window, the summary and the
    synopsis only); empty when every part answered."""

    @property
    def tokens(self) -> int:
        """Alias of ``total_tokens``."""
        return self.total_tokens

    def to_openai(self) -> list[dict[str, Any]]:
        """The messages in OpenAI chat format (copies)."""
        return [dict(m) for m in self.messages]

    def to_anthropic(self) -> tuple[str | None, list[dict[str, Any]]]:
        """``(system, messages)`` for the Anthropic Messages API."""
        return to_anthropic_messages(Message.from_openai(m) for m in self.messages)

    def text(self) -> str:
        """The whole context as plain text (what the model reads)."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    def explain(self) -> str:
        """A table of every item: section, source tier, score (relative to the other
        candidates), the absolute evidence (cosine similarity ``sim``, share of the
        query's keywords ``kw``), tokens and a preview."""
        lines = [f"context for {self.query!r}: {self.total_tokens}/{self.max_tokens} tokens"]
        lines += [f"degraded: {note}" for note in self.degraded]
        header = f"{'section':<10} {'source':<9} {'score':>6} {'sim':>6} {'kw':>5} {'tokens':>6}"
        lines.append(header + "  content")
        for item in self.items:
            preview = _preview(item.content)
            sim = "-" if item.similarity is None else f"{item.similarity:.3f}"
            kw = "-" if item.keywords is None else f"{item.keywords:.2f}"
            lines.append(
                f"{item.section:<10} {item.source:<9} {item.score:>6.3f} {sim:>6} {kw:>5}"
                f" {item.tokens:>6}  {preview}"
            )
            lines += [f"{'':<49}from: {_preview(line)}" for line in item.sources]
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.messages)


def _preview(text: str, limit: int = 70) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."
