"""``memory.planner``: how ``get_context`` fills the budget (the shares of each section,
the ranking's weights, the relevance floor). The planner's own settings, beside it: the
planner imports them, and :mod:`tiermem.config.model` puts them under ``memory.planner``."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tiermem.sections import Section
from tiermem.types.context import SECTIONS
from tiermem.types.context import Section as ContextSection


class SharesConfig(Section):
    """``memory.planner.shares``: the most of ``max_tokens`` each section may use.

    Synopsis, summary and recent are filled first, each up to its share; the retrieved
    section then takes what is left, up to its own share (1.0: all of it).
    """

    synopsis: float = Field(default=0.1, ge=0, le=1)
    summary: float = Field(default=0.1, ge=0, le=1)
    retrieved: float = Field(default=1.0, ge=0, le=1)
    recent: float = Field(default=0.2, ge=0, le=1)


class WeightsConfig(Section):
    """``memory.planner.weights``: how retrieved memories are ranked.

    ``similarity``, ``recency`` and ``importance`` are the final blend (normalized to sum
    to 1). The others shape the relevance that ``similarity`` weighs: ``keyword`` (the
    keyword score beside the vector score), ``session`` (how relevant a memory's whole
    session is), ``temporal`` (a bonus inside a time the query names), ``neighbour``
    (the share of a message's relevance passed to the messages next to it), ``question``
    (taken from a message that asks: a question is rarely its own answer) and ``reply``
    (the share of a question's relevance passed to the message that answers it); ``when``
    (a bonus, for a query that asks when, to a memory that says when: "last week");
    ``speaker`` (the share of its relevance a message loses when the query names some of
    the pool's speakers but not the one who said it); ``generic`` (how much of a
    memory's similarity to the whole pool is taken from its similarity to the query: a
    line like every other line is no evidence); ``assistant`` (the share of its relevance
    a line of the assistant keeps: what the user said is what a memory is for).
    """

    similarity: float = Field(default=0.9, ge=0)
    recency: float = Field(default=0.05, ge=0)
    importance: float = Field(default=0.05, ge=0)
    keyword: float = Field(default=1.0, ge=0)
    session: float = Field(default=0.3, ge=0)
    temporal: float = Field(default=1.0, ge=0)
    neighbour: float = Field(default=0.5, ge=0, le=1)
    question: float = Field(default=0.3, ge=0)
    reply: float = Field(default=1.0, ge=0, le=1)
    when: float = Field(default=0.5, ge=0)
    speaker: float = Field(default=0.2, ge=0, le=1)
    generic: float = Field(default=0.2, ge=0)
    assistant: float = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _some_weight(self) -> WeightsConfig:
        if self.similarity + self.recency + self.importance <= 0:
            raise ValueError("at least one of similarity, recency, importance must be positive")
        return self


class FloorConfig(Section):
    """``memory.planner.floor``: the least evidence a retrieved memory needs, so
    ``max_tokens`` is a cap, not a target.

    Two checks, both needed. The absolute one: a memory's cosine similarity to the query
    is at least ``similarity``, or it holds at least the ``keywords`` share of the query's
    keywords (stop words left out, words compared by their first five letters), or it
    falls in a time the query names, or (``neighbours``) the message right before or after
    it in its session passes on similarity or keywords; so a pool of unrelated memories
    gives nothing. The drop-off: its relevance (vector, keyword, session, time and
    neighbour evidence fused, the query's best memory being 1) is at least ``relevance``;
    so the context ends where the evidence falls away from the best match. Off (the
    default), every candidate may fill the budget: on long histories an abstract question
    is barely similar to its evidence and the floor left out 0.04-0.07 of it (BEAM); on
    short chit-chat it saves tokens (LoCoMo: 11 % at 2,000 for no recall)."""

    enabled: bool = False
    neighbours: bool = False
    similarity: float = Field(default=0.25, ge=-1, le=1, description="Least cosine similarity.")
    keywords: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="Share of the query's keywords that also lets a memory in.",
    )
    relevance: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Least relevance relative to the query's best memory (the drop-off).",
    )


class PlannerConfig(Section):
    """``memory.planner``: how ``get_context`` fills the budget."""

    max_tokens: int = Field(default=4000, gt=0, description="Budget when none is given.")
    recent_messages: int = Field(default=6, ge=0, description="Newest messages always offered.")
    k: int = Field(default=200, gt=0, description="Candidates per search before ranking.")
    follow_up: int = Field(
        default=0, ge=0, le=50, description="How many of the best first hits of each search "
        "lend their names and numbers to a second keyword search (0: none).",
    )  # fmt: skip
    pending_vectors: int = Field(
        default=32,
        ge=0,
        le=256,
        description="The user's newest messages not indexed yet embedded with the query "
        "(found by meaning at once); older ones are found by keyword (0: keyword only).",
    )
    standing: int = Field(
        default=8, ge=0, le=20, description="Standing instructions offered first (0: none)."
    )
    standing_similarity: float = Field(
        default=0.15, ge=-1, le=1, description="Their least similarity to the query."
    )
    order: list[ContextSection] = Field(
        default_factory=lambda: list(SECTIONS), min_length=4, max_length=4
    )
    shares: SharesConfig = Field(default_factory=lambda: SharesConfig())
    weights: WeightsConfig = Field(default_factory=lambda: WeightsConfig())
    recency_half_life_days: float = Field(default=30.0, gt=0)
    near_duplicate: float = Field(
        default=0.9, gt=0, le=1, description="Word-set Jaccard at which two memories are one."
    )
    diversity: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Penalty x a memory's greatest similarity to one already chosen (MMR).",
    )
    floor: FloorConfig = Field(default_factory=lambda: FloorConfig())

    @field_validator("order")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        repeated = sorted({s for s in value if value.count(s) > 1})
        if repeated:
            raise ValueError(f"lists {', '.join(repeated)} more than once")
        return value
