"""MemoryClient and AsyncMemoryClient: :class:`~tiermem.Memory`'s interface over HTTP.

Moving an agent from the embedded library to a ``tiermem serve`` server is one line::

    memory = Memory()                                           # embedded
    memory = MemoryClient("http://127.0.0.1:8765", api_key)     # the same calls, served

The methods take the same arguments and return the same types (:class:`Message`,
:class:`Context`, :class:`SearchResult`, :class:`Synopsis`); the server's typed errors
are raised again as the same :mod:`tiermem.errors` classes. Both clients share one
request layer (:class:`Call`): each method describes its request and how to read the
answer, and the sync or async client only sends it.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import httpx

from tiermem.errors import InvalidTypeError, StoreUnavailableError, TiermemError
from tiermem.messages import Content, Message
from tiermem.planner import Context
from tiermem.stores.base import MemoryRecord, SearchResult, StoreStats
from tiermem.stores.transcript import SessionInfo, TranscriptRow, WorkStats
from tiermem.synopsis import Synopsis
from tiermem.wire import (
    context_from_json,
    error_from_json,
    hit_from_json,
    record_from_json,
    row_from_json,
    session_from_json,
    work_from_json,
)

DEFAULT_URL = "http://127.0.0.1:8765"
T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _message(
    role: Any,
    content: Any,
    user_id: str,
    session_id: str | None,
    timestamp: Any,
    metadata: Any,
    fields: Mapping[str, Any],
) -> Message:
    """The message as Memory would build it (validated here, ids kept by the server)."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidTypeError("metadata", f"expected a dict, got {type(metadata).__name__}")
    meta = {**(metadata or {}), "user_id": user_id}
    if session_id is not None:
        meta["session_id"] = session_id
    extra = dict(fields)
    if timestamp is not None:
        extra["timestamp"] = timestamp
    return Message(role, content, metadata=meta, **extra)


def _messages(
    messages: Iterable[Message | Mapping[str, Any]], user_id: str, session_id: str | None
) -> list[Message]:
    if isinstance(messages, (str, bytes, Mapping, Message)) or not isinstance(messages, Iterable):
        raise InvalidTypeError(
            "messages",
            f"expected a list of messages, got {type(messages).__name__}",
            "wrap a single message in a list",
        )
    batch = []
    for i, raw in enumerate(messages):
        if isinstance(raw, Message):
            batch.append(raw)
        elif isinstance(raw, Mapping):
            data = dict(raw)
            batch.append(
                _message(
                    data.pop("role", None),
                    data.pop("content", None),
                    user_id,
                    session_id,
                    data.pop("timestamp", None),
                    data.pop("metadata", None),
                    data,
                )
            )
        else:
            raise InvalidTypeError(f"messages[{i}]", "expected a Message or a message dict")
    return batch


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


