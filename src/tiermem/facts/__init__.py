"""Facts: extraction (:mod:`.extract`: offline rules or one LLM call per batch) and the worker
that versions them (:mod:`.worker`)."""

from tiermem.facts.worker import FactStats, FactWorker

__all__ = ["FactStats", "FactWorker"]
