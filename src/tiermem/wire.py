"""The JSON forms of tiermem's public types, shared by the HTTP server and the client.

One module writes and reads them, so what the server sends is what the client rebuilds:
the values of :mod:`tiermem.types` (:class:`~tiermem.types.MemoryRecord`,
:class:`~tiermem.types.SearchResult`, :class:`~tiermem.types.Context`...) and typed
errors (``{error, field, message, fix}``, where ``error`` names a class of
:mod:`tiermem.errors`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from tiermem import errors
from tiermem.errors import InputError, TiermemError
from tiermem.messages import Message
from tiermem.types import (
    Context,
    ContextItem,
    MemoryRecord,
    SearchEvidence,
    SearchResult,
    SessionInfo,
    TranscriptRow,
    WorkStats,
)


def record_to_json(record: MemoryRecord, user_id: str | None = None) -> dict[str, Any]:
    """A record as JSON; ``user_id`` replaces the stored one (the caller's own id)."""
    data = record.to_dict()
    if user_id is not None:
        data["user_id"] = user_id
        if "user_id" in data["metadata"]:  # messages carry their user in metadata too
            data["metadata"] = {**data["metadata"], "user_id": user_id}
    return data


def record_from_json(data: Mapping[str, Any]) -> MemoryRecord:
    """Inverse of :func:`record_to_json` (the embedding is not sent)."""
    return MemoryRecord(
        id=uuid.UUID(data["id"]),
        user_id=data["user_id"],
        content=data["content"],
        memory_type=data["memory_type"],
        agent_id=data.get("agent_id"),
        session_id=data.get("session_id"),
        importance=float(data["importance"]),
        metadata=dict(data.get("metadata") or {}),
        created_at=datetime.fromisoformat(data["created_at"]),
        accessed_at=datetime.fromisoformat(data["accessed_at"]),
        access_count=int(data["access_count"]),
        content_hash=data.get("content_hash", ""),
    )


def hit_to_json(hit: SearchResult, user_id: str | None = None) -> dict[str, Any]:
    evidence = hit.evidence.to_dict() if hit.evidence else None
    return {"memory": record_to_json(hit.record, user_id), "score": hit.score, "evidence": evidence}


def hit_from_json(data: Mapping[str, Any]) -> SearchResult:
    evidence = data.get("evidence")
    return SearchResult(
        record_from_json(data["memory"]),
        float(data["score"]),
        SearchEvidence(**evidence) if evidence else None,
    )


TEXT_CACHE = 8192
"""Timestamps and ids whose text forms are kept: a user's contexts name the same memories
turn after turn, and an aware ``isoformat`` costs about 5 µs (a context's items were most
of the server's own CPU per answer, docs/notes/2026-11-28-server.md)."""


@lru_cache(maxsize=TEXT_CACHE)
def _utc_text(moment: datetime) -> str:
    return moment.isoformat()


def time_text(moment: datetime) -> str:
    """``moment.isoformat()``; UTC moments (what stores hold) from a bounded cache. Only
    UTC is cached: equal moments in other offsets compare equal but print differently."""
    return _utc_text(moment) if moment.tzinfo is timezone.utc else moment.isoformat()


@lru_cache(maxsize=TEXT_CACHE)
def id_text(memory_id: uuid.UUID) -> str:
    """``str(memory_id)``, from a bounded cache."""
    return str(memory_id)


def context_to_json(context: Context) -> dict[str, Any]:
    """A context as JSON: messages, and per item section, source, score and tokens."""
    return {
        "query": context.query,
        "messages": context.messages,
        "items": [
            {
                "section": item.section,
                "source": item.source,
                "content": item.content,
                "score": item.score,
                "tokens": item.tokens,
                "timestamp": time_text(item.timestamp) if item.timestamp else None,
                "memory_id": id_text(item.memory_id) if item.memory_id else None,
                "similarity": item.similarity,
                "keywords": item.keywords,
                **_excerpt_json(item),
            }
            for item in context.items
        ],
        "total_tokens": context.total_tokens,
        "max_tokens": context.max_tokens,
        "degraded": context.degraded,
    }


def context_from_json(data: Mapping[str, Any]) -> Context:
    """Inverse of :func:`context_to_json`."""
    items = [
        ContextItem(
            section=item["section"],
            source=item["source"],
            content=item["content"],
            score=float(item["score"]),
            tokens=int(item["tokens"]),
            timestamp=datetime.fromisoformat(item["timestamp"]) if item.get("timestamp") else None,
            memory_id=uuid.UUID(item["memory_id"]) if item.get("memory_id") else None,
            similarity=item.get("similarity"),
            keywords=item.get("keywords"),
            **_excerpt_from_json(item),
        )
        for item in data["items"]
    ]
    return Context(
        messages=list(data["messages"]),
        items=items,
        total_tokens=int(data["total_tokens"]),
        max_tokens=int(data["max_tokens"]),
        query=data.get("query", ""),
        degraded=list(data.get("degraded") or []),
    )


def _excerpt_json(item: ContextItem) -> dict[str, Any]:
    """The message an item is (``message_id``), and with ``span`` the characters of its
    text the item shows as an excerpt (``get_message`` gives it whole)."""
    span = getattr(item, "span", None)
    return {"message_id": getattr(item, "message_id", None), "span": list(span) if span else None}


def _excerpt_from_json(item: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`ContextItem`'s ``message_id`` and ``span`` from an item's JSON (when set)."""
    found: dict[str, Any] = {}
    if item.get("message_id"):
        found["message_id"] = str(item["message_id"])
    if item.get("span"):
        found["span"] = (int(item["span"][0]), int(item["span"][1]))
    return found


def message_to_json(message: Message, user_id: str | None = None) -> dict[str, Any]:
    """A message as :meth:`Message.to_dict` writes it; ``user_id`` replaces the stored one
    in its metadata (the caller's own id)."""
    data = message.to_dict()
    if user_id is not None and "user_id" in data["metadata"]:
        data["metadata"] = {**data["metadata"], "user_id": user_id}
    return data


def session_to_json(session: SessionInfo) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "messages": session.messages,
        "first_at": session.first.isoformat(),
        "last_at": session.last.isoformat(),
    }


def session_from_json(data: Mapping[str, Any]) -> SessionInfo:
    return SessionInfo(
        session_id=data["session_id"],
        messages=int(data["messages"]),
        first=datetime.fromisoformat(data["first_at"]),
        last=datetime.fromisoformat(data["last_at"]),
    )


def row_to_json(row: TranscriptRow, user_id: str) -> dict[str, Any]:
    """A transcript row with its work state, for the caller ``user_id``."""
    return {
        "seq": row.seq,
        "user_id": user_id,
        "session_id": row.session_id,
        "message": message_to_json(row.message, user_id),
        "state": row.state,
        "attempts": row.attempts,
        "error": row.error,
        "memory_id": row.memory_id,
    }


def row_from_json(data: Mapping[str, Any]) -> TranscriptRow:
    return TranscriptRow(
        seq=int(data["seq"]),
        user_id=data["user_id"],
        session_id=data["session_id"],
        message=Message.from_dict(data["message"]),
        state=data["state"],
        attempts=int(data["attempts"]),
        error=data["error"],
        memory_id=data["memory_id"],
    )


def work_to_json(stats: WorkStats) -> dict[str, Any]:
    return {"pending": stats.pending, "done": stats.done, "failed": stats.failed}


def work_from_json(data: Mapping[str, Any]) -> WorkStats:
    return WorkStats(int(data["pending"]), int(data["done"]), int(data["failed"]))


def error_to_json(exc: TiermemError) -> dict[str, Any]:
    """``{error, field, message, fix}`` of a typed error."""
    if isinstance(exc, InputError):
        return {
            "error": error_name(exc),
            "field": exc.field,
            "message": exc.problem,
            "fix": exc.hint,
        }
    return {"error": error_name(exc), "field": None, "message": str(exc), "fix": ""}


def error_name(exc: TiermemError) -> str:
    """The name of ``exc``'s class, or of its nearest base in :mod:`tiermem.errors` (the
    classes a client raises): ``CircuitOpenError`` is a ``ProviderUnavailableError``."""
    known = (c for c in type(exc).__mro__ if getattr(errors, c.__name__, None) is c)
    return next(known, TiermemError).__name__


def error_from_json(data: Mapping[str, Any]) -> TiermemError:
    """The typed error an error body describes (its class from :mod:`tiermem.errors`;
    :class:`TiermemError` for a name the client does not know)."""
    cls = getattr(errors, str(data.get("error")), None)
    message = str(data.get("message") or "")
    if not (isinstance(cls, type) and issubclass(cls, TiermemError)):
        return TiermemError(f"{data.get('error')}: {message}")
    if issubclass(cls, InputError):
        return cls(str(data.get("field") or ""), message, str(data.get("fix") or ""))
    return cls(message)


def metadata_filter_from_json(text: str | None, field: str, hint: str) -> dict[str, Any] | None:
    """A metadata filter written as JSON (the CLI's ``--metadata``, the server's
    ``?metadata=``): an object of equalities, whose values the store checks; None stays
    None. ``field`` and ``hint`` name the option and how to write it in the errors.

    Raises:
        SerializationError: ``text`` is not JSON.
        InvalidTypeError: it is JSON but not an object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise errors.SerializationError(field, f"is not JSON: {exc}", hint) from None
    if not isinstance(value, dict):
        raise errors.InvalidTypeError(field, f"expected a JSON object, got {type(value).__name__}")
    return value


def problem_to_error(problem: Mapping[str, Any], where: str) -> InputError:
    """The typed error for one problem pydantic found in a request (its ``errors()``
    entry); ``where`` names what documents the accepted values (``/openapi.json``)."""
    loc = [str(p) for p in problem.get("loc", ()) if p not in ("body", "query", "path")]
    field = ".".join(loc) or "body"
    kind = str(problem.get("type", ""))
    message = _readable(str(problem.get("msg", "is not valid")))
    if kind == "missing" and loc and loc[-1] == "user_id":
        return errors.MissingUserError(field, "is required", "every memory belongs to one user")
    if kind == "missing":
        return InputError(field, "is required", f"see {where}")
    if kind == "literal_error":
        expected = (problem.get("ctx") or {}).get("expected", "")
        got = problem.get("input")
        return InputError(field, f"must be one of {expected}, got {got!r}", f"see {where}")
    if kind.endswith(("_type", "_parsing")):
        return errors.InvalidTypeError(field, message, f"see {where} for the types")
    if kind == "extra_forbidden":  # as the library refuses an argument it does not take
        return errors.InvalidTypeError(field, "is not a field of this request", f"see {where}")
    if kind in RANGE_ERRORS:  # as the library refuses a number out of its range
        return errors.InvalidSizeError(field, message, f"see {where}")
    return InputError(field, message, f"see {where}")


RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
"""pydantic's kinds of a number out of its field's range."""


def _readable(message: str) -> str:
    """pydantic's "Input should be ..." as a field's problem: "should be ..."."""
    return message.removeprefix("Input ").removeprefix("Value error, ")
