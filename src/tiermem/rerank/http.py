"""The ``/rerank`` APIs: Cohere, Jina, Voyage and Hugging Face text-embeddings-inference.

Each takes a query and a list of texts and answers ``(index, score)`` for them, ranked;
the shapes differ only in names:

* cohere: ``POST /v2/rerank`` ``{model, query, documents, top_n}`` ->
  ``{results: [{index, relevance_score}]}``
* jina: ``POST /v1/rerank``, the same shape as Cohere's
* voyage: ``POST /v1/rerank`` ``{model, query, documents, top_k}`` ->
  ``{data: [{index, relevance_score}]}``
* tei (text-embeddings-inference): ``POST /rerank`` ``{query, texts, raw_scores: false}``
  -> ``[{index, score}]``

Every document is asked for (``top_n`` / ``top_k`` = their number) and the scores are
put back in the input order; the four APIs give relevances between 0 and 1. HTTP,
timeouts, retries and the typed errors come from :class:`tiermem.aio.http.HttpClient`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from tiermem.aio.http import HttpClient, require_api_key
from tiermem.errors import ConfigError, InputError, ProviderResponseError
from tiermem.rerank.base import BaseReranker

if TYPE_CHECKING:
    import httpx

_LIST = "items"
"""Where a JSON list answer (text-embeddings-inference's) is put in the decoded object."""


@dataclass(frozen=True)
class RerankAPI:
    """One ``/rerank`` dialect: where it is and what its fields are called."""

    name: str
    base_url: str | None
    """The service's own host (None: a server you run; its URL is required)."""
    path: str
    key_env: tuple[str, ...]
    """Environment variables read, in order, for the API key when none is given."""
    documents: str
    top: str | None
    """The field asking for every result (``top_n`` / ``top_k``), if the API has one."""
    results: str
    score: str
    model: bool
    """Whether the request names a model."""
    fixed: dict[str, Any] = field(default_factory=dict)
    """Fields sent with every request."""


APIS: dict[str, RerankAPI] = {
    "cohere": RerankAPI(
        "cohere",
        "https://api.cohere.com",
        "/v2/rerank",
        ("COHERE_API_KEY", "CO_API_KEY"),
        "documents",
        "top_n",
        "results",
        "relevance_score",
        model=True,
    ),
    "jina": RerankAPI(
        "jina",
        "https://api.jina.ai",
        "/v1/rerank",
        ("JINA_API_KEY",),
        "documents",
        "top_n",
        "results",
        "relevance_score",
        model=True,
        fixed={"return_documents": False},
    ),
    "voyage": RerankAPI(
        "voyage",
        "https://api.voyageai.com",
        "/v1/rerank",
        ("VOYAGE_API_KEY",),
        "documents",
        "top_k",
        "data",
        "relevance_score",
        model=True,
    ),
    "tei": RerankAPI(
        "tei",
        None,
        "/rerank",
        (),
        "texts",
        None,
        _LIST,
        "score",
        model=False,
        fixed={"raw_scores": False, "truncate": True},
    ),
}


class _RerankHttp(HttpClient):
    """The shared client, also accepting a JSON list as the answer (as TEI gives)."""

    def _decode(self, response: httpx.Response, url: str) -> dict[str, Any]:
        try:
            data = json.loads(response.content)
        except ValueError:
            return super()._decode(response, url)  # raises the typed error
        if isinstance(data, list):
            return {_LIST: data}
        return super()._decode(response, url)


class HTTPReranker(BaseReranker):
    """A reranker behind a ``/rerank`` API.

    Args:
        api: ``"cohere"``, ``"jina"``, ``"voyage"`` or ``"tei"`` (text-embeddings-inference).
        model: the model name (``"rerank-v3.5"``); required except for ``tei``, which
            serves one model.
        api_key: sent as ``Authorization: Bearer``; default ``$COHERE_API_KEY`` (or
            ``$CO_API_KEY``), ``$JINA_API_KEY``, ``$VOYAGE_API_KEY``; none for ``tei``.
            Required on the service's own host, optional on another ``base_url``.
        base_url: the server's root URL (the API's path is added); required for ``tei``
            (``http://127.0.0.1:8080``), else the service's own host. A compatible
            server (vLLM, a proxy) works with its URL.
        timeout, max_retries, backoff: per attempt, see :class:`tiermem.aio.http.HttpClient`.
        **fields: more request fields (``max_tokens_per_doc``, ``truncation``, ...).
    """

    def __init__(
        self,
        api: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        **fields: Any,
    ) -> None:
        spec = APIS.get(api)
        if spec is None:
            raise ConfigError("api", f"{api!r} is not a rerank API", f"use one of {sorted(APIS)}")
        if spec.model and (not isinstance(model, str) or not model.strip()):
            raise ConfigError(
                "model", f"{api} needs a model name, got {model!r}", f"e.g. {_EXAMPLES[api]}"
            )
        base = base_url or spec.base_url
        if base is None:
            raise ConfigError(
                "base_url", f"{api} needs the URL of your server", "e.g. http://127.0.0.1:8080"
            )
        reserved = {"model", "query", spec.documents, spec.top or "top_n"} & set(fields)
        if reserved:
            raise InputError(
                sorted(reserved)[0], "is set by the reranker", "pass the model to the constructor"
            )
        key = api_key
        for env in spec.key_env:
            key = key if key is not None else os.environ.get(env)
        self.api = spec
        self.model = model if spec.model else None
        self.provider = api
        self.model_id = f"{api}/{model}" if spec.model else f"{api}/{base.rstrip('/')}"
        self.fields = fields
        self._key_required = spec.base_url is not None and (
            urlparse(base).hostname == urlparse(spec.base_url).hostname
        )
        self._has_key = bool(key)
        self._http = _RerankHttp.bearer(
            base,
            key,
            spec.key_env[0] if spec.key_env else None,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            provider=api,
        )

    def _request(self, query: str, documents: list[str]) -> dict[str, Any]:
        if self._key_required and not self._has_key:
            require_api_key(None, self.api.key_env[0], self.provider)
        body: dict[str, Any] = {**self.api.fixed, **self.fields}
        if self.model is not None:
            body["model"] = self.model
        body["query"] = query
        body[self.api.documents] = documents
        if self.api.top is not None:
            body[self.api.top] = len(documents)
        return body

    def _parse(self, data: dict[str, Any], count: int) -> list[float]:
        """The scores in the input order; a document the answer leaves out scores 0."""
        results = data.get(self.api.results)
        if not isinstance(results, list):
            raise self._bad(f"no {self.api.results!r} list", data)
        scores = [0.0] * count
        for item in results:
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get(self.api.score) if isinstance(item, dict) else None
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise self._bad(f"result {item!r} has no index in 0..{count - 1}", data)
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise self._bad(f"result {item!r} has no numeric {self.api.score!r}", data)
            scores[index] = float(score)
        return scores

    def _bad(self, what: str, data: dict[str, Any]) -> ProviderResponseError:
        return ProviderResponseError(f"{self.provider}: {what} in response: {str(data)[:300]}")

    def _scores(self, query: str, documents: list[str]) -> Sequence[float]:
        data = self._http.post_json(self.api.path, self._request(query, documents))
        return self._parse(data, len(documents))

    async def _ascores(self, query: str, documents: list[str]) -> Sequence[float]:
        data = await self._http.apost_json(self.api.path, self._request(query, documents))
        return self._parse(data, len(documents))

    def close(self) -> None:
        self._http.close()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"HTTPReranker({self.model_id!r}, base_url={self._http.base_url!r})"


_EXAMPLES = {
    "cohere": "cohere/rerank-v3.5",
    "jina": "jina/jina-reranker-v2-base-multilingual",
    "voyage": "voyage/rerank-2",
    "tei": "tei:http://127.0.0.1:8080",
}
