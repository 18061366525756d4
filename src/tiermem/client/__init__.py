"""``MemoryClient`` / ``AsyncMemoryClient`` (:mod:`.client`): the contract over HTTP, and
the requests both build (:mod:`.requests`). Only the contract, the types and httpx load."""

from tiermem.client.client import AsyncMemoryClient, MemoryClient

__all__ = ["AsyncMemoryClient", "MemoryClient"]
