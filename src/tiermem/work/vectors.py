"""How a message becomes a vector: its line plus its sentences (or, when long, its
passages), leaned toward the message before it in its session (the store's worker and
the :class:`~tiermem.work.archiver.Archiver` share these)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from tiermem.messages import Message, speaker, transcript_line
from tiermem.work.instructions import standing
from tiermem.work.passages import Span, cut

if TYPE_CHECKING:
    import numpy as np

    from tiermem.embeddings.base import Embedder

CONTEXT_WEIGHT = 0.5
"""Share of the previous message's vector added to a message's own."""
RECENT_VECTORS = 10_000
"""Own vectors kept in process to contextualize the messages that follow them."""
LINE_PREFIX = 4_000
"""Characters of a long message's line embedded as its whole (the model reads fewer)."""


class PassageSettings(BaseModel):
    """``memory.passages``: a long message is also indexed as passages cut along its own
    structure (paragraphs, list items, code blocks, sentences), so the context can take
    the part that answers. A change applies to messages indexed after it."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True)

    enabled: bool = Field(default=True, description="false: every message is one unit.")
    over: int = Field(
        default=2_000, ge=0, description="A message longer than this (characters) has passages."
    )
    max_chars: int = Field(
        default=800, ge=100, le=20_000, description="The longest passage (code blocks: 2x)."
    )
    min_chars: int = Field(
        default=200, ge=0, le=20_000, description="Pieces shorter than this join a neighbour."
    )
    lean: float = Field(
        default=0.5, ge=0, le=4, description="Share of the message's vector in each passage's."
    )

    def spans(self, message: Message) -> list[Span]:
        """The message's passages (none when off, or when it is not longer than
        :attr:`over`)."""
        text = message.text
        if not self.enabled or len(text) <= self.over:
            return []
        return cut(text, self.max_chars, self.min_chars)


@dataclass(frozen=True)
class Embedded:
    """A batch's vectors: one per message; each long message's passages, and each user
    message's standing instructions and preferences (:func:`~tiermem.work.instructions.standing`),
    with theirs."""

    vectors: np.ndarray
    passages: list[list[tuple[Span, np.ndarray]]]
    standing: list[list[tuple[Span, np.ndarray]]]


def embed_messages(embedder: Embedder, messages: list[Message]) -> np.ndarray:
    """One vector per message (:func:`embed_with_passages` without passages)."""
    return embed_with_passages(embedder, messages, None).vectors


def embed_with_passages(
    embedder: Embedder, messages: list[Message], passages: PassageSettings | None
) -> Embedded:
    """One vector per message: its whole line, plus its parts when it has several; and
    the vectors of each long message's passages and of each standing instruction or
    preference a user's message states (each sentence alone).

    A long message often mixes topics, and one embedding of all of it matches none of
    them well. The vector of a multi-sentence message is the normalized sum of the whole
    line's vector and its parts' vectors (scaled by 1/sqrt(n)), so a question about
    one part still finds the message. Measured on LoCoMo: evidence recall within
    2,000 tokens 0.831 -> 0.857 for vector + keyword ranking.

    The parts are the sentences of a short message and the passages of a long one
    (``passages``: :meth:`PassageSettings.spans`); a passage's vector is its own plus
    ``lean`` x the message's, so a passage of a message about the question ranks above a
    like passage of another. Each part is embedded on its own, in the same call as the
    lines. Cheaper routes were measured and not kept (LoCoMo recall within 2,000
    tokens, 0.903 with this one; docs/notes/2026-11-25-ingest-and-writes.md): the line alone 0.880;
    sentences pooled from the line's own forward pass ("late chunking", one pass per
    message) 0.879; sentences embedded alone and no line pass, the line taken as their
    token-weighted mean, 0.896.
    """
    import numpy as np

    texts = [transcript_line(m) for m in messages]
    found = [passages.spans(m) if passages is not None else [] for m in messages]
    stated = [standing(m.text) if m.role == "user" else [] for m in messages]
    parts_text: list[tuple[int, str]] = []
    for row, (message, line, spans) in enumerate(zip(messages, texts, found, strict=True)):
        if spans:
            parts_text += [(row, message.text[a:b]) for a, b in spans]
            texts[row] = line[:LINE_PREFIX]
        else:
            parts_text += [(row, line[a:b]) for a, b in _sentence_spans(message, line)]
    said = [m.text[a:b] for m, spans in zip(messages, stated, strict=True) for a, b in spans]
    parts = [f"{speaker(messages[r])}: {t}" for r, t in parts_text]
    vectors = embedder.embed(texts + parts + said)
    result = np.array(vectors[: len(texts)], dtype=np.float32)
    extra = vectors[len(texts) : len(texts) + len(parts)]
    said_vectors = iter(vectors[len(texts) + len(parts) :])
    mine: list[list[np.ndarray]] = [[] for _ in texts]
    for i, (row, _) in enumerate(parts_text):
        mine[row].append(extra[i])
    for row, own in enumerate(mine):
        if own:
            result[row] = _with_parts(result[row], own)
    lean = passages.lean if passages is not None else 0.0
    leaned = [
        [
            (span, _leaned(own, result[row], lean))
            for span, own in zip(spans, mine[row], strict=True)
        ]
        if spans
        else []
        for row, spans in enumerate(found)
    ]
    instructed = [[(span, next(said_vectors)) for span in spans] for spans in stated]
    return Embedded(result, leaned, instructed)


def _leaned(own: np.ndarray, whole: np.ndarray, lean: float) -> np.ndarray:
    """``own + lean x whole``, unit length."""
    import numpy as np

    mixed = np.asarray(own, dtype=np.float32) + lean * whole
    out: np.ndarray = (mixed / np.linalg.norm(mixed)).astype(np.float32)
    return out


def _sentence_spans(message: Message, line: str) -> list[tuple[int, int]]:
    """Character spans, in ``line``, of the message's sentences of 3 words or more (none
    when it has fewer than two)."""
    from tiermem.text import sentences as split

    sentences = [s for s in split(message.text) if len(s.split()) >= 3]
    if len(sentences) < 2:
        return []
    spans = []
    cursor = len(line) - len(message.text)
    for sentence in sentences:
        begin = line.find(sentence, cursor)
        if begin < 0:
            continue
        spans.append((begin, begin + len(sentence)))
        cursor = begin + len(sentence)
    return spans if len(spans) > 1 else []


def _with_parts(whole: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
    """``whole`` plus the mean direction of ``parts`` (sum / sqrt(n)), unit length."""
    import numpy as np

    if not parts:
        return np.asarray(whole, dtype=np.float32)
    mixed = whole + np.sum(parts, axis=0) / np.sqrt(len(parts))
    out: np.ndarray = (mixed / np.linalg.norm(mixed)).astype(np.float32)
    return out


class ContextVectors:
    """Leans each message's vector toward the message before it in its session.

    A short reply ("Adoption agencies.") says little without the question it answers;
    adding ``CONTEXT_WEIGHT`` x the previous message's own vector lets a search for the
    topic find the answer. The own vectors of the last ``RECENT_VECTORS`` messages are
    kept in process, keyed by user and session (never shared across users); a message
    whose predecessor was embedded by another process keeps its own vector. Measured on
    LoCoMo: evidence recall within 2,000 tokens 0.857 -> 0.877 for vector + keyword ranking.
    """

    def __init__(self, size: int = RECENT_VECTORS) -> None:
        self.size = size
        self._own: OrderedDict[tuple[str, str | None, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def mix(
        self, keys: list[tuple[str, str | None, str, str | None]], own: np.ndarray
    ) -> np.ndarray:
        """The vectors to store for messages ``(user, session, id, previous id)``."""
        import numpy as np

        out = np.array(own, dtype=np.float32)
        with self._lock:
            for row, (user, session, message_id, previous_id) in enumerate(keys):
                previous = self._own.get((user, session, previous_id or ""))
                if previous is not None:
                    mixed = own[row] + CONTEXT_WEIGHT * previous
                    out[row] = mixed / np.linalg.norm(mixed)
                self._own[(user, session, message_id)] = own[row]
                if len(self._own) > self.size:
                    self._own.popitem(last=False)
        return out

    def drop_user(self, user_id: str) -> None:
        """Forget the user's vectors (erasure)."""
        with self._lock:
            for key in [k for k in self._own if k[0] == user_id]:
                del self._own[key]
