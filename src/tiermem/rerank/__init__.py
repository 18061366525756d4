"""Rerankers: an optional second stage that rescores a query's best candidates.

``get_reranker("onnx:/path/to/folder")`` (a local cross-encoder on onnxruntime),
``"cohere/rerank-v3.5"``, ``"jina/<model>"``, ``"voyage/rerank-2"``,
``"tei:http://127.0.0.1:8080"`` (the ``/rerank`` APIs) or ``"llm"`` (the chat model).
Off by default (``memory.rerank.provider: null``); the context path calls
:func:`rerank_scores`, which never raises and never waits past its timeout.
"""

from tiermem.breaker import CircuitBreaker, breaker_for
from tiermem.rerank.base import BaseReranker, Reranker
from tiermem.rerank.factory import PROVIDERS, RerankSpec, get_reranker, parse_spec
from tiermem.rerank.http import APIS, HTTPReranker
from tiermem.rerank.llm import LLMReranker, parse_scores
from tiermem.rerank.onnx import OnnxCrossEncoder
from tiermem.rerank.stage import arerank_scores, blend, rerank_scores

__all__ = [
    "APIS",
    "PROVIDERS",
    "BaseReranker",
    "CircuitBreaker",
    "HTTPReranker",
    "LLMReranker",
    "OnnxCrossEncoder",
    "RerankSpec",
    "Reranker",
    "arerank_scores",
    "blend",
    "breaker_for",
    "get_reranker",
    "parse_scores",
    "parse_spec",
    "rerank_scores",
]
