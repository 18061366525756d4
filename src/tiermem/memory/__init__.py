"""Memory: tiered memory for many users and agents (the facade, :mod:`.facade`).

The package's rooms: ``facade`` (:class:`Memory`, the public methods), ``wiring`` (the
tiers built from the configuration), ``retention`` (where the conversation is kept:
the store, or this process), ``retrieval`` (what a context is planned from) and
``inputs`` (the arguments checked).
"""

from tiermem.memory.facade import RETENTIONS, Memory

__all__ = ["RETENTIONS", "Memory"]
