"""Memory patterns of seed 004 (MARSYS), built on tiermem's tiers.

One module per pattern: :mod:`.conversation` (ConversationMemory, MemoryManager),
:mod:`.episodic`, :mod:`.shared` (SharedMemoryPool, CoordinatedMemorySystem),
:mod:`.hierarchical`, :mod:`.rag` and :mod:`.token_limits`.
"""

from tiermem.patterns.conversation import ConversationMemory, MemoryManager
from tiermem.patterns.episodic import EpisodicMemory
from tiermem.patterns.hierarchical import HierarchicalMemory
from tiermem.patterns.rag import RAGMemory
from tiermem.patterns.shared import CoordinatedMemorySystem, SharedMemoryPool
from tiermem.patterns.token_limits import manage_token_limit, summarize_memory

__all__ = [
    "ConversationMemory",
    "CoordinatedMemorySystem",
    "EpisodicMemory",
    "HierarchicalMemory",
    "MemoryManager",
    "RAGMemory",
    "SharedMemoryPool",
    "manage_token_limit",
    "summarize_memory",
]
