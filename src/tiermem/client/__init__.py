"""MemoryClient and AsyncMemoryClient: :class:`~tiermem.Memory`'s interface over HTTP.

Moving an agent from the embedded library to a ``tiermem serve`` server is one line::

    memory = Memory()                                           # embedded
    memory = MemoryClient("http://127.0.0.1:8765", api_key)     # the same calls, served

The methods take the same arguments and return the same types (:class:`Message`,
:class:`Context`, :class:`SearchResult`, :class:`Synopsis`); the server's typed errors
are raised again as the same :mod:`tiermem.errors` classes. Both clients share one
request layer (:class:`Call`): each method describes its request and how to read the
answer, and the sync or async client only sends it (as httpx's two clients share one
model layer): a method is a stepped method whose one wait is its request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, cast

import httpx

from tiermem.aio.twins import Steps, stepped, stepped_twin
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


def _request(build: Callable[P, Call[T]]) -> Callable[Concatenate[Any, P], T]:
    """A client method of one wait, the request ``build`` describes (a
    :func:`~tiermem.aio.twins.stepped` method): :class:`MemoryClient` sends it,
    :class:`AsyncMemoryClient`'s twin (``stepped_twin``) awaits it."""

    def steps(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> Steps[T]:
        return cast(T, (yield build(*args, **kwargs)))

    steps.__name__ = steps.__qualname__ = build.__name__
    steps.__doc__ = build.__doc__
    return stepped(steps)


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

    _step = call

    add = _request(calls.add)
    add_messages = _request(calls.add_messages)
    remember = _request(calls.remember)
    remember_many = _request(calls.remember_many)
    update_memory = _request(calls.update_memory)
    get_context = _request(calls.get_context)
    search = _request(calls.search)
    list_memories = _request(calls.list_memories)
    get_memory = _request(calls.get_memory)
    get_message = _request(calls.get_message)
    history = _request(calls.history)
    recent = _request(calls.recent)
    sessions = _request(calls.sessions)
    synopsis = _request(calls.synopsis)
    generate_synopsis = _request(calls.generate_synopsis)
    facts = _request(calls.facts)
    fact_history = _request(calls.fact_history)
    stats = _request(calls.stats)
    forget = _request(calls.forget)
    forget_messages = _request(calls.forget_messages)
    forget_session = _request(calls.forget_session)
    forget_user = _request(calls.forget_user)
    end_session = _request(calls.end_session)
    extract_facts = _request(calls.extract_facts)
    work_stats = _request(calls.work_stats)
    failed = _request(calls.failed)
    retry_failed = _request(calls.retry_failed)
    session_summary = _request(calls.session_summary)
    users = _request(calls.users)
    queue_status = _request(calls.queue_status)
    import_archive = _request(calls.import_archive)
    flush = _request(calls.flush)

    @stepped
    def health(self) -> Steps[dict[str, str]]:
        """The server's readiness by part (``/readyz``); never raises: a server that
        cannot be reached is ``{"server": "StoreUnavailableError: ..."}``."""
        try:
            return cast(dict[str, str], (yield calls.health()))
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

    _astep = call

    aadd = stepped_twin(MemoryClient.add)
    aadd_messages = stepped_twin(MemoryClient.add_messages)
    aremember = stepped_twin(MemoryClient.remember)
    aremember_many = stepped_twin(MemoryClient.remember_many)
    aupdate_memory = stepped_twin(MemoryClient.update_memory)
    aget_context = stepped_twin(MemoryClient.get_context)
    asearch = stepped_twin(MemoryClient.search)
    alist_memories = stepped_twin(MemoryClient.list_memories)
    aget_memory = stepped_twin(MemoryClient.get_memory)
    aget_message = stepped_twin(MemoryClient.get_message)
    ahistory = stepped_twin(MemoryClient.history)
    arecent = stepped_twin(MemoryClient.recent)
    asessions = stepped_twin(MemoryClient.sessions)
    asynopsis = stepped_twin(MemoryClient.synopsis)
    agenerate_synopsis = stepped_twin(MemoryClient.generate_synopsis)
    afacts = stepped_twin(MemoryClient.facts)
    afact_history = stepped_twin(MemoryClient.fact_history)
    astats = stepped_twin(MemoryClient.stats)
    aforget = stepped_twin(MemoryClient.forget)
    aforget_messages = stepped_twin(MemoryClient.forget_messages)
    aforget_session = stepped_twin(MemoryClient.forget_session)
    aforget_user = stepped_twin(MemoryClient.forget_user)
    aend_session = stepped_twin(MemoryClient.end_session)
    aextract_facts = stepped_twin(MemoryClient.extract_facts)
    awork_stats = stepped_twin(MemoryClient.work_stats)
    afailed = stepped_twin(MemoryClient.failed)
    aretry_failed = stepped_twin(MemoryClient.retry_failed)
    asession_summary = stepped_twin(MemoryClient.session_summary)
    ausers = stepped_twin(MemoryClient.users)
    aqueue_status = stepped_twin(MemoryClient.queue_status)
    aimport_archive = stepped_twin(MemoryClient.import_archive)
    aflush = stepped_twin(MemoryClient.flush)

    ahealth = stepped_twin(MemoryClient.health)

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
