"""Long-term memory stores: one protocol, SQLite (embedded) and PostgreSQL + pgvector."""

from tiermem.stores.base import (
    MEMORY_TYPES,
    MemoryFilter,
    MemoryRecord,
    MemoryStore,
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
