"""The one place a write that changes a user's data reports it: :meth:`Changes.changed`.

Every write of :class:`~tiermem.Memory` (add, remember, update, every forget, import)
calls ``changed(user_id, what)``, which drops what this process caches about the user and
deletes the user's entries in a shared cache (Redis synopses: gone for every process).
Other processes, and the writes a worker makes in any process (indexing, facts, summaries),
are covered by the store itself: each write a cache may hold advances the user's change
*generation* in the write's own transaction (``tiermem_generations``), and a synopsis is
served only if it was written at the user's current generation. So a synopsis written before
a change, in any process and in any cache, is never served after it.

What each change invalidates:

========== ==============================================================================
what       caches dropped
========== ==============================================================================
messages   none (the transcript is read from the store; the store keeps its own vector
           caches in step, and the synopsis is not written from messages)
memories   the synopsis tiers the memory's type feeds (``remember``), both on an update
forgotten  the synopsis (both tiers, shared cache too), the user's working memory,
           waiting access counts and the worker's vectors of their recent messages
erased     the same, and every buffer of the user
imported   the synopsis (both tiers)
========== ==============================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

What = Literal["messages", "memories", "forgotten", "erased", "imported"]
WHATS: tuple[str, ...] = get_args(What)


class Changes:
    """Invalidates the caches a change of a user's data makes stale.

    Args:
        parts: returns the caches built so far, by name (``synopses``, ``working``,
            ``accesses``, ``buffers``, ``context``), None for one not built (nothing to drop there).
    """

    def __init__(self, parts: Callable[[], dict[str, Any]]) -> None:
        self._parts = parts

    def changed(self, user_id: str, what: What, memory_type: str | None = None) -> None:
        """Report that ``user_id``'s data changed; ``memory_type`` of a remembered memory."""
        if what not in WHATS:
            raise ValueError(f"unknown change {what!r}")
        if what == "messages":
            return
        parts = self._parts()
        synopses = parts.get("synopses")
        if synopses is not None:
            if what == "memories" and memory_type is not None:
                synopses.memory_added(user_id, memory_type)
            else:
                synopses.invalidate(user_id)
        if what in ("forgotten", "erased"):
            working, accesses = parts.get("working"), parts.get("accesses")
            if working is not None:
                working.clear(user_id)
            if accesses is not None:
                accesses.discard_user(user_id)
            context = parts.get("context")  # the worker's vectors of recent messages
            if context is not None:
                context.drop_user(user_id)
        if what == "erased":
            buffers = parts.get("buffers")
            if buffers is not None:
                buffers.drop_user(user_id, drain=False)


__all__ = ["WHATS", "Changes", "What"]