class Calls:
    """The requests of every operation (shared by the sync and async clients)."""

    @staticmethod
    def add_messages(
        batch: builtins.list[Message],
        user_id: str,
        session_id: str | None,
        agent_id: str | None,
    ) -> Call[builtins.list[Message]]:
        body = {
            "user_id": user_id,
            "session_id": session_id,
            "agent_id": agent_id,
            "messages": [m.to_dict() for m in batch],
        }
        return Call("POST", "/v1/messages", lambda data: batch, json=body)

    @staticmethod
    def remember(
        content: str,
        user_id: str,
        memory_type: str,
        importance: float,
        session_id: str | None,
        agent_id: str | None,
        metadata: Mapping[str, Any] | None,
    ) -> Call[str]:
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

    @staticmethod
    def search(
        query: str, user_id: str, k: int, filters: Mapping[str, Any] | None, mode: str
    ) -> Call[list[SearchResult]]:
        body = {"user_id": user_id, "query": query, "k": k, "filters": filters, "mode": mode}
        return Call(
            "POST", "/v1/search", lambda d: [hit_from_json(h) for h in d["results"]], json=body
        )

    @staticmethod
    def get_context(
        query: str, user_id: str, session_id: str | None, max_tokens: int | None
    ) -> Call[Context]:
        body = {
            "user_id": user_id,
            "query": query,
            "session_id": session_id,
            "max_tokens": max_tokens,
        }
        return Call("POST", "/v1/context", context_from_json, json=body)

    @staticmethod
    def synopsis(user_id: str) -> Call[Synopsis]:
        return Call("GET", f"/v1/users/{_segment(user_id)}/synopsis", Synopsis.from_dict)

    @staticmethod
    def forget(memory_id: str, user_id: str) -> Call[bool]:
        path = f"/v1/memories/{_segment(memory_id)}"
        return Call("DELETE", path, lambda d: bool(d["deleted"]), params={"user_id": user_id})

    @staticmethod
    def forget_user(user_id: str) -> Call[int]:
        return Call("DELETE", f"/v1/users/{_segment(user_id)}", lambda d: int(d["deleted"]))

    @staticmethod
    def flush(timeout: float | None) -> Call[bool]:
        body = {"timeout": 60.0 if timeout is None else min(timeout, 60.0)}
        return Call("POST", "/v1/flush", lambda d: bool(d["done"]), json=body)

    @staticmethod
    def list(
        user_id: str, limit: int, offset: int, filters: Mapping[str, Any]
    ) -> Call[builtins.list[MemoryRecord]]:
        params = {"user_id": user_id, "limit": limit, **filters}
        if offset:
            params["cursor"] = str(offset)
        return Call(
            "GET",
            "/v1/memories",
            lambda d: [record_from_json(r) for r in d["memories"]],
            params=params,
        )

    @staticmethod
    def get(user_id: str, memory_id: Any) -> Call[MemoryRecord]:
        path = f"/v1/memories/{_segment(str(memory_id))}"
        return Call("GET", path, record_from_json, params={"user_id": user_id})

    @staticmethod
    def update(user_id: str, memory_id: Any, fields: Mapping[str, Any]) -> Call[MemoryRecord]:
        path = f"/v1/memories/{_segment(str(memory_id))}"
        return Call("PATCH", path, record_from_json, json=dict(fields), params={"user_id": user_id})

    @staticmethod
    def stats(user_id: str) -> Call[StoreStats]:
        return Call("GET", f"/v1/users/{_segment(user_id)}/stats", _stats)

    @staticmethod
    def sessions(user_id: str) -> Call[builtins.list[SessionInfo]]:
        path = f"/v1/users/{_segment(user_id)}/sessions"
        return Call("GET", path, lambda d: [session_from_json(s) for s in d["sessions"]])

    @staticmethod
    def history(user_id: str, session_id: str | None) -> Call[builtins.list[Message]]:
        path = f"/v1/users/{_segment(user_id)}/messages"
        params = {"session_id": session_id} if session_id is not None else {}
        return Call(
            "GET", path, lambda d: [Message.from_dict(m) for m in d["messages"]], params=params
        )

    @staticmethod
    def work(user_id: str, limit: int) -> Call[tuple[WorkStats, builtins.list[TranscriptRow]]]:
        def read(data: Any) -> tuple[WorkStats, builtins.list[TranscriptRow]]:
            return work_from_json(data), [row_from_json(r) for r in data["rows"]]

        path = f"/v1/users/{_segment(user_id)}/work"
        return Call("GET", path, read, params={"limit": limit})

    @staticmethod
    def retry_failed(user_id: str) -> Call[int]:
        path = f"/v1/users/{_segment(user_id)}/work/retry"
        return Call("POST", path, lambda d: int(d["retried"]))


def _segment(value: Any) -> str:
    """A path segment, percent-encoded (a user id may hold '/', '?' or spaces)."""
    if not isinstance(value, str):
        raise InvalidTypeError("id", f"must be a str, got {type(value).__name__}")
    from urllib.parse import quote

    return quote(value, safe="")


