"""``openai/<name>``: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

OpenAI itself, Azure-style proxies, vLLM, LiteLLM, llama.cpp server, Ollama's ``/v1``.
HTTP, retries and error mapping come from :class:`tiermem.aio.http.HttpClient`. Each
request goes through the embedder's circuit breaker (:attr:`OpenAIEmbedder.breaker`):
after a few failed requests in a row the service is left alone for a cool-down and a
call raises :class:`~tiermem.breaker.CircuitOpenError` at once (the worker gives its
rows back; a read does not wait), then one probe request decides.
"""

from __future__ import annotations

import base64
import os
from typing import Any
from urllib.parse import urlparse

import numpy as np

from tiermem.aio.http import HttpClient, require_api_key
from tiermem.breaker import CircuitBreaker, aguarded, guarded
from tiermem.embeddings.base import BaseEmbedder
from tiermem.errors import ConfigError, ProviderResponseError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
ENCODINGS = ("float", "base64")


COOLDOWN = 5.0
"""Seconds the default breaker rests before its probe request: the store worker's rows
wait that long (:meth:`~tiermem.work.worker.StoreWorker.outage_wait`), so messages are
embedded within about 5 s of the service coming back; one request per 5 s is nothing
to a service that is down."""


class OpenAIEmbedder(BaseEmbedder):
    """Embeddings from an OpenAI-compatible API.

    Args:
        model: model name at the endpoint (``"text-embedding-3-small"``).
        api_key: bearer token; default ``$OPENAI_API_KEY``. Required for api.openai.com,
            optional for other servers.
        base_url: endpoint prefix ending in ``/v1``; default ``$OPENAI_BASE_URL`` or OpenAI.
        dimensions: width of the vectors. For ``text-embedding-3-*`` it is sent to the API,
            which shortens the vectors; for other models it states their width and is
            required unless the model is a known OpenAI one.
        encoding_format: ``"float"`` (every server) or ``"base64"`` (smaller, faster).
        timeout, max_retries, backoff: per attempt, see :class:`tiermem.aio.http.HttpClient`.
        breaker: the circuit breaker of the service (default: 3 failures, then a probe
            every :data:`COOLDOWN` seconds).
        **base: ``batch_size`` (inputs per request, default 256), ``cache_size``, ``cache``,
            ``max_chars`` (see BaseEmbedder).
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        encoding_format: str = "float",
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        batch_size: int = 256,
        breaker: CircuitBreaker | None = None,
        **base: Any,
    ) -> None:
        super().__init__(f"openai/{model}", batch_size=batch_size, **base)
        if encoding_format not in ENCODINGS:
            raise ConfigError("encoding_format", f"{encoding_format!r} is not one of {ENCODINGS}")
        width = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ConfigError(
                "dimensions",
                f"unknown width for model {model!r}: {dimensions!r}",
                "pass dimensions=<the model's output size>, e.g. dimensions=768",
            )
        self.name = model
        self._dimension = width
        self._send_dimensions = dimensions is not None and model.startswith("text-embedding-3")
        self.encoding_format = encoding_format
        url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        if urlparse(url).hostname == urlparse(DEFAULT_BASE_URL).hostname:
            require_api_key(key, "OPENAI_API_KEY", "openai")
        self.http = HttpClient.bearer(
            url,
            key,
            "OPENAI_API_KEY",
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider="openai",
        )
        self.breaker = breaker if breaker is not None else CircuitBreaker(cooldown=COOLDOWN)
        """Opens after failed requests in a row (unreachable, timeouts, 429, 5xx, rejected
        credentials); a refused input (4xx) counts as an answer."""

    @property
    def dimension(self) -> int:
        return self._dimension

    def _body(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name,
            "input": texts,
            "encoding_format": self.encoding_format,
        }
        if self._send_dimensions:
            body["dimensions"] = self._dimension
        return body

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        body = self._body(texts)
        data = guarded(self, lambda: self.http.post_json("/embeddings", body), self.breaker)
        return self._parse(data, len(texts))

    async def _aembed_batch(self, texts: list[str]) -> np.ndarray:
        body = self._body(texts)
        data = await aguarded(self, lambda: self.http.apost_json("/embeddings", body), self.breaker)
        return self._parse(data, len(texts))

    def _parse(self, data: dict[str, Any], count: int) -> np.ndarray:
        """Rows of ``data["data"]`` in input order (the API may return them shuffled)."""
        items = data.get("data")
        if not isinstance(items, list) or len(items) != count:
            raise ProviderResponseError(
                f"{self.model_id}: expected {count} embeddings in 'data', "
                f"got {len(items) if isinstance(items, list) else type(items).__name__}"
            )
        rows: list[np.ndarray | None] = [None] * count
        for position, item in enumerate(items):
            if not isinstance(item, dict) or "embedding" not in item:
                raise ProviderResponseError(f"{self.model_id}: data[{position}] has no embedding")
            index = item.get("index", position)
            if not isinstance(index, int) or not 0 <= index < count or rows[index] is not None:
                raise ProviderResponseError(f"{self.model_id}: bad index {index!r} in data")
            rows[index] = _vector(item["embedding"], self.model_id)
        widths = {row.shape[0] for row in rows if row is not None}
        if len(widths) != 1:
            raise ProviderResponseError(f"{self.model_id}: embeddings of mixed widths {widths}")
        return np.stack([row for row in rows if row is not None])

    def close(self) -> None:
        """Close the HTTP connections."""
        self.http.close()

    async def aclose(self) -> None:
        """Async twin of :meth:`close`."""
        await self.http.aclose()


def _vector(value: object, model_id: str) -> np.ndarray:
    """A float list, or base64 of little-endian float32 (``encoding_format="base64"``)."""
    try:
        if isinstance(value, str):
            raw = base64.b64decode(value, validate=True)
            return np.frombuffer(raw, dtype="<f4").astype(np.float32)
        return np.asarray(value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ProviderResponseError(f"{model_id}: unreadable embedding ({exc})") from exc
