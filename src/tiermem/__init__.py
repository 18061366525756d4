"""tiermem: tiered memory for LLM agents.

Public names are imported on first use, so ``import tiermem`` stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Message": "tiermem.messages",
    "ROLES": "tiermem.messages",
    "BufferMemory": "tiermem.buffer",
    "BufferRegistry": "tiermem.buffer",
    "ConversationBuffer": "tiermem.buffer",
    "TokenCounter": "tiermem.tokens",
    "TiktokenCounter": "tiermem.tokens",
    "ApproxTokenCounter": "tiermem.tokens",
    "get_token_counter": "tiermem.tokens",
    "Memory": "tiermem.memory",
    "Context": "tiermem.planner",
}

if TYPE_CHECKING:
    from tiermem.buffer import BufferMemory, BufferRegistry, ConversationBuffer
    from tiermem.memory import Memory
    from tiermem.messages import ROLES, Message
    from tiermem.planner import Context
    from tiermem.tokens import ApproxTokenCounter, TiktokenCounter, TokenCounter, get_token_counter

__all__ = [
    "ROLES",
    "ApproxTokenCounter",
    "BufferMemory",
    "BufferRegistry",
    "Context",
    "ConversationBuffer",
    "Memory",
    "Message",
    "TiktokenCounter",
    "TokenCounter",
    "__version__",
    "get_token_counter",
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
