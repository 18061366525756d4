"""The planner: ``QueryPlanner`` (:mod:`.planner`), a pure function of its inputs; its settings
(:mod:`.settings`), the cues it ranks a pool by (:mod:`.ranking`) and time cues
(:mod:`.temporal`). It imports no provider, store or configuration module."""

from tiermem.planner.planner import Candidate, QueryPlanner, Rerank
from tiermem.planner.settings import PlannerConfig

__all__ = ["Candidate", "PlannerConfig", "QueryPlanner", "Rerank"]
