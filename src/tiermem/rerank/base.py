"""The Reranker protocol and the base class that checks what goes in and comes out.

A reranker is the optional second stage of retrieval: given a query and the first
stage's candidate passages, it scores each one again, usually with a model that reads
the query and the passage together (a cross-encoder). Every provider here returns one
relevance per document, in the input order, between 0 and 1, higher is better.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tiermem.aio.twins import Steps, stepped, stepped_twin
from tiermem.errors import InvalidTypeError, ProviderResponseError


@runtime_checkable
class Reranker(Protocol):
    """Scores documents against a query: ``rerank`` / ``arerank``.

    ``model_id`` names the model (``"cohere/rerank-v3.5"``, ``"onnx/ms-marco"``).
    """

    model_id: str

    @stepped
    def rerank(self, query: str, documents: Sequence[str]) -> Steps[list[float]]:
        """One relevance per document, in the input order; higher is better."""
        ...

    async def arerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """Async twin of :meth:`rerank`."""
        ...


def validate_input(query: object, documents: object) -> list[str]:
    """``documents`` as a list; raise a typed error naming the bad argument."""
    if not isinstance(query, str):
        raise InvalidTypeError("query", f"expected str, got {type(query).__name__}")
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise InvalidTypeError(
            "documents",
            f"expected a sequence of str, got {type(documents).__name__}",
            "pass [text, ...]",
        )
    for i, document in enumerate(documents):
        if not isinstance(document, str):
            raise InvalidTypeError(
                f"documents[{i}]", f"expected str, got {type(document).__name__}"
            )
    return list(documents)


def check_scores(scores: object, expected: int, provider: str) -> list[float]:
    """``scores`` as floats if they are ``expected`` finite numbers, else
    :class:`ProviderResponseError`."""
    if not isinstance(scores, Sequence) or isinstance(scores, (str, bytes)):
        raise ProviderResponseError(f"{provider}: scores are not a list: {str(scores)[:200]}")
    if len(scores) != expected:
        raise ProviderResponseError(f"{provider}: {len(scores)} scores for {expected} documents")
    out: list[float] = []
    for score in scores:
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ProviderResponseError(f"{provider}: score {score!r} is not a number")
        if not math.isfinite(score):
            raise ProviderResponseError(f"{provider}: score {score!r} is not finite")
        out.append(float(score))
    return out


class BaseReranker:
    """Shared body of the providers: input checks, no call for no documents, the
    output checked. A provider implements :meth:`_scores` (and :meth:`_ascores` when it
    has native async I/O; otherwise ``arerank`` runs ``_scores`` in a thread)."""

    provider = "reranker"
    model_id = "reranker"

    @stepped
    def rerank(self, query: str, documents: Sequence[str]) -> Steps[list[float]]:
        """One relevance in [0, 1] per document, in the input order; higher is better.

        Raises:
            InvalidTypeError: ``query`` is not a str or ``documents`` not a list of str.
            ProviderError: the model failed (its subclasses say how).
        """
        texts = validate_input(query, documents)
        if not texts:
            return []
        return check_scores((yield (query, texts)), len(texts), self.model_id)

    arerank = stepped_twin(rerank)

    def _step(self, wait: tuple[str, list[str]], /) -> Sequence[float]:
        """The scores of a (query, documents) pair: the one wait of :meth:`rerank`."""
        return self._scores(*wait)

    async def _astep(self, wait: tuple[str, list[str]], /) -> Sequence[float]:
        return await self._ascores(*wait)

    def _scores(self, query: str, documents: list[str]) -> Sequence[float]:
        raise NotImplementedError

    async def _ascores(self, query: str, documents: list[str]) -> Sequence[float]:
        """Native async I/O where a provider has it; by default :meth:`_scores` in a thread."""
        return await asyncio.to_thread(self._scores, query, documents)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"
