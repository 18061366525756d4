"""EpisodicMemory (seed 004): a conversation cut into episodes, recalled by meaning.

Where the seed matched a substring of the query, :meth:`EpisodicMemory.recall_episode`
embeds the messages of past episodes and returns the episode holding the message most
similar to the query (above ``min_similarity``), so "the trip to Japan" finds the
episode where the user talked about "flights to Tokyo". :meth:`summarize_episodes`
writes a real summary of each episode with a tiermem summarizer (offline extractive by
default, or an LLM's :class:`~tiermem.summaries.summarize.MemorySummarizer`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from tiermem.aio.twins import Call, Calls, Gather, Steps, stepped, stepped_twin
from tiermem.errors import InvalidSizeError, InvalidTypeError
from tiermem.messages import Message
from tiermem.patterns.conversation import ConversationMemory
from tiermem.patterns.vectors import MessageVectors, default_embedder
from tiermem.summaries.summarize import ExtractiveSummarizer

DEFAULT_MIN_SIMILARITY = 0.3
"""Cosine similarity below which no episode counts as relevant (MiniLM: unrelated
sentences score about 0.0-0.2, paraphrases 0.5 and more)."""


class EpisodicMemory(Calls):
    """Past episodes plus the current one (seed 004's attributes and methods).

    Args:
        embedder: a tiermem embedder or an object with ``embed(text)``; default MiniLM.
        summarizer: writes episode summaries; default ``ExtractiveSummarizer(max_tokens=120)``.
        min_similarity: the least cosine similarity :meth:`recall_episode` accepts.
    """

    def __init__(
        self,
        embedder: Any = None,
        summarizer: Any = None,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
    ) -> None:
        if not isinstance(min_similarity, (int, float)) or not -1 <= min_similarity <= 1:
            raise InvalidSizeError("min_similarity", f"must be in [-1, 1], got {min_similarity!r}")
        self.episodes: list[ConversationMemory] = []
        self.current_episode = ConversationMemory()
        self.episode_metadata: list[dict[str, Any]] = []
        self.embedder = embedder if embedder is not None else default_embedder()
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(120)
        self.min_similarity = float(min_similarity)
        self._vectors = MessageVectors(self.embedder)
        self._summaries: dict[int, tuple[int, str]] = {}
        self._lock = threading.RLock()

    def add_message(self, message: Message) -> None:
        """Add ``message`` to the current episode."""
        self.current_episode.add_message(message)

    def start_new_episode(self, metadata: Mapping[str, Any] | None = None) -> None:
        """Close the current episode (if it has messages) with ``metadata``; begin a new one."""
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
        with self._lock:
            if self.current_episode.messages:
                self.episodes.append(self.current_episode)
                self.episode_metadata.append(dict(metadata or {}))
            self.current_episode = ConversationMemory()

    # -- recall ------------------------------------------------------------------------

    @stepped
    def recall_episodes(
        self, query: str, k: int = 3
    ) -> Steps[list[tuple[ConversationMemory, float]]]:
        """The ``k`` past episodes most relevant to ``query`` with their scores, best first
        (an episode scores the similarity of its closest message)."""
        episodes, vectors = list(self.episodes), self._vectors
        yield Call(vectors.ensure, vectors.aensure, [m for e in episodes for m in e.messages])
        return self._rank(
            episodes, (yield Call(vectors.query_vector, vectors.aquery_vector, query)), k
        )

    arecall_episodes = stepped_twin(recall_episodes)

    @stepped
    def recall_episode(self, query: str) -> Steps[ConversationMemory | None]:
        """The past episode most relevant to ``query``, or None if none reaches
        ``min_similarity``."""
        best = yield Call(self.recall_episodes, self.arecall_episodes, query, k=1)
        return best[0][0] if best else None

    arecall_episode = stepped_twin(recall_episode)

    def _rank(
        self, episodes: list[ConversationMemory], vector: Any, k: int
    ) -> list[tuple[ConversationMemory, float]]:
        owner = {m.message_id: e for e in episodes for m in e.messages}
        best: dict[int, tuple[ConversationMemory, float]] = {}
        for message_id, score in self._vectors.search(vector, len(owner), among=owner):
            episode = owner[message_id]
            if score >= self.min_similarity and id(episode) not in best:
                best[id(episode)] = (episode, score)
        return list(best.values())[:k]

    # -- summaries ---------------------------------------------------------------------

    @stepped
    def summarize_episodes(self) -> Steps[list[str]]:
        """One summary per past episode: ``Episode i: n messages`` and what was said.

        Summaries are cached and only recomputed when an episode changed (async: the
        changed episodes are summarized concurrently).
        """
        episodes = [e.messages for e in self.episodes]
        stale = [
            i
            for i, messages in enumerate(episodes)
            if (cached := self._summaries.get(i)) is None or cached[0] != len(messages)
        ]
        summarizer = self.summarizer
        texts = yield Gather(
            Call(summarizer.summarize, summarizer.asummarize, episodes[i]) for i in stale
        )
        for i, text in zip(stale, texts, strict=True):
            self._summaries[i] = (len(episodes[i]), text)
        return [self._header(i, m) + self._summaries[i][1] for i, m in enumerate(episodes)]

    asummarize_episodes = stepped_twin(summarize_episodes)

    @staticmethod
    def _header(index: int, messages: list[Message]) -> str:
        return f"Episode {index + 1}: {len(messages)} messages\n"


__all__ = ["DEFAULT_MIN_SIMILARITY", "EpisodicMemory"]
