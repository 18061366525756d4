"""tiermem: tiered memory for LLM agents.

Public names are imported on first use, so ``import tiermem`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tiermem._version import __version__

_EXPORTS = {
    "Message": "tiermem.messages",
    "ROLES": "tiermem.messages",
    "BufferMemory": "tiermem.buffer.memory",
    "BufferRegistry": "tiermem.buffer.memory",
    "ConversationBuffer": "tiermem.buffer.memory",
    "TokenCounter": "tiermem.tokens",
    "TiktokenCounter": "tiermem.tokens",
    "ApproxTokenCounter": "tiermem.tokens",
    "get_token_counter": "tiermem.tokens",
    "Memory": "tiermem.memory",
    "Context": "tiermem.types",
    "QueryPlanner": "tiermem.planner.planner",
    "TiermemConfig": "tiermem.config.model",
    "get_embedder": "tiermem.embeddings",
    "Embedder": "tiermem.embeddings",
    "WorkingMemory": "tiermem.working.memory",
    "get_llm": "tiermem.llm",
    "OpenAIModel": "tiermem.llm",
    "AnthropicModel": "tiermem.llm",
    "MemorySummarizer": "tiermem.summaries.summarize",
    "ExtractiveSummarizer": "tiermem.summaries.summarize",
    "BufferSummaryChatMemory": "tiermem.summaries.chat",
    "SQLiteStore": "tiermem.stores",
    "MemoryStore": "tiermem.stores",
    "calculate_importance": "tiermem.stores",
    "Synopsis": "tiermem.types",
    "SynopsisCache": "tiermem.synopsis",
    "Agent": "tiermem.agent",
    "ConversationMemory": "tiermem.patterns",
    "MemoryManager": "tiermem.patterns",
    "EpisodicMemory": "tiermem.patterns",
    "SharedMemoryPool": "tiermem.patterns",
    "CoordinatedMemorySystem": "tiermem.patterns",
    "HierarchicalMemory": "tiermem.patterns",
    "RAGMemory": "tiermem.patterns",
    "manage_token_limit": "tiermem.patterns",
    "summarize_memory": "tiermem.patterns",
}

if TYPE_CHECKING:
    from tiermem.agent import Agent
    from tiermem.buffer.memory import BufferMemory, BufferRegistry, ConversationBuffer
    from tiermem.config.model import TiermemConfig
    from tiermem.embeddings import Embedder, get_embedder
    from tiermem.llm import AnthropicModel, OpenAIModel, get_llm
    from tiermem.memory import Memory
    from tiermem.messages import ROLES, Message
    from tiermem.patterns import (
        ConversationMemory,
        CoordinatedMemorySystem,
        EpisodicMemory,
        HierarchicalMemory,
        MemoryManager,
        RAGMemory,
        SharedMemoryPool,
        manage_token_limit,
        summarize_memory,
    )
    from tiermem.planner.planner import QueryPlanner
    from tiermem.stores import MemoryStore, SQLiteStore, calculate_importance
    from tiermem.summaries.chat import BufferSummaryChatMemory
    from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer
    from tiermem.synopsis import SynopsisCache
    from tiermem.tokens import ApproxTokenCounter, TiktokenCounter, TokenCounter, get_token_counter
    from tiermem.types import Context, Synopsis
    from tiermem.working.memory import WorkingMemory

__all__ = [
    "ROLES",
    "Agent",
    "AnthropicModel",
    "ApproxTokenCounter",
    "BufferMemory",
    "BufferRegistry",
    "BufferSummaryChatMemory",
    "Context",
    "ConversationBuffer",
    "ConversationMemory",
    "CoordinatedMemorySystem",
    "Embedder",
    "EpisodicMemory",
    "ExtractiveSummarizer",
    "HierarchicalMemory",
    "Memory",
    "MemoryManager",
    "MemoryStore",
    "MemorySummarizer",
    "Message",
    "OpenAIModel",
    "QueryPlanner",
    "RAGMemory",
    "SQLiteStore",
    "SharedMemoryPool",
    "Synopsis",
    "SynopsisCache",
    "TiermemConfig",
    "TiktokenCounter",
    "TokenCounter",
    "WorkingMemory",
    "__version__",
    "calculate_importance",
    "get_embedder",
    "get_llm",
    "get_token_counter",
    "manage_token_limit",
    "summarize_memory",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tiermem' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
