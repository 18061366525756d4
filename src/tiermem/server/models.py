"""Request and response bodies of the HTTP API (what /openapi.json documents).

Requests forbid unknown keys, so a misspelt field is named in the error instead of being
silently ignored; values are checked again by the library's own validators.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

MemoryTypeName = Literal["message", "fact", "preference", "context", "summary", "tool", "passage"]
SearchModeName = Literal["hybrid", "vector", "keyword"]
MetadataValue = str | int | float | bool | None


class Request(BaseModel):
    # strict: false is not a number and "3" is not an int (the schema says so)
    model_config = ConfigDict(extra="forbid", strict=True)


_DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d")


def _date_time_text(value: object) -> object:
    """Refuse what the schema's ``date-time`` does not allow but pydantic would read as a
    time (a number of seconds, ``"3600.0"``, a bare date), so no request is accepted that
    the schema calls invalid."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _DATE_TIME.match(value):
        raise ValueError("expected an RFC 3339 date-time such as 2024-05-01T12:00:00Z")
    return value


# ISO 8601 text in JSON and in query strings
Timestamp = Annotated[datetime, BeforeValidator(_date_time_text), Field(strict=False)]

_INTEGER = re.compile(r"-?[0-9]+")


def _integer_text(value: object) -> object:
    """Refuse query text the schema's ``integer`` does not allow but pydantic would read
    as one (``"+0.0"``, ``"1e2"``, other scripts' digits). Any number of digits is an
    integer: one out of range is the library's InvalidSizeError naming the parameter."""
    if isinstance(value, str) and not _INTEGER.fullmatch(value):
        raise PydanticCustomError("int_parsing", "Input should be a valid integer")
    return value


# an integer in a query string
QueryInt = Annotated[int, BeforeValidator(_integer_text)]


class MessagesIn(Request):
    user_id: str
    session_id: str | None = None
    agent_id: str | None = None
    messages: list[dict[str, Any]] = Field(
        description="OpenAI-format messages ({role, content, name?, tool_calls?, "
        "tool_call_id?}) or tiermem messages (Message.to_dict())"
    )


class MemoryFields(Request):
    """What ``Memory.remember`` takes besides the user."""

    content: str
    memory_type: MemoryTypeName = "fact"
    importance: float = 0.5
    metadata: dict[str, Any] | None = None
    session_id: str | None = None
    agent_id: str | None = None


class MemoryIn(MemoryFields):
    user_id: str


class MemoryItem(MemoryFields):
    created_at: Timestamp | None = None


class MemoriesIn(Request):
    user_id: str
    memories: list[MemoryItem] = Field(
        description="memories stored in one transaction, all or none (created_at optional)"
    )


class MemoryPatch(Request):
    content: str | None = None
    memory_type: MemoryTypeName | None = None
    importance: float | None = None
    metadata: dict[str, Any] | None = None


class Filters(Request):
    memory_type: MemoryTypeName | list[MemoryTypeName] | None = None
    session_id: str | None = None
    agent_id: str | None = None
    created_after: Timestamp | None = None
    created_before: Timestamp | None = None
    metadata: dict[str, MetadataValue] | None = None


class SearchIn(Request):
    user_id: str
    query: str
    k: int = 10
    filters: Filters | None = None
    mode: SearchModeName = "hybrid"
    min_score: float = Field(
        0.0, description="leave out hits that score less (0 to 1; 0.2 is a good start)"
    )


class ContextIn(Request):
    user_id: str
    query: str
    session_id: str | None = None
    max_tokens: int | None = None


class SessionIn(Request):
    session_id: str | None = Field(None, description="none: the messages without a session")


class MessageIdsIn(Request):
    message_ids: list[str] = Field(description="ids of the user's messages (Message.message_id)")


class FlushIn(Request):
    timeout: float = Field(10.0, ge=0, le=60)


class KeyIn(Request):
    tenant: str
    name: str | None = None


class ErrorOut(BaseModel):
    error: str = Field(description="the tiermem.errors class name")
    field: str | None
    message: str
    fix: str


class IdsOut(BaseModel):
    ids: list[str]


class IdOut(BaseModel):
    id: str


class MemoryOut(BaseModel):
    id: str
    user_id: str
    agent_id: str | None
    session_id: str | None
    content: str
    content_hash: str
    memory_type: str
    importance: float
    metadata: dict[str, Any]
    created_at: str
    accessed_at: str
    access_count: int


class MemoryPage(BaseModel):
    memories: list[MemoryOut]
    next_cursor: str | None


