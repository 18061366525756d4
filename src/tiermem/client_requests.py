"""The client's requests: one builder per operation, with the signature users call and
no I/O. Each returns a :class:`Call` (the request, and how to read its answer) that
:class:`~tiermem.client.MemoryClient` sends and :class:`~tiermem.client.AsyncMemoryClient`
awaits."""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from typing_extensions import Unpack

from tiermem.errors import InputError, InvalidTypeError
from tiermem.messages import Content, Message
from tiermem.planner import Context
from tiermem.stores.ops import Filters, make_filter
from tiermem.stores.queue import WorkStats
from tiermem.stores.records import MemoryRecord, SearchResult, StoreStats
from tiermem.stores.transcript import SessionInfo, TranscriptRow
from tiermem.stores.validate import (
    build_message,
    build_messages,
    check_message_ids,
    check_user_id,
)
from tiermem.synopsis import Synopsis
from tiermem.wire import (
    context_from_json,
    hit_from_json,
    record_from_json,
    row_from_json,
    session_from_json,
    work_from_json,
)

NDJSON = "application/x-ndjson"
T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    missing_ok: bool = False
    ndjson: bytes | None = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _stats(data: Mapping[str, Any]) -> StoreStats:
    def when(value: str | None) -> datetime | None:
        return datetime.fromisoformat(value) if value else None

    return StoreStats(
        count=data["count"],
        by_type=dict(data["by_type"]),
        oldest=when(data["oldest"]),
        newest=when(data["newest"]),
        total_access_count=data["total_access_count"],
        mean_importance=data["mean_importance"],
    )


# -- one request builder per operation: the signature users call, no I/O ---------------


def add(
    role: str,
    content: Content,
    user_id: str,
    session_id: str | None = None,
    timestamp: Any = None,
    metadata: Mapping[str, Any] | None = None,
    *,
    agent_id: str | None = None,
    **fields: Any,
) -> Call[Message]:
    """Add one message of a conversation (see :meth:`tiermem.Memory.add`)."""
    message = build_message(role, content, user_id, session_id, timestamp, metadata, fields)
    return _append([message], user_id, session_id, agent_id, lambda batch: batch[0])


def add_messages(
    messages: Iterable[Message | Mapping[str, Any]],
    user_id: str,
    session_id: str | None = None,
    *,
    agent_id: str | None = None,
) -> Call[builtins.list[Message]]:
    """Add a history, all or none (see :meth:`tiermem.Memory.add_messages`)."""
    return _append(
        build_messages(messages, user_id, session_id), user_id, session_id, agent_id, list
    )


def _append(
    batch: builtins.list[Message],
    user_id: str,
    session_id: str | None,
    agent_id: str | None,
    result: Callable[[builtins.list[Message]], T],
) -> Call[T]:
    body = {
        "user_id": user_id,
        "session_id": session_id,
        "agent_id": agent_id,
        "messages": [m.to_dict() for m in batch],
    }
    return Call("POST", "/v1/messages", lambda data: result(batch), json=body)


