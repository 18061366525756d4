"""Long-term memory stores: one protocol, SQLite (embedded) and PostgreSQL + pgvector.

A store holds its parts (``store.index``, ``store.transcript``, ``store.queue``: see
:mod:`tiermem.stores.protocol`) and runs their operations in one transaction.

What they hold and return (``MemoryRecord``, ``SearchResult``...) is the floor's,
:mod:`tiermem.types`."""

from tiermem.stores.protocol import MemoryStore
from tiermem.stores.records import NewMemory, calculate_importance
from tiermem.stores.sqlite import SQLiteStore

__all__ = [
    "MemoryStore",
    "NewMemory",
    "SQLiteStore",
    "calculate_importance",
]
