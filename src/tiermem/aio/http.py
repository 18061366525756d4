"""A small JSON-over-HTTP client shared by every HTTP provider (LLMs and embedders).

It owns the parts every provider needs and none should rewrite: lazily created
sync and async httpx clients, a timeout, retries with exponential backoff and
jitter on 429 / 5xx / timeouts / connection errors (honouring ``Retry-After``),
and the mapping of failures to the typed errors of :mod:`tiermem.errors`.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import random
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tiermem.aio.loops import PerLoop
from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import (
    AuthenticationError,
    InvalidSizeError,
    ProviderError,
    ProviderResponseError,
    ProviderServerError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)

if TYPE_CHECKING:
    import httpx

_C = TypeVar("_C", bound="HttpClient")

_RETRY_STATUSES = frozenset({408, 409, 425, 429})  # and every 5xx
_EXCERPT = 300


class _Post(NamedTuple):
    """One attempt of :meth:`HttpClient.post_json`: ``body`` POSTed to ``url``."""

    url: str
    body: dict[str, Any]


def require_api_key(key: str | None, env_var: str, provider: str) -> str:
    """Return ``key``, or raise :class:`AuthenticationError` naming ``env_var`` if it is empty."""
    if not key:
        raise AuthenticationError(
            f"{provider}: no API key configured (set {env_var} or pass api_key=...)"
        )
    return key


class HttpClient:
    """POSTs JSON to one provider and returns the decoded JSON object.

    Args:
        base_url: prefix of every path (``"https://api.openai.com/v1"``).
        headers: sent with every request (auth, API version).
        timeout: seconds allowed for each connect / read / write step of one attempt.
        max_retries: extra attempts after the first on a retryable failure.
        backoff: base delay in seconds; attempt ``n`` waits about ``backoff * 2**n``.
        max_backoff: upper bound of one wait, including a server's ``Retry-After``.
        provider: name used in error messages (``"openai"``, ``"anthropic"``).
        auth_hint: appended to authentication errors (which key to set).
    """

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        provider: str = "openai",
        max_backoff: float = 30.0,
        auth_hint: str = "",
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidSizeError(
                "base_url", f"{base_url!r} is not an http(s) URL", "e.g. https://api.openai.com/v1"
            )
        if timeout <= 0:
            raise InvalidSizeError("timeout", f"{timeout} must be > 0", "seconds, e.g. 30")
        if max_retries < 0:
            raise InvalidSizeError("max_retries", f"{max_retries} must be >= 0")
        if backoff < 0 or max_backoff < 0:
            raise InvalidSizeError("backoff", "backoff and max_backoff must be >= 0")
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.provider = provider
        self.auth_hint = auth_hint
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._aclients: PerLoop[httpx.AsyncClient] = PerLoop()

    @classmethod
    def bearer(
        cls: type[_C],
        base_url: str,
        key: str | None,
        key_env: str | None,
        *,
        timeout: float,
        max_retries: int,
        backoff: float,
        provider: str,
    ) -> _C:
        """A client sending ``key`` as a bearer token (no header without one), whose
        authentication errors say to check ``key_env`` (or ``api_key=``)."""
        return cls(
            base_url,
            {"Authorization": f"Bearer {key}"} if key else {},
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider=provider,
            auth_hint=f"check {key_env} or api_key=" if key_env else "check api_key=",
        )

    # -- clients -------------------------------------------------------------------

    def _verify(self) -> ssl.SSLContext | bool:
        """The shared TLS context for https; none for plain http (building one costs ~40 ms
        of CPU, which a background summarizer would otherwise spend during appends)."""
        return _tls_context() if self.base_url.startswith("https://") else False

    def _sync_client(self) -> httpx.Client:
        import httpx  # here, not at import: it costs ~0.3 s that offline use never needs

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    headers=self.headers, timeout=self.timeout, verify=self._verify()
                )
            return self._client

    def _async_client(self) -> httpx.AsyncClient:
        """One async client per running event loop (an httpx pool cannot cross loops)."""
        import httpx

        return self._aclients.get(
            lambda: httpx.AsyncClient(
                headers=self.headers, timeout=self.timeout, verify=self._verify()
            )
        )

    def close(self) -> None:
        """Close the sync client (async clients are closed by :meth:`aclose`)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the async client of the running loop and the sync client."""
        client = self._aclients.pop()
        if client is not None:
            await client.aclose()
        self.close()

    # -- requests ------------------------------------------------------------------

    @stepped
    def post_json(self, path: str, body: dict[str, Any]) -> Steps[dict[str, Any]]:
        """POST ``body`` to ``base_url + path``; retry transient failures; return the JSON.

        Its waits: each attempt (a :class:`_Post`), and the seconds between two."""
        import httpx  # here, not at import (see _sync_client)

        url, attempt = self._url(path), 0
        while True:
            try:
                outcome: httpx.Response | httpx.HTTPError = yield _Post(url, body)
            except httpx.HTTPError as exc:
                outcome = exc
            step = self._settle(url, attempt, outcome)
            if not isinstance(step, float):
                return step
            yield step
            attempt += 1

    apost_json = stepped_twin(post_json)

    def _step(self, wait: _Post | float, /) -> Any:
        """One wait of :meth:`post_json`: a POST on the sync client, or a pause."""
        if isinstance(wait, float):
            return time.sleep(wait)
        return self._sync_client().post(wait.url, json=wait.body)

    async def _astep(self, wait: _Post | float, /) -> Any:
        if isinstance(wait, float):
            return await asyncio.sleep(wait)
        return await self._async_client().post(wait.url, json=wait.body)

    def _settle(
        self, url: str, attempt: int, outcome: httpx.Response | httpx.HTTPError
    ) -> dict[str, Any] | float:
        """The decoded answer of a successful request, else the seconds to wait before
        the next attempt (raises the typed error when no retry is left)."""
        if not isinstance(outcome, BaseException):
            if outcome.is_success:
                return self._decode(outcome, url)
            return self._plan_retry(url, attempt, response=outcome)
        return self._plan_retry(url, attempt, exc=outcome)

    # -- helpers -------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + "/" + path.lstrip("/")

    def _plan_retry(
        self,
        url: str,
        attempt: int,
        response: httpx.Response | None = None,
        exc: httpx.HTTPError | None = None,
    ) -> float:
        """Seconds to wait before attempt ``attempt + 1``; raises the typed error instead
        when the failure is not transient or no retry is left."""
        if response is not None:
            error, retryable = self._status_error(response, url)
            retry_after = _retry_after(response)
        else:
            assert exc is not None
            error, retryable = self._transport_error(exc, url)
            retry_after = None
        if not retryable or attempt >= self.max_retries:
            raise error from exc
        if retry_after is not None:
            return min(retry_after, self.max_backoff)
        step = self.backoff * (2.0**attempt)
        return min(step * (0.5 + random.random() / 2), self.max_backoff)

    def _transport_error(self, exc: httpx.HTTPError, url: str) -> tuple[ProviderError, bool]:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return ProviderTimeoutError(
                f"{self.provider}: no answer from {url} within {self.timeout}s "
                f"after {self.max_retries} retries ({type(exc).__name__}); "
                "raise timeout= or check the server"
            ), True
        transient = isinstance(exc, httpx.TransportError)  # refused, reset, DNS, ...
        kind = ProviderUnavailableError if transient else ProviderError
        return kind(
            f"{self.provider}: cannot reach {url} ({type(exc).__name__}: {exc}); "
            "check base_url and that the server is running"
        ), transient

    def _status_error(self, response: httpx.Response, url: str) -> tuple[ProviderError, bool]:
        status = response.status_code
        excerpt = response.text[:_EXCERPT]
        if status in (401, 403):
            hint = f"; {self.auth_hint}" if self.auth_hint else ""
            return AuthenticationError(
                f"{self.provider}: HTTP {status} from {url}: credentials rejected{hint}: {excerpt}"
            ), False
        retryable = status in _RETRY_STATUSES or status >= 500
        if status == 429:
            return RateLimitError(
                f"{self.provider}: HTTP 429 from {url} after {self.max_retries} retries: {excerpt}"
            ), retryable
        kind = ProviderServerError if retryable else ProviderResponseError
        return kind(f"{self.provider}: HTTP {status} from {url}: {excerpt}"), retryable

    def _decode(self, response: httpx.Response, url: str) -> dict[str, Any]:
        try:
            data = json.loads(response.content)
        except ValueError as exc:
            raise ProviderResponseError(
                f"{self.provider}: HTTP {response.status_code} from {url} is not JSON "
                f"({exc}): {response.text[:_EXCERPT]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise ProviderResponseError(
                f"{self.provider}: expected a JSON object from {url}, got {type(data).__name__}"
            )
        return data


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One certificate-verifying TLS context for every client of the process."""
    import httpx

    return httpx.create_ssl_context()


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asked us to wait (``Retry-After``: seconds or an HTTP date)."""
    value = response.headers.get("retry-after-ms")
    if value:
        try:
            return max(float(value) / 1000.0, 0.0)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(float(when.timestamp()) - time.time(), 0.0)
