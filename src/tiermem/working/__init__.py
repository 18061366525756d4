"""Working memory: in-process FAISS vectors per user (:mod:`.memory`) and their items
(:mod:`.items`)."""

from tiermem.working.memory import WorkingMemory

__all__ = ["WorkingMemory"]
