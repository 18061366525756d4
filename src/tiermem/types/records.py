"""What the memory index holds and a search returns: a :class:`MemoryRecord`, a
:class:`SearchResult` with its :class:`SearchEvidence`, and a user's :class:`StoreStats`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import numpy as np

MemoryType = Literal["message", "fact", "preference", "context", "summary", "tool", "passage"]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
#: Default explicit importance, as in seed 001 (``explicit_importance or 0.5``).
DEFAULT_IMPORTANCE = 0.5


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC (every stored timestamp is UTC)."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class MemoryRecord:
    """One long-term memory, as stored in a ``memories_{dim}`` table.

    ``importance`` is the *explicit* importance in [0, 1] given when the memory was
    written; :func:`tiermem.stores.records.calculate_importance` combines it with recency
    and access counts.
    """

    id: uuid.UUID
    user_id: str
    content: str
    memory_type: MemoryType = "fact"
    agent_id: str | None = None
    session_id: str | None = None
    importance: float = DEFAULT_IMPORTANCE
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)
    accessed_at: datetime = field(default_factory=utcnow)
    access_count: int = 0
    content_hash: str = ""
    embedding: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def stored(
        cls,
        *,
        id: uuid.UUID,
        user_id: str,
        content: str,
        memory_type: MemoryType,
        agent_id: str | None,
        session_id: str | None,
        importance: float,
        metadata: dict[str, Any],
        created_at: datetime,
        accessed_at: datetime,
        access_count: int,
        content_hash: str,
        embedding: np.ndarray | None,
    ) -> MemoryRecord:
        """A record of values a store read back (every field given): the same record as
        the constructor's, made without a frozen dataclass's setattr per field, which
        was most of reading a row (a context reads about 200)."""
        record = object.__new__(cls)
        record.__dict__.update(
            id=id,
            user_id=user_id,
            content=content,
            memory_type=memory_type,
            agent_id=agent_id,
            session_id=session_id,
            importance=importance,
            metadata=metadata,
            created_at=created_at,
            accessed_at=accessed_at,
            access_count=access_count,
            content_hash=content_hash,
            embedding=embedding,
        )
        return record

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (without the embedding)."""
        return {
            "id": str(self.id),
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "session_id": self.session_id,
            "content": self.content,
            "content_hash": self.content_hash,
            "memory_type": self.memory_type,
            "importance": self.importance,
            "metadata": self.metadata,
            "created_at": self.created_at.isoformat(),
            "accessed_at": self.accessed_at.isoformat(),
            "access_count": self.access_count,
        }


@dataclass(frozen=True)
class SearchEvidence:
    """What a hit's score was made of, and how each search ranked it.

    ``similarity`` is the cosine similarity of the query's and the memory's embeddings
    and ``keywords`` the share of the query's keywords the memory holds: the two inputs
    of the score (:func:`tiermem.stores.relevance.relevance`). ``vector_rank`` and
    ``keyword_rank`` are its places in the vector and the keyword list, ``keyword_score``
    the engine's text rank there (FTS5 bm25 negated, or ``ts_rank_cd``: not comparable
    across engines). Hybrid search only: ``rrf``, the reciprocal-rank-fusion value
    ``sum(1 / (60 + rank))`` over the lists it is in, and ``fused_rank``, its place in
    the fusion's order. None where it does not apply.
    """

    rrf: float | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    keyword_rank: int | None = None
    keyword_score: float | None = None
    keywords: float | None = None
    fused_rank: int | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "rrf": self.rrf,
            "vector_rank": self.vector_rank,
            "similarity": self.similarity,
            "keyword_rank": self.keyword_rank,
            "keyword_score": self.keyword_score,
            "keywords": self.keywords,
            "fused_rank": self.fused_rank,
        }


@dataclass(frozen=True)
class SearchResult:
    """A record found by a search, with its score (higher is better).

    From ``Memory.search`` and a store's hybrid search, ``score`` is the memory's
    relevance to the query in [0, 1], from the query and the memory alone (the same at
    every ``k``, for every query and on every engine: see :mod:`tiermem.stores.relevance`);
    ``evidence`` holds what it was made of and how each search ranked the memory. A
    store's vector search scores by cosine similarity and its keyword search by the
    engine's text rank (what the query planner reads), without evidence.
    """

    record: MemoryRecord
    score: float
    evidence: SearchEvidence | None = None

    def explain(self) -> str:
        """One line: the score, and the evidence behind it."""
        line = f"score {self.score:.3f}"
        e = self.evidence
        if e is None:
            return line
        parts = []
        if e.similarity is not None:
            parts.append(f"sim {e.similarity:.3f}")
        if e.keywords is not None:
            parts.append(f"keywords {e.keywords:.2f}")
        if e.vector_rank is not None:
            parts.append(f"vector #{e.vector_rank}")
        if e.keyword_rank is not None:
            text_rank = "" if e.keyword_score is None else f" rank {e.keyword_score:.3f}"
            parts.append(f"keyword #{e.keyword_rank}{text_rank}")
        if e.fused_rank is not None and e.rrf is not None:
            parts.append(f"fused #{e.fused_rank} rrf {e.rrf:.4f}")
        return f"{line} ({'; '.join(parts)})"


@dataclass(frozen=True)
class StoreStats:
    """Aggregate figures about one user's memories."""

    count: int
    by_type: dict[str, int]
    oldest: datetime | None
    newest: datetime | None
    total_access_count: int
    mean_importance: float | None
