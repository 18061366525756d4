"""What a store holds beside the floor's records: a memory to add, the importance score,
an access's bump, and the replica's status."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from tiermem.types.records import DEFAULT_IMPORTANCE, MemoryRecord, utcnow

# Importance scoring (seed 001): 0.3 recency + 0.3 access frequency + 0.4 explicit.
RECENCY_HALF_LIFE_DAYS = 30.0
ACCESS_SATURATION = 100


class NewMemory(NamedTuple):
    """A memory to add; ``embedding`` is filled in by the derived ``add`` if missing."""

    content: str
    embedding: np.ndarray | None = None
    memory_type: str = "fact"
    agent_id: str | None = None
    session_id: str | None = None
    importance: float = DEFAULT_IMPORTANCE
    metadata: Mapping[str, Any] | None = None
    created_at: datetime | None = None


def calculate_importance(
    memory: MemoryRecord,
    *,
    now: datetime | None = None,
    half_life_days: float = RECENCY_HALF_LIFE_DAYS,
    access_saturation: int = ACCESS_SATURATION,
) -> float:
    """Seed 001's importance score, normalized to [0, 1].

    ``0.3 * recency + 0.3 * access_frequency + 0.4 * explicit_importance`` where

    * recency = ``0.5 ** (age_days / half_life_days)`` (1 when new, 0.5 after 30 days),
    * access_frequency = ``log(access_count + 1) / log(access_saturation + 1)`` capped at 1
      (the seed's ``log(access_count + 1)`` scaled so 100 accesses count fully),
    * explicit_importance = the record's ``importance`` (0.5 unless given).

    The weights sum to 1, so the score stays in [0, 1].
    """
    now = now or utcnow()
    age_days = max(0.0, (now - memory.created_at).total_seconds() / 86_400)
    recency = 0.5 ** (age_days / half_life_days)
    frequency = min(1.0, math.log(memory.access_count + 1) / math.log(access_saturation + 1))
    explicit = min(1.0, max(0.0, memory.importance))
    return float(0.3 * recency + 0.3 * frequency + 0.4 * explicit)


def bump_access(record: MemoryRecord, now: datetime) -> MemoryRecord:
    """The record as it is after one more access (what the store just wrote).

    A shallow copy with two fields set: ``dataclasses.replace`` re-runs ``__init__`` and
    costs five times more, which shows on searches that return hundreds of records.
    """
    bumped = copy.copy(record)
    object.__setattr__(bumped, "access_count", record.access_count + 1)
    object.__setattr__(bumped, "accessed_at", now)
    return bumped


@dataclass(frozen=True)
class ReplicaStatus:
    """The read replica as this process sees it: ``up`` (reads go to it), how far its
    replay is behind the primary (bytes of WAL; seconds since it replayed the last
    transaction it has while it is behind, 0 when caught up; None when unknown), and how
    many read batches it served, and how many went to the primary because it was
    ``behind`` or ``down``."""

    up: bool
    lag_bytes: int | None
    lag_seconds: float | None
    reads: int
    behind: int
    down: int