def _answer(response: httpx.Response) -> Any:
    """The JSON of a successful answer; a typed error otherwise."""
    if response.status_code < 400:
        return response.json()
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping) and "error" in body:
        raise error_from_json(body)
    if response.status_code in (502, 503, 504):
        raise StoreUnavailableError(f"the server answered {response.status_code}")
    raise TiermemError(f"the server answered {response.status_code}: {response.text[:200]}")


def _unreachable(url: str, exc: Exception) -> StoreUnavailableError:
    return StoreUnavailableError(f"cannot reach the tiermem server at {url}: {exc}")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class MemoryClient:
    """:class:`~tiermem.Memory`'s interface, served by ``tiermem serve`` at ``url``.

    Args:
        url: the server's base URL.
        api_key: a tenant's key (``tiermem keys create``); none in development mode.
        timeout: seconds per request.
        transport: an httpx transport (tests, proxies).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, headers=_headers(api_key), timeout=timeout, transport=transport
        )
        self.store = RemoteStore(self)

    def call(self, call: Call[T]) -> T:
        """Send one request; its answer read, or the server's typed error raised."""
        try:
            response = self._http.request(
                call.method, call.path, json=_jsonable(call.json), params=_jsonable(call.params)
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return call.read(_answer(response))

    def add(
        self,
        role: str,
        content: Content,
        user_id: str,
        session_id: str | None = None,
        timestamp: Any = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """Add one message of a conversation (see :meth:`tiermem.Memory.add`)."""
        message = _message(role, content, user_id, session_id, timestamp, metadata, fields)
        return self.call(Calls.add_messages([message], user_id, session_id, agent_id))[0]

    def add_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[Message]:
        """Import a history (see :meth:`tiermem.Memory.add_messages`)."""
        batch = _messages(messages, user_id, session_id)
        return self.call(Calls.add_messages(batch, user_id, session_id, agent_id))

    def remember(
        self,
        content: str,
        user_id: str,
        memory_type: str = "fact",
        importance: float = 0.5,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a fact, preference or other memory now; returns its id."""
        call = Calls.remember(
            content, user_id, memory_type, importance, session_id, agent_id, metadata
        )
        return self.call(call)

    def search(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
    ) -> list[SearchResult]:
        """Search the user's long-term memories, best first."""
        return self.call(Calls.search(query, user_id, k, filters, mode))

    def get_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        """The context for ``query``, fitted to ``max_tokens``."""
        return self.call(Calls.get_context(query, user_id, session_id, max_tokens))

    def synopsis(self, user_id: str) -> Synopsis:
        """What is known about the user."""
        return self.call(Calls.synopsis(user_id))

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory of ``user_id``; False if it does not exist."""
        return self.call(Calls.forget(str(memory_id), user_id))

    def forget_user(self, user_id: str) -> int:
        """Erase everything of ``user_id``; the number of long-term memories deleted."""
        return self.call(Calls.forget_user(user_id))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the server's pending work (embedding, summaries) is done (<= 60 s)."""
        return self.call(Calls.flush(timeout))

    def sessions(self, user_id: str) -> list[SessionInfo]:
        """The user's sessions, most recently active first."""
        return self.call(Calls.sessions(user_id))

    def history(self, user_id: str, session_id: str | None = None) -> list[Message]:
        """Every message of a session in the order added, whole."""
        return self.call(Calls.history(user_id, session_id))

    def work_stats(self, user_id: str) -> WorkStats:
        """The user's messages pending, done and failed in the store."""
        return self.call(Calls.work(user_id, 1))[0]

    def failed(self, user_id: str, limit: int = 100) -> list[TranscriptRow]:
        """The user's messages that could not be indexed, each with its ``error``."""
        return self.call(Calls.work(user_id, limit))[1]

    def retry_failed(self, user_id: str) -> int:
        """Queue the user's failed messages again; how many."""
        return self.call(Calls.retry_failed(user_id))

    def close(self, timeout: float | None = None) -> None:
        """Close the connections (the server keeps everything it acknowledged)."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteStore:
    """``memory.store``'s reading and editing methods, over HTTP."""

    def __init__(self, client: MemoryClient) -> None:
        self._client = client

    def list(
        self, user_id: str, *, limit: int = 100, offset: int = 0, **filters: Any
    ) -> builtins.list[MemoryRecord]:
        """A page of the user's memories, newest first."""
        return self._client.call(Calls.list(user_id, limit, offset, filters))

    def get(self, user_id: str, memory_id: Any) -> MemoryRecord | None:
        """The memory with this id if it belongs to ``user_id``, else None."""
        from tiermem.errors import NotFoundError

        try:
            return self._client.call(Calls.get(user_id, memory_id))
        except NotFoundError:
            return None

    def update(self, user_id: str, memory_id: Any, **fields: Any) -> MemoryRecord:
        """Change content, memory_type, importance or metadata of a memory."""
        return self._client.call(Calls.update(user_id, memory_id, fields))

    def delete(self, user_id: str, memory_id: Any) -> bool:
        """Delete one memory; False if the user has none with this id."""
        return self._client.call(Calls.forget(str(memory_id), user_id))

    def stats(self, user_id: str) -> StoreStats:
        """Counts per type, time span, access and importance figures of the user."""
        return self._client.call(Calls.stats(user_id))

    def count(self, user_id: str) -> int:
        """How many memories the user has."""
        return self.stats(user_id).count


class AsyncMemoryClient:
    """The async twin of :class:`MemoryClient`, with Memory's async method names
    (``aadd``, ``asearch``, ``aget_context``...)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=_headers(api_key), timeout=timeout, transport=transport
        )

    async def call(self, call: Call[T]) -> T:
        """Send one request; its answer read, or the server's typed error raised."""
        try:
            response = await self._http.request(
                call.method, call.path, json=_jsonable(call.json), params=_jsonable(call.params)
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return call.read(_answer(response))

    async def aadd(
        self,
        role: str,
        content: Content,
        user_id: str,
        session_id: str | None = None,
        timestamp: Any = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        **fields: Any,
    ) -> Message:
        message = _message(role, content, user_id, session_id, timestamp, metadata, fields)
        added = await self.call(Calls.add_messages([message], user_id, session_id, agent_id))
        return added[0]

    async def aadd_messages(
        self,
        messages: Iterable[Message | Mapping[str, Any]],
        user_id: str,
        session_id: str | None = None,
        *,
        agent_id: str | None = None,
    ) -> list[Message]:
        batch = _messages(messages, user_id, session_id)
        return await self.call(Calls.add_messages(batch, user_id, session_id, agent_id))

    async def aremember(
        self,
        content: str,
        user_id: str,
        memory_type: str = "fact",
        importance: float = 0.5,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        call = Calls.remember(
            content, user_id, memory_type, importance, session_id, agent_id, metadata
        )
        return await self.call(call)

    async def asearch(
        self,
        query: str,
        user_id: str,
        k: int = 10,
        filters: Mapping[str, Any] | None = None,
        *,
        mode: str = "hybrid",
    ) -> list[SearchResult]:
        return await self.call(Calls.search(query, user_id, k, filters, mode))

    async def aget_context(
        self,
        query: str,
        user_id: str,
        session_id: str | None = None,
        max_tokens: int | None = None,
    ) -> Context:
        return await self.call(Calls.get_context(query, user_id, session_id, max_tokens))

    async def asynopsis(self, user_id: str) -> Synopsis:
        return await self.call(Calls.synopsis(user_id))

    async def aforget(self, memory_id: str, user_id: str) -> bool:
        return await self.call(Calls.forget(str(memory_id), user_id))

    async def aforget_user(self, user_id: str) -> int:
        return await self.call(Calls.forget_user(user_id))

    async def aflush(self, timeout: float | None = None) -> bool:
        return await self.call(Calls.flush(timeout))

    async def aclose(self, timeout: float | None = None) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["AsyncMemoryClient", "MemoryClient", "RemoteStore"]
