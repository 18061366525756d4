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

import json
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

import httpx

from tiermem.client import requests as calls
from tiermem.client.requests import Call, T
from tiermem.errors import StoreUnavailableError, TiermemError
from tiermem.wire import error_from_json

if TYPE_CHECKING:
    from tiermem.api import AsyncMemoryAPI, MemoryAPI

DEFAULT_URL = "http://127.0.0.1:8765"
P = ParamSpec("P")


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


def _down(exc: TiermemError) -> dict[str, str]:
    """A health answer when the server's own could not be had."""
    return {"server": f"{type(exc).__name__}: {exc}"[:300]}


def _unreachable(url: str, exc: Exception) -> StoreUnavailableError:
    return StoreUnavailableError(f"cannot reach the tiermem server at {url}: {exc}")


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class _Sync(Protocol):
    def call(self, call: Call[T]) -> T: ...


class _Async(Protocol):
    async def call(self, call: Call[T]) -> T: ...


C = TypeVar("C", bound=_Sync)
A = TypeVar("A", bound=_Async)


def _sends(build: Callable[P, Call[T]]) -> Callable[Concatenate[C, P], T]:
    """A client method that sends the request ``build`` describes."""

    def method(self: C, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.call(build(*args, **kwargs))

    method.__name__ = method.__qualname__ = build.__name__
    method.__doc__ = build.__doc__
    return method


def _asends(build: Callable[P, Call[T]]) -> Callable[Concatenate[A, P], Coroutine[Any, Any, T]]:
    """The async client's method: the same request, awaited."""

    async def method(self: A, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.call(build(*args, **kwargs))

    method.__name__ = method.__qualname__ = f"a{build.__name__}"
    method.__doc__ = build.__doc__
    return method


class MemoryClient:
    """:class:`~tiermem.Memory`'s interface (:class:`~tiermem.api.MemoryAPI`), served by
    ``tiermem serve`` at ``url``.

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

    def call(self, call: Call[T]) -> T:
        """Send one request; its answer read, or the server's typed error raised."""
        try:
            arguments = calls.http_arguments(call)
            response = self._http.request(call.method, call.path, **arguments)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _read(call, response)

    add = _sends(calls.add)
    add_messages = _sends(calls.add_messages)
    remember = _sends(calls.remember)
    remember_many = _sends(calls.remember_many)
    update_memory = _sends(calls.update_memory)
    get_context = _sends(calls.get_context)
    search = _sends(calls.search)
    list_memories = _sends(calls.list_memories)
    get_memory = _sends(calls.get_memory)
    get_message = _sends(calls.get_message)
    history = _sends(calls.history)
    recent = _sends(calls.recent)
    sessions = _sends(calls.sessions)
    synopsis = _sends(calls.synopsis)
    generate_synopsis = _sends(calls.generate_synopsis)
    facts = _sends(calls.facts)
    fact_history = _sends(calls.fact_history)
    stats = _sends(calls.stats)
    forget = _sends(calls.forget)
    forget_messages = _sends(calls.forget_messages)
    forget_session = _sends(calls.forget_session)
    forget_user = _sends(calls.forget_user)
    end_session = _sends(calls.end_session)
    extract_facts = _sends(calls.extract_facts)
    work_stats = _sends(calls.work_stats)
    failed = _sends(calls.failed)
    retry_failed = _sends(calls.retry_failed)
    session_summary = _sends(calls.session_summary)
    users = _sends(calls.users)
    queue_status = _sends(calls.queue_status)
    import_archive = _sends(calls.import_archive)
    flush = _sends(calls.flush)

    def health(self) -> dict[str, str]:
        """The server's readiness by part (``/readyz``); never raises: a server that
        cannot be reached is ``{"server": "StoreUnavailableError: ..."}``."""
        try:
            return self.call(calls.health())
        except TiermemError as exc:
            return _down(exc)

    def export(self, user_id: str, *, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """The user's archive (see :meth:`tiermem.Memory.export`), streamed line by line."""
        path, params = calls.export_path(user_id, include_vectors)
        try:
            with self._http.stream("GET", path, params=params) as response:
                if response.status_code >= 400:
                    response.read()
                    _answer(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    def close(self, timeout: float | None = None) -> None:
        """Close the connections (the server keeps everything it acknowledged)."""
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncMemoryClient:
    """:class:`MemoryClient` as coroutines (:class:`~tiermem.api.AsyncMemoryAPI`), with
    Memory's async method names (``aadd``, ``asearch``, ``aget_context``...)."""

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
                call.method, call.path, **calls.http_arguments(call)
            )
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc
        return _read(call, response)

    aadd = _asends(calls.add)
    aadd_messages = _asends(calls.add_messages)
    aremember = _asends(calls.remember)
    aremember_many = _asends(calls.remember_many)
    aupdate_memory = _asends(calls.update_memory)
    aget_context = _asends(calls.get_context)
    asearch = _asends(calls.search)
    alist_memories = _asends(calls.list_memories)
    aget_memory = _asends(calls.get_memory)
    aget_message = _asends(calls.get_message)
    ahistory = _asends(calls.history)
    arecent = _asends(calls.recent)
    asessions = _asends(calls.sessions)
    asynopsis = _asends(calls.synopsis)
    agenerate_synopsis = _asends(calls.generate_synopsis)
    afacts = _asends(calls.facts)
    afact_history = _asends(calls.fact_history)
    astats = _asends(calls.stats)
    aforget = _asends(calls.forget)
    aforget_messages = _asends(calls.forget_messages)
    aforget_session = _asends(calls.forget_session)
    aforget_user = _asends(calls.forget_user)
    aend_session = _asends(calls.end_session)
    aextract_facts = _asends(calls.extract_facts)
    awork_stats = _asends(calls.work_stats)
    afailed = _asends(calls.failed)
    aretry_failed = _asends(calls.retry_failed)
    asession_summary = _asends(calls.session_summary)
    ausers = _asends(calls.users)
    aqueue_status = _asends(calls.queue_status)
    aimport_archive = _asends(calls.import_archive)
    aflush = _asends(calls.flush)

    async def ahealth(self) -> dict[str, str]:
        """The server's readiness by part (``/readyz``); never raises (see
        :meth:`MemoryClient.health`)."""
        try:
            return await self.call(calls.health())
        except TiermemError as exc:
            return _down(exc)

    async def aexport(
        self, user_id: str, *, include_vectors: bool = False
    ) -> AsyncIterator[dict[str, Any]]:
        """The user's archive (see :meth:`tiermem.Memory.export`), streamed line by line."""
        path, params = calls.export_path(user_id, include_vectors)
        try:
            async with self._http.stream("GET", path, params=params) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _answer(response)
                async for line in response.aiter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.TransportError as exc:
            raise _unreachable(self.url, exc) from exc

    async def aclose(self, timeout: float | None = None) -> None:
        """Close the connections (the server keeps everything it acknowledged)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _read(call: Call[T], response: httpx.Response) -> T:
    if response.status_code in call.accept:
        return call.read(response.json())
    if call.missing_ok and response.status_code == 404:
        body = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        if isinstance(body, Mapping) and body.get("error") == "NotFoundError":
            return None  # type: ignore[return-value]
    return call.read(_answer(response))


if TYPE_CHECKING:  # mypy checks that both clients implement the whole contract

    def _implements(
        sync: MemoryClient, asynchronous: AsyncMemoryClient
    ) -> tuple[MemoryAPI, AsyncMemoryAPI]:
        return sync, asynchronous


__all__ = ["AsyncMemoryClient", "MemoryClient"]