def remember(
    content: str,
    user_id: str,
    memory_type: str = "fact",
    importance: float = 0.5,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[str]:
    """Store a fact, preference or other memory now; its id."""
    body = {
        "user_id": user_id,
        "content": content,
        "memory_type": memory_type,
        "importance": importance,
        "session_id": session_id,
        "agent_id": agent_id,
        "metadata": metadata,
    }
    return Call("POST", "/v1/memories", lambda data: str(data["id"]), json=body)


def remember_many(memories: Iterable[Mapping[str, Any]], user_id: str) -> Call[builtins.list[str]]:
    """Store several memories in one transaction, all or none; their ids, in order."""
    if isinstance(memories, Iterable) and not isinstance(memories, (str, bytes, Mapping)):
        memories = builtins.list(memories)
    body = {"user_id": user_id, "memories": memories}
    read = lambda d: [str(i) for i in d["ids"]]  # noqa: E731
    return Call("POST", "/v1/batch/memories", read, json=body)


def update_memory(
    memory_id: str,
    user_id: str,
    *,
    content: str | None = None,
    memory_type: str | None = None,
    importance: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Call[MemoryRecord]:
    """Change a memory's content, type, importance or metadata; the new record."""
    changes = {"content": content, "memory_type": memory_type, "importance": importance}
    body = {k: v for k, v in {**changes, "metadata": metadata}.items() if v is not None}
    path = f"/v1/memories/{_segment(memory_id, 'memory_id')}"
    return Call("PATCH", path, record_from_json, json=body, params={"user_id": user_id})


def get_context(
    query: str,
    user_id: str,
    session_id: str | None = None,
    max_tokens: int | None = None,
) -> Call[Context]:
    """The context for ``query``, fitted to ``max_tokens`` and explained."""
    body = {"user_id": user_id, "query": query, "session_id": session_id, "max_tokens": max_tokens}
    return Call("POST", "/v1/context", context_from_json, json=body)


def search(
    query: str,
    user_id: str,
    k: int = 10,
    filters: Mapping[str, Any] | None = None,
    *,
    mode: str = "hybrid",
) -> Call[builtins.list[SearchResult]]:
    """Search the user's long-term memories, best first."""
    body = {"user_id": user_id, "query": query, "k": k, "filters": filters, "mode": mode}
    return Call("POST", "/v1/search", lambda d: [hit_from_json(h) for h in d["results"]], json=body)


def list_memories(
    user_id: str,
    *,
    limit: int = 100,
    offset: int = 0,
    **filters: Unpack[Filters],
) -> Call[builtins.list[MemoryRecord]]:
    """A page of the user's memories, newest first (``metadata`` is sent as JSON)."""
    if isinstance(offset, int) and not isinstance(offset, bool) and offset < 0:
        raise InputError("offset", f"{offset} is negative", "use 0 or more")
    make_filter(**filters)  # the store's checks, before anything is sent
    metadata, memory_type = filters.get("metadata"), filters.get("memory_type")
    try:
        wanted = None if metadata is None else json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError("metadata", f"cannot be sent as JSON: {exc}") from exc
    params = {
        **filters,
        "user_id": user_id,
        "limit": limit,
        "cursor": str(offset) if offset else None,
        "memory_type": [memory_type] if isinstance(memory_type, str) else memory_type,
        "metadata": wanted,
    }
    read = _records("memories")
    return Call("GET", "/v1/memories", read, params=params)


def get_memory(memory_id: str, user_id: str) -> Call[MemoryRecord | None]:
    """One memory of the user; None if the user has none with this id."""
    path = f"/v1/memories/{_segment(memory_id, 'memory_id')}"
    return Call("GET", path, record_from_json, params={"user_id": user_id}, missing_ok=True)


def history(user_id: str, session_id: str | None = None) -> Call[builtins.list[Message]]:
    """Every message of a session, in order, whole."""
    params = {"session_id": session_id}
    return Call("GET", _user_path(user_id, "messages"), _messages_read, params=params)


def recent(
    user_id: str, session_id: str | None = None, limit: int = 20
) -> Call[builtins.list[Message]]:
    """The newest ``limit`` messages of a session, oldest first."""
    params = {"session_id": session_id, "limit": limit}
    return Call("GET", _user_path(user_id, "recent"), _messages_read, params=params)


def sessions(user_id: str) -> Call[builtins.list[SessionInfo]]:
    """The user's sessions, most recently active first."""
    read = lambda d: [session_from_json(s) for s in d["sessions"]]  # noqa: E731
    return Call("GET", _user_path(user_id, "sessions"), read)


def synopsis(user_id: str) -> Call[Synopsis]:
    """The user's synopsis (cached; generated on a miss)."""
    return Call("GET", _user_path(user_id, "synopsis"), Synopsis.from_dict)


def generate_synopsis(user_id: str) -> Call[Synopsis]:
    """Regenerate and cache the user's synopsis now."""
    return Call("POST", _user_path(user_id, "synopsis"), Synopsis.from_dict)


def facts(
    user_id: str, *, current: bool = True, limit: int = 1000
) -> Call[builtins.list[MemoryRecord]]:
    """Facts extracted from the user's conversations, newest first."""
    params = {"current": current, "limit": limit}
    return Call("GET", _user_path(user_id, "facts"), _records("facts"), params=params)


def fact_history(memory_id: str, user_id: str) -> Call[builtins.list[MemoryRecord]]:
    """Every version of a fact, oldest first."""
    path = _user_path(user_id, f"facts/{_segment(memory_id, 'memory_id')}/history")
    return Call("GET", path, _records("versions"))


def stats(user_id: str) -> Call[StoreStats]:
    """Counts per type, time span, access and importance figures of the user."""
    return Call("GET", _user_path(user_id, "stats"), _stats)


def forget(memory_id: str, user_id: str) -> Call[bool]:
    """Delete one memory and what was derived from it; False if there was none."""
    path = f"/v1/memories/{_segment(memory_id, 'memory_id')}"
    return Call("DELETE", path, lambda d: bool(d["deleted"]), params={"user_id": user_id})


def forget_messages(user_id: str, message_ids: Iterable[str]) -> Call[int]:
    """Delete these messages of the user; how many went."""
    body = {"message_ids": check_message_ids(message_ids)}
    return Call("POST", _user_path(user_id, "messages/forget"), _deleted, json=body)


def forget_session(user_id: str, session_id: str | None = None) -> Call[int]:
    """Delete a session: its messages, summary and index lines."""
    body = {"session_id": session_id}
    return Call("POST", _user_path(user_id, "sessions/forget"), _deleted, json=body)


def forget_user(user_id: str) -> Call[int]:
    """Erase everything of the user; how many long-term memories went."""
    return Call("DELETE", _user_path(user_id), _deleted)


def end_session(user_id: str, session_id: str | None = None) -> Call[str | None]:
    """Fold a session into its final summary; the summary."""
    body = {"session_id": session_id}
    return Call("POST", _user_path(user_id, "sessions/end"), lambda d: d["summary"], json=body)


def extract_facts(user_id: str, session_id: str | None = None) -> Call[builtins.list[str]]:
    """Extract facts from the session's unread messages now; the facts' ids."""
    body = {"session_id": session_id}
    path = _user_path(user_id, "facts/extract")
    return Call("POST", path, lambda d: [str(i) for i in d["ids"]], json=body)


def work_stats(user_id: str | None = None) -> Call[WorkStats]:
    """Messages pending, done and failed (one user's, or everyone's)."""
    if user_id is None:
        return Call("GET", "/v1/work", _everyone)
    return Call("GET", _user_path(user_id, "work"), work_from_json, params={"limit": 1})


def failed(user_id: str, limit: int = 100) -> Call[builtins.list[TranscriptRow]]:
    """The user's messages that could not be indexed, with their errors."""
    read = lambda d: [row_from_json(r) for r in d["rows"]]  # noqa: E731
    return Call("GET", _user_path(user_id, "work"), read, params={"limit": limit})


def retry_failed(user_id: str) -> Call[int]:
    """Queue the user's failed messages again; how many."""
    return Call("POST", _user_path(user_id, "work/retry"), lambda d: int(d["retried"]))


def import_archive(
    archive: Iterable[str | bytes | Mapping[str, Any]], user_id: str | None = None
) -> Call[dict[str, int]]:
    """Restore an archive of :meth:`tiermem.Memory.export` as its own user or as
    ``user_id``; what was added, by kind (all or nothing; again adds nothing)."""
    if isinstance(archive, (str, bytes, Mapping)) or not isinstance(archive, Iterable):
        raise InvalidTypeError(
            "archive", "expected an iterable of lines", "pass open(path) or a list of lines"
        )
    lines = []
    for line in archive:
        if isinstance(line, Mapping):
            line = json.dumps(dict(line), ensure_ascii=False)
        elif isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        if not isinstance(line, str):
            raise InvalidTypeError("archive", f"holds a {type(line).__name__}, not a line")
        if line.strip():
            lines.append(line.rstrip("\n"))
    if user_id is None:
        user_id = _archive_user(lines[0] if lines else "")
    read = lambda d: {k: int(v) for k, v in d.items()}  # noqa: E731
    ndjson = "\n".join(lines).encode("utf-8")
    return Call("POST", _user_path(user_id, "import"), read, ndjson=ndjson)


def _archive_user(header: str) -> str:
    """The user an archive's header names."""
    try:
        data = json.loads(header)
    except ValueError:
        data = {}
    user_id = data.get("user_id") if isinstance(data, dict) else None
    if not isinstance(user_id, str):
        raise InputError("line 1", "is not a tiermem-archive header", "pass user_id=")
    return user_id


def export_path(user_id: str, include_vectors: bool) -> tuple[str, dict[str, str]]:
    if not isinstance(include_vectors, bool):
        raise InvalidTypeError("include_vectors", "must be a bool")
    return _user_path(user_id, "export"), {"include_vectors": str(include_vectors).lower()}


def flush(timeout: float | None = None) -> Call[bool]:
    """Wait until the server's pending work is done (at most 60 s); False on timeout."""
    if not isinstance(timeout, (int, float, type(None))) or isinstance(timeout, bool):
        raise InvalidTypeError("timeout", f"must be seconds or None, got {timeout!r}")
    body = {"timeout": 60.0 if timeout is None else min(timeout, 60.0)}
    return Call("POST", "/v1/flush", lambda d: bool(d["done"]), json=body)


def _user_path(user_id: str, rest: str = "") -> str:
    """The path of a user's resource; the id checked as Memory checks it."""
    return f"/v1/users/{_segment(check_user_id(user_id), 'user_id')}" + (f"/{rest}" if rest else "")


def _records(key: str) -> Callable[[Any], builtins.list[MemoryRecord]]:
    return lambda d: [record_from_json(r) for r in d[key]]


def _messages_read(data: Any) -> builtins.list[Message]:
    return [Message.from_dict(m) for m in data["messages"]]


def _everyone(data: Any) -> WorkStats:
    if data.get("store") is None:
        raise InputError(
            "user_id", "is required with a tenant's key", "ask for one user's work_stats"
        )
    return work_from_json(data["store"])


def _deleted(data: Any) -> int:
    return int(data["deleted"])


def _segment(value: Any, field: str = "id") -> str:
    """A path segment, percent-encoded: a user id may hold '/', '?' or spaces, and a
    segment of dots (``.``, ``..``) is encoded so no HTTP library removes it."""
    if isinstance(value, uuid.UUID):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidTypeError(field, f"must be a str, got {type(value).__name__}")
    from urllib.parse import quote

    return quote(value, safe="").replace(".", "%2E")


def http_arguments(call: Call[Any]) -> dict[str, Any]:
    """httpx's arguments of a call: JSON bodies as JSON, and only the parameters given
    (a None is left out, not sent as an empty value)."""
    params = {k: v for k, v in (call.params or {}).items() if v is not None}
    if call.ndjson is not None:
        return {"content": call.ndjson, "headers": {"content-type": NDJSON}, "params": params}
    return {"json": _jsonable(call.json), "params": _jsonable(params) or None}
