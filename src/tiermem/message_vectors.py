"""How a message becomes a vector: its line plus its sentences, leaned toward the message
before it in its session (the store's worker and the :class:`~tiermem.archiver.Archiver`
share these)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from tiermem.messages import Message, speaker, transcript_line

if TYPE_CHECKING:
    import numpy as np

    from tiermem.embeddings.base import Embedder

CONTEXT_WEIGHT = 0.5
"""Share of the previous message's vector added to a message's own."""
RECENT_VECTORS = 10_000
"""Own vectors kept in process to contextualize the messages that follow them."""


def embed_messages(embedder: Embedder, messages: list[Message]) -> np.ndarray:
    """One vector per message: its whole line, plus its sentences when it has several.

    A long message often mixes topics, and one embedding of all of it matches none of
    them well. The vector of a multi-sentence message is the normalized sum of the whole
    line's vector and its sentences' vectors (scaled by 1/sqrt(n)), so a question about
    one sentence still finds the message. Measured on LoCoMo: evidence recall within
    2,000 tokens 0.831 -> 0.857 for vector + keyword ranking.

    Each sentence is embedded on its own, in the same call as the lines. Cheaper routes
    were measured and not kept (LoCoMo recall within 2,000 tokens, 0.903 with this one;
    docs/benchmarks.md, "Ingest"): the line alone 0.880; sentences pooled from the
    line's own forward pass ("late chunking", one pass per message) 0.879; sentences
    embedded alone and no line pass, the line taken as their token-weighted mean, 0.896.
    """
    import numpy as np

    texts = [transcript_line(m) for m in messages]
    spans = [_sentence_spans(m, line) for m, line in zip(messages, texts, strict=True)]
    parts_text = [(row, texts[row][a:b]) for row, found in enumerate(spans) for a, b in found]
    vectors = embedder.embed(texts + [f"{speaker(messages[r])}: {t}" for r, t in parts_text])
    result = np.array(vectors[: len(texts)], dtype=np.float32)
    extra = vectors[len(texts) :]
    for row in range(len(texts)):
        mine = [extra[i] for i, (r, _) in enumerate(parts_text) if r == row]
        if mine:
            result[row] = _with_parts(result[row], mine)
    return result


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
