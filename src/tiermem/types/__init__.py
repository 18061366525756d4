"""The floor of types: the values the contract (:mod:`tiermem.api`) takes and returns,
and the checks of what it accepts, importing nothing of ours but the core (``errors``,
``messages``). ``api.py``, ``wire.py`` and the client stand on it alone, so
``import tiermem.client`` loads no store, planner, model or configuration.

* :mod:`~tiermem.types.context`: :class:`Context`, :class:`ContextItem`
* :mod:`~tiermem.types.records`: :class:`MemoryRecord`, :class:`SearchResult`,
  :class:`SearchEvidence`, :class:`StoreStats`
* :mod:`~tiermem.types.transcript`: :class:`TranscriptRow`, :class:`SessionInfo`,
  :class:`WorkStats`
* :mod:`~tiermem.types.synopsis`: :class:`Synopsis` and its tiers
* :mod:`~tiermem.types.filters`: :class:`Filters`, :class:`MemoryFilter`, ``make_filter``
* :mod:`~tiermem.types.checks`: the ``check_*`` of the contract's arguments
"""

from tiermem.types.context import SECTIONS, Context, ContextItem, Section
from tiermem.types.filters import Filters, MemoryFilter
from tiermem.types.records import (
    MEMORY_TYPES,
    MemoryRecord,
    MemoryType,
    SearchEvidence,
    SearchResult,
    StoreStats,
)
from tiermem.types.synopsis import TIERS, Synopsis, SynopsisTier, Tier
from tiermem.types.transcript import SessionInfo, TranscriptRow, WorkStats

__all__ = [
    "MEMORY_TYPES",
    "SECTIONS",
    "TIERS",
    "Context",
    "ContextItem",
    "Filters",
    "MemoryFilter",
    "MemoryRecord",
    "MemoryType",
    "SearchEvidence",
    "SearchResult",
    "Section",
    "SessionInfo",
    "StoreStats",
    "Synopsis",
    "SynopsisTier",
    "Tier",
    "TranscriptRow",
    "WorkStats",
]
