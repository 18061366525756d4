"""The buffer: ``BufferMemory`` (:mod:`.memory`) and its ring of recent messages (:mod:`.ring`)."""

from tiermem.buffer.memory import BufferMemory, BufferRegistry, ConversationBuffer

__all__ = ["BufferMemory", "BufferRegistry", "ConversationBuffer"]
