"""Long-term memory stores: one protocol, SQLite (embedded) and PostgreSQL + pgvector."""

from tiermem.stores.ops import MemoryFilter
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.records import (
    MEMORY_TYPES,
    MemoryRecord,
    NewMemory,
    SearchEvidence,
    SearchResult,
    StoreStats,
    calculate_importance,
)
from tiermem.stores.sqlite import SQLiteStore

__all__ = [
    "MEMORY_TYPES",
    "MemoryFilter",
    "MemoryRecord",
    "MemoryStore",
    "NewMemory",
    "SQLiteStore",
    "SearchEvidence",
    "SearchResult",
    "StoreStats",
    "calculate_importance",
]