class EvidenceOut(BaseModel):
    """What the score was made of, and how each search ranked the memory (see
    docs/stores.md, "Scores")."""

    similarity: float | None = Field(
        default=None, description="its cosine similarity to the query (keyword mode: none)"
    )
    keywords: float | None = Field(
        default=None, description="the share of the query's keywords it holds (0 to 1)"
    )
    vector_rank: int | None = Field(
        default=None, description="its place in the vector list (1 = first)"
    )
    keyword_rank: int | None = Field(default=None, description="its place in the keyword list")
    keyword_score: float | None = Field(
        default=None, description="the engine's text rank (bm25, ts_rank_cd)"
    )
    rrf: float | None = Field(
        default=None, description="hybrid: the reciprocal-rank-fusion value sum(1/(60 + rank))"
    )
    fused_rank: int | None = Field(
        default=None, description="hybrid: its place in the fusion's order (1 = first)"
    )


class HitOut(BaseModel):
    memory: MemoryOut
    score: float = Field(
        description="the relevance to the query in [0, 1], from the query and the memory "
        "alone: the same at every k (see docs/stores.md, Scores)"
    )
    evidence: EvidenceOut | None = Field(
        default=None, description="the similarity, keywords and ranks behind the score"
    )


class SearchOut(BaseModel):
    results: list[HitOut]


class ContextItemOut(BaseModel):
    section: str
    source: str
    content: str
    score: float
    tokens: int
    timestamp: str | None
    memory_id: str | None
    similarity: float | None = Field(default=None, description="cosine similarity to the query")
    keywords: float | None = Field(default=None, description="share of the query's keywords")
    message_id: str | None = Field(
        default=None,
        description="the message it is, or shows an excerpt of: "
        "GET /v1/messages/{message_id}?user_id= gives it whole",
    )
    span: list[int] | None = Field(
        default=None, description="[start, end): the characters of the message's text it shows"
    )


class ContextOut(BaseModel):
    query: str
    messages: list[dict[str, Any]]
    items: list[ContextItemOut]
    total_tokens: int
    max_tokens: int
    degraded: list[str] = Field(
        default_factory=list,
        description="what was down while the context was built, one note each "
        "('embedder: ...': found by keyword only); empty when every part answered",
    )


class SynopsisOut(BaseModel):
    user_id: str
    identity: str
    context: str
    generated_at: str
    source: str


class SessionOut(BaseModel):
    session_id: str | None
    messages: int
    first_at: str
    last_at: str


class SessionsOut(BaseModel):
    sessions: list[SessionOut]


class MessagesOut(BaseModel):
    messages: list[dict[str, Any]] = Field(description="tiermem messages (Message.to_dict())")


class MessageOut(BaseModel):
    message: dict[str, Any] = Field(description="the tiermem message, whole (Message.to_dict())")


class RowOut(BaseModel):
    seq: int
    user_id: str
    session_id: str | None
    message: dict[str, Any]
    state: str
    attempts: int
    error: str | None
    memory_id: str | None


class UserWorkOut(BaseModel):
    pending: int = Field(description="messages stored, not yet embedded or summarized")
    done: int
    failed: int = Field(description="messages that could not be indexed (see rows)")
    rows: list[RowOut] = Field(description="the failed messages, with their error")


class RetriedOut(BaseModel):
    retried: int


class UsersOut(BaseModel):
    users: list[str]
    next_cursor: str | None


class StatsOut(BaseModel):
    count: int
    by_type: dict[str, int]
    oldest: str | None
    newest: str | None
    total_access_count: int
    mean_importance: float | None


class WorkStatsOut(BaseModel):
    pending: int
    done: int
    failed: int


class WorkOut(BaseModel):
    pending: int = Field(description="messages queued in this process, not yet in the store")
    failures: int = Field(description="batches this process's queue retried after a failure")
    last_error: str | None
    store: WorkStatsOut | None = Field(
        None, description="every user's messages pending, done and failed (development mode)"
    )


class FactsOut(BaseModel):
    facts: list[MemoryOut]


class VersionsOut(BaseModel):
    versions: list[MemoryOut] = Field(description="every version of the fact, oldest first")


class ExtractedOut(BaseModel):
    ids: list[str] = Field(description="the facts written or merged")


class SummaryOut(BaseModel):
    summary: str | None = Field(description="the session's final summary (none: nothing to fold)")


class RunningSummaryOut(BaseModel):
    summary: str | None = Field(
        description="the running summary of the session's messages older than the recent "
        "window (none while there is none)"
    )


class DeletedOut(BaseModel):
    deleted: bool


class ErasedOut(BaseModel):
    deleted: int


class FlushOut(BaseModel):
    done: bool


class StatusOut(BaseModel):
    status: str
    checks: dict[str, str] = {}


class KeyOut(BaseModel):
    id: str
    tenant: str
    name: str | None
    created_at: str
    revoked_at: str | None


class KeyCreatedOut(KeyOut):
    key: str = Field(description="the key itself; shown once, stored only as a hash")


class KeysOut(BaseModel):
    keys: list[KeyOut]


class ImportedOut(BaseModel):
    """What an archive added (nothing when it was imported before)."""

    messages: int
    memories: int
