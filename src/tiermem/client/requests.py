"""The client's requests: one builder per operation, with the contract's signature
(:class:`~tiermem.api.MemoryAPI`, through :func:`request`) and no I/O. Each returns a
:class:`Call` (the request, and how to read its answer) that
:class:`~tiermem.client.MemoryClient` sends and
:class:`~tiermem.client.AsyncMemoryClient` awaits."""

from __future__ import annotations

import builtins
import inspect
import json
import math
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from tiermem.api import MemoryAPI
from tiermem.errors import InputError, InvalidTypeError
from tiermem.messages import Message
from tiermem.types import (
    Context,
    MemoryRecord,
    SearchResult,
    SessionInfo,
    StoreStats,
    Synopsis,
    TranscriptRow,
    WorkStats,
)
from tiermem.types.checks import (
    build_message,
    build_messages,
    check_flag,
    check_importance,
    check_limit,
    check_message_id,
    check_message_ids,
    check_min_score,
    check_timeout,
    check_user_id,
)
from tiermem.types.filters import check_search_filters, make_filter
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
R = TypeVar("R")
P = ParamSpec("P")


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
    accept: tuple[int, ...] = ()
    """Error statuses whose body is the answer (``/readyz``'s 503 says what is down)."""


def _jsonable(value: Any, field: str | None = None) -> Any:
    """``value`` as JSON takes it (times as ISO text); ``field``: the top-level key it is
    under, which an error names."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, field or str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, field) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(
            field or "body", f"holds {value}, which JSON cannot carry", "use finite numbers"
        )
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


# -- one request builder per operation: the contract's signature, no I/O ----------------


class Arguments(dict[str, Any]):
    """A call's arguments by name, the contract's defaults filled in (``a.user_id``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def request(
    operation: Callable[Concatenate[Any, P], R],
) -> Callable[[Callable[[Arguments], Call[R]]], Callable[P, Call[R]]]:
    """A request builder that takes ``operation``'s arguments as the contract
    (:class:`~tiermem.api.MemoryAPI`) declares them: one signature for every face, and the
    answer's type checked against the contract's."""
    signature = inspect.signature(operation)

    def decorate(build: Callable[[Arguments], Call[R]]) -> Callable[P, Call[R]]:
        def builder(*args: P.args, **kwargs: P.kwargs) -> Call[R]:
            bound = signature.bind(None, *args, **kwargs)
            bound.apply_defaults()
            arguments = Arguments(bound.arguments)
            del arguments["self"]
            return build(arguments)

        builder.__name__ = builder.__qualname__ = operation.__name__
        builder.__doc__ = build.__doc__ or operation.__doc__
        return builder

    return decorate


@request(MemoryAPI.add)
def add(a: Arguments) -> Call[Message]:
    """Add one message of a conversation (see :meth:`tiermem.Memory.add`)."""
    message = build_message(
        a.role, a.content, a.user_id, a.session_id, a.timestamp, a.metadata, a.fields
    )
    return _append([message], a, lambda batch: batch[0])


@request(MemoryAPI.add_messages)
def add_messages(a: Arguments) -> Call[builtins.list[Message]]:
    """Add a history, all or none (see :meth:`tiermem.Memory.add_messages`)."""
    return _append(build_messages(a.messages, a.user_id, a.session_id), a, list)


def _append(
    batch: builtins.list[Message], a: Arguments, result: Callable[[builtins.list[Message]], T]
) -> Call[T]:
    body = {
        "user_id": a.user_id,
        "session_id": a.session_id,
        "agent_id": a.agent_id,
        "messages": [m.to_dict() for m in batch],
    }
    return Call("POST", "/v1/messages", lambda data: result(batch), json=body)


@request(MemoryAPI.remember)
def remember(a: Arguments) -> Call[str]:
    _sendable_importance(a.importance)
    return Call("POST", "/v1/memories", lambda data: str(data["id"]), json=a)


@request(MemoryAPI.remember_many)
def remember_many(a: Arguments) -> Call[builtins.list[str]]:
    memories = a.memories
    if isinstance(memories, Iterable) and not isinstance(memories, (str, bytes, Mapping)):
        memories = builtins.list(memories)
    body = {"user_id": a.user_id, "memories": memories}
    read = lambda d: [str(i) for i in d["ids"]]  # noqa: E731
    return Call("POST", "/v1/batch/memories", read, json=body)


@request(MemoryAPI.update_memory)
def update_memory(a: Arguments) -> Call[MemoryRecord]:
    fields = ("content", "memory_type", "importance", "metadata")
    body = {k: a[k] for k in fields if a[k] is not None}
    _sendable_importance(a.importance)
    path = f"/v1/memories/{_segment(a.memory_id, 'memory_id')}"
    return Call("PATCH", path, record_from_json, json=body, params={"user_id": a.user_id})


@request(MemoryAPI.get_context)
def get_context(a: Arguments) -> Call[Context]:
    return Call("POST", "/v1/context", context_from_json, json=a)


@request(MemoryAPI.search)
def search(a: Arguments) -> Call[builtins.list[SearchResult]]:
    """Search the user's memories (see :meth:`tiermem.Memory.search`); the filters are
    checked here as Memory checks them (a NaN or a key that is not a str cannot be sent),
    and ``min_score`` too."""
    if a.filters is not None:
        check_user_id(a.user_id)
        make_filter(**check_search_filters(a.filters))
    check_min_score(a.min_score)
    return Call("POST", "/v1/search", lambda d: [hit_from_json(h) for h in d["results"]], json=a)


@request(MemoryAPI.list_memories)
def list_memories(a: Arguments) -> Call[builtins.list[MemoryRecord]]:
    """A page of the user's memories, newest first (``metadata`` is sent as JSON)."""
    check_user_id(a.user_id)
    offset, filters = check_limit(a.offset, "offset", 0), a.filters  # sent as a cursor
    make_filter(**filters)  # the store's checks, before anything is sent
    metadata, memory_type = filters.get("metadata"), filters.get("memory_type")
    try:
        wanted = None if metadata is None else json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError("metadata", f"cannot be sent as JSON: {exc}") from exc
    params = {
        **filters,
        "user_id": a.user_id,
        "limit": a.limit,
        "cursor": str(offset) if offset else None,
        "memory_type": [memory_type] if isinstance(memory_type, str) else memory_type,
        "metadata": wanted,
    }
    return Call("GET", "/v1/memories", _records("memories"), params=params)


@request(MemoryAPI.get_memory)
def get_memory(a: Arguments) -> Call[MemoryRecord | None]:
    path = f"/v1/memories/{_segment(a.memory_id, 'memory_id')}"
    return Call("GET", path, record_from_json, params={"user_id": a.user_id}, missing_ok=True)


@request(MemoryAPI.get_message)
def get_message(a: Arguments) -> Call[Message]:
    """One message of the user, whole (see :meth:`tiermem.Memory.get_message`)."""
    user_id = check_user_id(a.user_id)  # the user checked first, as Memory does
    path = f"/v1/messages/{_segment(check_message_id(a.message_id), 'message_id')}"
    read = lambda d: Message.from_dict(d["message"])  # noqa: E731
    return Call("GET", path, read, params={"user_id": user_id})


@request(MemoryAPI.history)
def history(a: Arguments) -> Call[builtins.list[Message]]:
    params = {"session_id": a.session_id}
    return Call("GET", _user_path(a.user_id, "messages"), _messages_read, params=params)


@request(MemoryAPI.recent)
def recent(a: Arguments) -> Call[builtins.list[Message]]:
    params = {"session_id": a.session_id, "limit": a.limit}
    return Call("GET", _user_path(a.user_id, "recent"), _messages_read, params=params)


@request(MemoryAPI.sessions)
def sessions(a: Arguments) -> Call[builtins.list[SessionInfo]]:
    read = lambda d: [session_from_json(s) for s in d["sessions"]]  # noqa: E731
    return Call("GET", _user_path(a.user_id, "sessions"), read)


@request(MemoryAPI.session_summary)
def session_summary(a: Arguments) -> Call[str | None]:
    params = {"session_id": a.session_id}
    path = _user_path(a.user_id, "sessions/summary")
    return Call("GET", path, lambda d: d["summary"], params=params)


@request(MemoryAPI.users)
def users(a: Arguments) -> Call[builtins.list[str]]:
    """The users by id (see :meth:`tiermem.Memory.users`): in development mode every user
    of the served store; with a tenant's key, the tenant's users."""
    after = a.after
    if not isinstance(after, str):  # as the store checks it: a query string takes any text
        raise InvalidTypeError("after", f"must be a str, got {type(after).__name__}")
    params = {"limit": a.limit, "cursor": after or None}
    return Call("GET", "/v1/users", lambda d: [str(u) for u in d["users"]], params=params)


@request(MemoryAPI.synopsis)
def synopsis(a: Arguments) -> Call[Synopsis]:
    return Call("GET", _user_path(a.user_id, "synopsis"), Synopsis.from_dict)


@request(MemoryAPI.generate_synopsis)
def generate_synopsis(a: Arguments) -> Call[Synopsis]:
    return Call("POST", _user_path(a.user_id, "synopsis"), Synopsis.from_dict)


@request(MemoryAPI.facts)
def facts(a: Arguments) -> Call[builtins.list[MemoryRecord]]:
    path = _user_path(a.user_id, "facts")
    params = {"current": check_flag(a.current, "current"), "limit": a.limit}
    return Call("GET", path, _records("facts"), params=params)


@request(MemoryAPI.fact_history)
def fact_history(a: Arguments) -> Call[builtins.list[MemoryRecord]]:
    path = _user_path(a.user_id, f"facts/{_segment(a.memory_id, 'memory_id')}/history")
    return Call("GET", path, _records("versions"))


@request(MemoryAPI.stats)
def stats(a: Arguments) -> Call[StoreStats]:
    return Call("GET", _user_path(a.user_id, "stats"), _stats)


@request(MemoryAPI.forget)
def forget(a: Arguments) -> Call[bool]:
    path = f"/v1/memories/{_segment(a.memory_id, 'memory_id')}"
    return Call("DELETE", path, lambda d: bool(d["deleted"]), params={"user_id": a.user_id})


@request(MemoryAPI.forget_messages)
def forget_messages(a: Arguments) -> Call[int]:
    body = {"message_ids": check_message_ids(a.message_ids)}
    return Call("POST", _user_path(a.user_id, "messages/forget"), _deleted, json=body)


@request(MemoryAPI.forget_session)
def forget_session(a: Arguments) -> Call[int]:
    body = {"session_id": a.session_id}
    return Call("POST", _user_path(a.user_id, "sessions/forget"), _deleted, json=body)


@request(MemoryAPI.forget_user)
def forget_user(a: Arguments) -> Call[int]:
    return Call("DELETE", _user_path(a.user_id), _deleted)


@request(MemoryAPI.end_session)
def end_session(a: Arguments) -> Call[str | None]:
    body = {"session_id": a.session_id}
    return Call("POST", _user_path(a.user_id, "sessions/end"), lambda d: d["summary"], json=body)


@request(MemoryAPI.extract_facts)
def extract_facts(a: Arguments) -> Call[builtins.list[str]]:
    body = {"session_id": a.session_id}
    path = _user_path(a.user_id, "facts/extract")
    return Call("POST", path, lambda d: [str(i) for i in d["ids"]], json=body)


@request(MemoryAPI.work_stats)
def work_stats(a: Arguments) -> Call[WorkStats]:
    if a.user_id is None:
        return Call("GET", "/v1/work", _everyone)
    return Call("GET", _user_path(a.user_id, "work"), work_from_json, params={"limit": 1})


@request(MemoryAPI.failed)
def failed(a: Arguments) -> Call[builtins.list[TranscriptRow]]:
    read = lambda d: [row_from_json(r) for r in d["rows"]]  # noqa: E731
    return Call("GET", _user_path(a.user_id, "work"), read, params={"limit": a.limit})


@request(MemoryAPI.retry_failed)
def retry_failed(a: Arguments) -> Call[int]:
    return Call("POST", _user_path(a.user_id, "work/retry"), lambda d: int(d["retried"]))


@request(MemoryAPI.queue_status)
def queue_status(a: Arguments) -> Call[dict[str, Any]]:
    """The answering server process's queue of messages not yet in its store."""
    keys = ("pending", "failures", "last_error")
    return Call("GET", "/v1/work", lambda d: {k: d[k] for k in keys})


@request(MemoryAPI.health)
def health(a: Arguments) -> Call[dict[str, str]]:
    """The server's readiness by part (``/readyz``: store, model, cache and its keys);
    answered 503 while a part is down, which is read, not raised."""
    read = lambda d: {str(k): str(v) for k, v in d["checks"].items()}  # noqa: E731
    return Call("GET", "/readyz", read, accept=(503,))


@request(MemoryAPI.import_archive)
def import_archive(a: Arguments) -> Call[dict[str, int]]:
    """Restore an archive of :meth:`tiermem.Memory.export` as its own user or as
    ``user_id``; what was added, by kind (all or nothing; again adds nothing)."""
    archive, user_id = a.archive, a.user_id
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


@request(MemoryAPI.flush)
def flush(a: Arguments) -> Call[bool]:
    """Wait until the server's pending work is done (at most 60 s); False on timeout."""
    timeout = check_timeout(a.timeout)  # as Memory checks it: JSON has no NaN to send
    body = {"timeout": 60.0 if timeout is None else min(timeout, 60.0)}
    return Call("POST", "/v1/flush", lambda d: bool(d["done"]), json=body)


def _sendable_importance(importance: Any) -> None:
    """An importance JSON cannot carry (NaN, infinity) refused here, as Memory refuses it."""
    if isinstance(importance, float) and not math.isfinite(importance):
        check_importance(importance)


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
