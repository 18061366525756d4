"""User synopses (seed 001 "User Synopsis Caching"): a short profile per user, in two tiers.

* **identity** (default TTL 7 days): name, preferences, traits; changes rarely.
* **context** (default TTL 1 hour): recent topics, current goals; changes often.

:class:`SynopsisGenerator` writes a :class:`~tiermem.types.Synopsis` from a user's
memories, with an LLM when one is configured and deterministically offline otherwise.
:class:`SynopsisCache` keeps each tier under its own key (``{namespace}:{tier}:{user_id}``)
with its own TTL, in process (:class:`InMemorySynopsisCache`) or in Redis
(:class:`RedisSynopsisCache`).
:class:`SynopsisService` joins them: a hit per tier, generation on a miss, invalidation
when new facts about the user arrive.
"""

from tiermem.synopsis.cache import (
    CacheDelete,
    CacheGet,
    CacheSet,
    InMemorySynopsisCache,
    SynopsisCache,
)
from tiermem.synopsis.generator import SynopsisGenerator, parse_sections
from tiermem.synopsis.redis import RedisSynopsisCache, redact_url
from tiermem.synopsis.service import SynopsisService, cache_from_config, stale_tier

__all__ = [
    "CacheDelete",
    "CacheGet",
    "CacheSet",
    "InMemorySynopsisCache",
    "RedisSynopsisCache",
    "SynopsisCache",
    "SynopsisGenerator",
    "SynopsisService",
    "cache_from_config",
    "parse_sections",
    "redact_url",
    "stale_tier",
]
