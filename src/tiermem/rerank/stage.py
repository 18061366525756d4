"""The second stage as a read calls it: scores within a time limit, or None.

A read never waits on a model that is down (docs/architecture.md): :func:`rerank_scores`
gives the reranker ``timeout`` seconds and returns None, logged, when it fails or is
late, so the context keeps its first-stage order. Each reranker sits behind a
:class:`~tiermem.breaker.CircuitBreaker` (3 failures in a row: skipped for 30 s,
then one probe call decides), so a dead model costs a read nothing at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import Future, wait

from tiermem.breaker import CircuitBreaker, breaker_for
from tiermem.errors import InvalidSizeError
from tiermem.rerank.base import Reranker, check_scores, validate_input
from tiermem.runner import shared_pool

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0
THREADS = 16
"""Threads that run sync rerank calls (a late call keeps its thread until it ends; the
breaker bounds how many are late)."""


def rerank_scores(
    reranker: Reranker | None,
    query: str,
    documents: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    breaker: CircuitBreaker | None = None,
) -> list[float] | None:
    """The reranker's score of each document (input order), or None within ``timeout``
    seconds when there is no reranker, it fails, answers late or its breaker is open.

    Args:
        reranker: any :class:`~tiermem.rerank.Reranker`; None (reranking off) gives None.
        query: the query the documents are scored against.
        documents: the candidates' texts ([] gives [] without a call).
        timeout: seconds the caller waits; a late call finishes in the background.
        breaker: default :func:`~tiermem.breaker.breaker_for` the reranker (one per
            reranker object: 3 failures, 30 s).

    Raises:
        InputError: a query or documents of the wrong type, or a timeout <= 0 (the
            caller's bug). Nothing else: a model's failure is logged and gives None.
    """
    opened = _open(reranker, query, documents, timeout, breaker)
    if not isinstance(opened, tuple):
        return opened
    reranker, texts, guard = opened
    try:
        future = shared_pool("rerank", THREADS).submit(reranker.rerank, query, texts)
    except Exception as exc:  # no rerank method, or the process is shutting down
        _failed(guard, reranker, f"{type(exc).__name__}: {exc}")
        return None
    try:
        done, _ = wait([future], timeout)
    except BaseException:
        guard.abandon()
        raise
    if not done:
        if future.cancel():  # never started: every thread was busy, not the model's fault
            guard.abandon()
            log.warning("reranker %s: no thread free within %ss; skipped", _name(reranker), timeout)
            return None
        _failed(guard, reranker, f"no answer within {timeout}s")
        return None
    return _settle(guard, reranker, future, len(texts))


def _open(
    reranker: Reranker | None,
    query: str,
    documents: Sequence[str],
    timeout: float,
    breaker: CircuitBreaker | None,
) -> tuple[Reranker, list[str], CircuitBreaker] | list[float] | None:
    """The reranker, the texts to score and its breaker; or the answer with no call:
    None (no reranker, or its breaker open) or [] (no documents)."""
    texts = _texts(query, documents, timeout)
    if reranker is None:
        return None
    if not texts:
        return []
    guard = breaker or breaker_for(reranker)
    if not guard.allow():
        return None
    return reranker, texts, guard


async def arerank_scores(
    reranker: Reranker | None,
    query: str,
    documents: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    breaker: CircuitBreaker | None = None,
) -> list[float] | None:
    """Async twin of :func:`rerank_scores` (awaits ``reranker.arerank``; a late call is
    cancelled)."""
    opened = _open(reranker, query, documents, timeout, breaker)
    if not isinstance(opened, tuple):
        return opened
    reranker, texts, guard = opened
    try:
        task = asyncio.ensure_future(reranker.arerank(query, texts))
    except Exception as exc:  # an arerank that is not a coroutine: the model's fault too
        _failed(guard, reranker, f"{type(exc).__name__}: {exc}")
        return None
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except BaseException:  # the caller was cancelled
        task.cancel()
        guard.abandon()
        raise
    if not done:
        task.cancel()
        _failed(guard, reranker, f"no answer within {timeout}s")
        return None
    return _settle(guard, reranker, task, len(texts))


def blend(relevance: Sequence[float], scores: Sequence[float] | None, weight: float) -> list[float]:
    """``(1 - weight) * relevance + weight * score`` for each candidate (1.0: the
    reranker's score replaces the relevance); ``relevance`` unchanged when ``scores`` is
    None (no reranker, or it failed)."""
    if not 0.0 <= weight <= 1.0:
        raise InvalidSizeError("weight", f"{weight} is not between 0 and 1", "e.g. 1.0")
    if scores is None:
        return list(relevance)
    if len(scores) != len(relevance):
        raise InvalidSizeError(
            "scores", f"{len(scores)} scores for {len(relevance)} candidates", "one per candidate"
        )
    return [(1.0 - weight) * r + weight * s for r, s in zip(relevance, scores, strict=True)]


def _texts(query: object, documents: object, timeout: float) -> list[str]:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise InvalidSizeError("timeout", f"{timeout!r} must be > 0", "seconds, e.g. 2")
    return validate_input(query, documents)


def _settle(
    guard: CircuitBreaker,
    reranker: Reranker,
    done: Future[list[float]] | asyncio.Future[list[float]],
    count: int,
) -> list[float] | None:
    """The finished call's checked scores (the breaker told), or None."""
    if done.cancelled():
        guard.abandon()
        return None
    error = done.exception()  # the arguments were checked: any error is the model's
    if error is not None:
        _failed(guard, reranker, f"{type(error).__name__}: {error}")
        return None
    try:
        scores = check_scores(done.result(), count, _name(reranker))
    except Exception as exc:
        _failed(guard, reranker, str(exc))
        return None
    guard.success()
    return scores


def _failed(guard: CircuitBreaker, reranker: Reranker, why: str) -> None:
    opened = guard.failure()
    if opened:
        log.warning(
            "reranker %s failed (%s); skipped for %.0fs, the context keeps its first-stage order",
            _name(reranker),
            why,
            guard.cooldown,
        )
    else:
        log.warning(
            "reranker %s failed (%s); the context keeps its first-stage order",
            _name(reranker),
            why,
        )


def _name(reranker: Reranker) -> str:
    return str(getattr(reranker, "model_id", type(reranker).__name__))
