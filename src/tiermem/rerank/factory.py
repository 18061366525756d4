"""``get_reranker``: build a reranker from a spec string such as ``"cohere/rerank-v3.5"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from tiermem.errors import ConfigError
from tiermem.llm.base import LLM
from tiermem.llm.factory import PROVIDERS as CHAT_PROVIDERS
from tiermem.llm.factory import get_llm
from tiermem.rerank.base import Reranker
from tiermem.rerank.http import APIS, HTTPReranker
from tiermem.rerank.llm import LLMReranker
from tiermem.rerank.onnx import OnnxCrossEncoder

PROVIDERS = ("onnx", "cohere", "jina", "voyage", "tei", "llm")
EXAMPLES = (
    "onnx:/path/to/folder",
    "cohere/rerank-v3.5",
    "jina/jina-reranker-v2-base-multilingual",
    "voyage/rerank-2",
    "tei:http://127.0.0.1:8080",
    "llm",
)
_HTTP_OPTIONS = frozenset({"api_key", "base_url", "timeout", "max_retries", "backoff"})
_HINT = "write one of " + ", ".join(EXAMPLES)


@dataclass(frozen=True)
class RerankSpec:
    """A parsed spec: the provider and what follows it (a model, path, URL or chat model;
    may be empty for ``tei``, given ``base_url``, and for ``llm``)."""

    provider: str
    target: str


def parse_spec(spec: object) -> RerankSpec:
    """Split ``provider/target`` or ``provider:target`` (the first separator counts).

    Raises:
        ConfigError: not a str, an unknown provider, or a provider without what it needs.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError("reranker", f"{spec!r} is not a reranker spec", _HINT)
    text = spec.strip()
    cuts = [i for i in (text.find("/"), text.find(":")) if i >= 0]
    cut = min(cuts) if cuts else len(text)
    provider, target = text[:cut].lower(), text[cut + 1 :].strip()
    if provider not in PROVIDERS:
        raise ConfigError("reranker", f"{spec!r} does not name a reranker", _HINT)
    if provider in ("cohere", "jina", "voyage") and not target:
        raise ConfigError("reranker", f"{spec!r} names no model", f"e.g. {provider}/<model>")
    if provider == "onnx" and not target:
        raise ConfigError(
            "reranker", f"{spec!r} names no folder", "e.g. onnx:/models/ms-marco-MiniLM-L-6-v2"
        )
    if provider == "tei" and target and urlparse(target).scheme not in ("http", "https"):
        raise ConfigError(
            "reranker", f"{target!r} is not an http(s) URL", "e.g. tei:http://127.0.0.1:8080"
        )
    if provider == "llm" and target:
        chat, found, name = next(
            ((p, f, n) for p, f, n in (target.partition(s) for s in "/:") if f),
            ("", "", ""),
        )
        if not found or chat.lower() not in CHAT_PROVIDERS or not name.strip():
            raise ConfigError(
                "reranker",
                f"{target!r} is not a chat model",
                f"write llm (the configured chat model) or llm/<provider>/<model> with "
                f"provider one of {sorted(CHAT_PROVIDERS)}",
            )
    return RerankSpec(provider, target)


def get_reranker(spec: str | Reranker, *, llm: LLM | None = None, **options: Any) -> Reranker:
    """Build the reranker ``spec`` names; a :class:`Reranker` is returned unchanged.

    Examples: ``get_reranker("onnx:/models/ms-marco-MiniLM-L-6-v2")``,
    ``get_reranker("cohere/rerank-v3.5")`` (``$COHERE_API_KEY``),
    ``get_reranker("jina/jina-reranker-v2-base-multilingual")``,
    ``get_reranker("voyage/rerank-2")``, ``get_reranker("tei:http://127.0.0.1:8080")``,
    ``get_reranker("llm", llm=chat_model)``, ``get_reranker("llm/openai/gpt-4o-mini")``.

    Args:
        spec: the provider and its model, folder or URL.
        llm: the chat model ``"llm"`` uses (the configured one); required for ``"llm"``.
        **options: for HTTP APIs ``api_key``, ``base_url``, ``timeout``, ``max_retries``
            and request fields; for ``onnx`` ``max_length``, ``batch_size``,
            ``sigmoid``, ``threads`` (HTTP options are ignored there); for
            ``llm/<model>`` the chat provider's options.

    Nothing is loaded or contacted here: a model loads, or an API is called, on the first
    rerank.

    Raises:
        ConfigError: a bad spec, or ``"llm"`` with no chat model.
    """
    if isinstance(spec, Reranker):
        return spec
    parsed = parse_spec(spec)
    if parsed.provider == "onnx":
        return OnnxCrossEncoder(parsed.target, **_without_http(options))
    if parsed.provider == "llm":
        if parsed.target:
            return LLMReranker(get_llm(parsed.target, **options))
        if llm is None:
            raise ConfigError(
                "reranker",
                "'llm' reranks with the configured chat model, and none is configured",
                "add a chat model (llm.models: - chat: openai/gpt-4o-mini), pass llm=, "
                "or write llm/<provider>/<model>",
            )
        return LLMReranker(llm, **_without_http(options))
    api = APIS[parsed.provider]
    if api.model:
        return HTTPReranker(parsed.provider, parsed.target, **options)
    if parsed.target:
        options = {**options, "base_url": parsed.target}
    if not options.get("base_url"):
        raise ConfigError(
            "reranker", "tei needs the URL of your server", "e.g. tei:http://127.0.0.1:8080"
        )
    return HTTPReranker(parsed.provider, **options)


def _without_http(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in _HTTP_OPTIONS}
