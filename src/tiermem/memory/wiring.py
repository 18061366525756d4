"""The tiers of a Memory, built from its configuration on first use.

:class:`Tiers` holds the store, embedder, chat model, working memory, synopsis service,
store worker (with the fact worker), access log, search threads and session buffers.
Each part is built lazily (loading a local model takes seconds) and once, under one
lock; what Tiers built itself it closes, a part given to it stays open (it may be shared).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from tiermem.aio.twins import Call, Calls, Steps, stepped, stepped_twin
from tiermem.breaker import model_unavailable
from tiermem.buffer.memory import BufferMemory, BufferRegistry
from tiermem.config.model import TiermemConfig
from tiermem.errors import (
    ClosedError,
    ConfigError,
    DimensionMismatchError,
    InvalidTypeError,
    ProviderError,
    ProviderUnavailableError,
    TiermemError,
)
from tiermem.memory.access import AccessLog
from tiermem.memory.changes import Changes
from tiermem.paths import sqlite_file
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.transcript import GenerationOp
from tiermem.tokens import TokenCounter, get_token_counter
from tiermem.types.checks import MAX_CONTENT_CHARS

log = logging.getLogger(__name__)

PROFILE_TYPES = ("fact", "preference", "context", "summary")
PROFILE_PAGE: dict[str, Any] = {"limit": 200, "memory_type": list(PROFILE_TYPES)}
"""The store's list arguments of the memories a synopsis is written from."""


class Tiers(Calls):
    """The parts of one Memory (see :class:`~tiermem.memory.Memory` for the arguments)."""

    def __init__(
        self,
        config: Any,
        path: str | None,
        store: Any,
        embedder: Any,
        llm: Any,
        summarizer: Any,
        synopsis: Any,
        token_counter: TokenCounter | None,
    ) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError("path", f"expected a file path, got {type(path).__name__}")
        if store is not None and not isinstance(store, MemoryStore):
            raise InvalidTypeError(
                "store",
                f"expected a MemoryStore, got {type(store).__name__}",
                "pass SQLiteStore(...) or PostgresStore(...), or a path as the first argument",
            )
        self.config = config if isinstance(config, TiermemConfig) else TiermemConfig.load(config)
        self.path = None if path is None else sqlite_file(path, "path")
        self.token_counter = token_counter or get_token_counter(self.config.chat_model)
        self._store = store
        self.owns_store = store is None
        self._embedder_spec = embedder
        self._embedder: Any = None
        self._llm_spec = llm
        self._llm: Any = None
        self._rerank: Any = None
        self._summarizer = summarizer
        self._working: Any = None
        self._synopsis = synopsis
        self._owns_synopsis = synopsis is None
        self._worker: Any = None
        self._accesses: AccessLog | None = None
        self._searches: ThreadPoolExecutor | None = None
        self.lock = threading.RLock()
        self.closed = False
        self.buffers = BufferRegistry(self.new_buffer)
        self.changes = Changes(self._cached_parts)
        self._preload_model()

    def _once(self, name: str, build: Callable[[], Any]) -> Any:
        """The part in attribute ``name``, made by ``build`` on first use (once: under
        the lock)."""
        part = getattr(self, name)
        if part is None:
            with self.lock:
                part = getattr(self, name)
                if part is None:
                    part = build()
                    setattr(self, name, part)
        return part

    def _open_once(self, name: str, build: Callable[[], Any]) -> Any:
        """:meth:`_once` for a part that must not be made once the Memory is closed."""

        def checked() -> Any:
            self.check_open()
            return build()

        return self._once(name, checked)

    # -- the embedding model and the chat model -------------------------------------------

    @property
    def embedder(self) -> Any:
        """The embedder (built on first use: loading a local model takes seconds)."""
        return self._once("_embedder", self._build_embedder)

    def _build_embedder(self) -> Any:
        from tiermem.embeddings import get_embedder

        spec = self._embedder_spec or self.config.embedding_model
        options = {}
        if isinstance(spec, str) and spec.startswith("openai/"):
            options = self.config.llm.provider_options()
        embedder = get_embedder(spec, **options)
        if self._store is not None:
            _check_dimension(self._store, embedder)
        return embedder

    def _preload_model(self) -> None:
        """Start loading a local embedding model in a background thread: the first context
        or add needs it, and meanwhile the store opens and the keyword search runs (the cold
        start, docs/benchmarks.md). A failure here is raised again where the model is used."""
        spec = self._embedder_spec or self.config.embedding_model
        if isinstance(spec, str) and spec.startswith("local/"):
            # not a daemon: a process that exits at once waits for the load instead of
            # killing onnxruntime mid-load (an abort at exit)
            threading.Thread(target=self._preload, name="tiermem-preload").start()

    def _preload(self) -> None:
        try:
            preload = getattr(self.embedder, "preload", None)
            if preload is not None:
                preload()
        except Exception as exc:  # the same error is raised where the model is first used
            log.debug("preloading the embedding model failed: %s", exc)

    @stepped
    def embed(self, texts: list[str]) -> Steps[Any]:
        """The texts' vectors in one call; an embedder's own exception becomes a
        ProviderError. Async: texts the embedder has cached cost no thread (a local
        model runs in one for the others); the embedder is built in a thread."""
        with _provider_errors():
            embedder = self._embedder or (yield Call(lambda: self.embedder, None))
            return (yield Call(embedder.embed, embedder.aembed, texts))

    aembed = stepped_twin(embed)

    def max_chars(self) -> int:
        """The longest text a message may have (``memory.max_message_chars``): the
        transcript keeps it whole; the worker embeds a long one in passages."""
        return int(self.config.memory.max_message_chars)

    def memory_chars(self) -> int:
        """The longest content of a memory (``remember``, ``update_memory``): it is
        embedded whole, so what the embedder takes (at most :data:`MAX_CONTENT_CHARS`)."""
        return min(getattr(self.embedder, "max_chars", MAX_CONTENT_CHARS), MAX_CONTENT_CHARS)

    @property
    def llm(self) -> Any:
        """The chat model for summaries and synopses, or None (offline)."""
        spec = self._llm_spec or self.config.chat_model
        if spec is None:
            return None

        def build() -> Any:
            from tiermem.llm import get_llm

            options = self.config.llm.provider_options()
            return get_llm(spec, **options) if isinstance(spec, str) else spec

        return self._once("_llm", build)

    @property
    def rerank(self) -> Any:
        """The second stage of a context (``memory.rerank``: a
        :class:`~tiermem.planner.planner.Rerank`), or None when off. Built on first use; a read
        waits at most ``timeout`` for it, and its breaker skips it while it keeps failing."""
        settings = self.config.memory.rerank
        provider = settings.provider
        if provider is None:
            return None

        def build() -> Any:
            from tiermem.planner.planner import Rerank
            from tiermem.rerank import blend, get_reranker, rerank_scores

            reranker = get_reranker(provider, llm=self.llm, **settings.provider_options())

            def rescore(query: str, documents: list[str], relevance: list[float]) -> list[float]:
                scores = rerank_scores(reranker, query, documents, settings.timeout)
                return blend(relevance, scores, settings.weight)

            return Rerank(rescore, settings.top_n)

        return self._once("_rerank", build)

    def uses_llm(self, choice: str, key: str, offline: str) -> bool:
        """Whether a ``llm`` / ``auto`` / offline setting means the chat model (auto: when
        one is configured); ``llm`` without one is a ConfigError naming ``key``."""
        if choice == "llm" and self.llm is None:
            raise ConfigError(
                key,
                "is 'llm' but no chat model is configured",
                f"add llm.models: [{{chat: openai/gpt-4o-mini}}] or use '{offline}'",
            )
        return choice == "llm" or (choice == "auto" and self.llm is not None)

    # -- the store -------------------------------------------------------------------------

    @property
    def store(self) -> MemoryStore:
        """The long-term store (a SQLite file unless configured or given otherwise)."""
        store: MemoryStore = self._once("_store", self._build_store)
        return store

    def _build_store(self) -> Any:
        persistent = self.config.memory.persistent
        durability = self.config.memory.durability
        durability = "committed" if durability == "memory" else durability
        if persistent.provider == "postgresql" and persistent.enabled:
            from tiermem.stores.postgres import PostgresStore

            assert persistent.connection_string is not None  # checked by the config
            replica = persistent.read_connection_string
            return PostgresStore(
                persistent.connection_string.get_secret_value(),
                dimension=self.embedder.dimension,
                embedder=self.embedder,
                durability=durability,
                timeout=persistent.connect_timeout,
                partitions=persistent.partitions,
                read_connection_string=None if replica is None else replica.get_secret_value(),
                replica_wait=persistent.replica_wait,
                native_async=persistent.native_async,
            )
        from tiermem.stores import SQLiteStore

        path = self.path or (str(persistent.path) if persistent.enabled else ":memory:")
        return SQLiteStore(
            path,
            dimension=self.embedder.dimension,
            embedder=self.embedder,
            durability=durability,
            cache_bytes=persistent.cache_mb * 1024 * 1024,
        )

    def generation(self, user_id: str) -> int:
        """The user's change generation in the store (see :mod:`tiermem.memory.changes`)."""
        return int(self.store.batch([GenerationOp(user_id)])[0])

    # -- caches in process -------------------------------------------------------------------

    @property
    def working(self) -> Any:
        """The in-process working memory (None when ``memory.working.enabled`` is false)."""
        settings = self.config.memory.working
        if not settings.enabled:
            return self._working

        def build() -> Any:
            from tiermem.working.memory import WorkingMemory

            return WorkingMemory(
                embedder=self.embedder,
                max_memory_mb=settings.max_memory_mb,
                fifo_interval_min=settings.fifo_interval_min,
                user_isolation=True,
            )

        return self._once("_working", build)

    @property
    def built_working(self) -> Any:
        """The working memory if it was built (a context searches no other)."""
        return self._working

    @property
    def synopses(self) -> Any:
        """The synopsis service (None when ``memory.synopsis.enabled`` is false)."""
        settings = self.config.memory.synopsis
        if not settings.enabled:
            return self._synopsis

        def build() -> Any:
            from tiermem.synopsis import SynopsisGenerator, SynopsisService, cache_from_config

            return SynopsisService(
                cache_from_config(settings),
                SynopsisGenerator(self.llm, max_items=settings.max_items),
                refresh_on_access=settings.refresh_on_access,
                fetch_memories=self._profile_memories,
            )

        return self._once("_synopsis", build)

    def _profile_memories(self, user_id: str) -> list[Any]:
        """What a synopsis is written from: the user's facts, preferences and context
        (current versions only: a superseded fact is history, not a profile)."""
        return _current(self.store.index.list(user_id, **PROFILE_PAGE))

    @property
    def native_async(self) -> bool:
        """Whether the store, once built, reads natively in async calls (PostgreSQL with
        ``memory.persistent.native_async``): an async context then needs no thread."""
        return bool(getattr(self._store, "native_async", False))

    def _cached_parts(self) -> dict[str, Any]:
        """What :attr:`changes` invalidates: the caches built so far (the synopsis service
        is built, so a shared cache's entries are deleted even if this process read none)."""
        return {
            "synopses": self.synopses,
            "working": self._working,
            "accesses": self._accesses,
            "buffers": self.buffers,
            "context": self._worker.context if self._worker is not None else None,
        }

    @property
    def accesses(self) -> AccessLog:
        """Counts of the memories each context used, written to the store off the hot path."""
        accesses: AccessLog = self._open_once("_accesses", lambda: AccessLog(self.store))
        return accesses

    @property
    def reads_apart(self) -> bool:
        """Whether a store read in another thread runs beside this thread's (a pool of
        connections: PostgreSQL), rather than waiting for it (SQLite's one connection)."""
        from tiermem.stores import SQLiteStore

        return not isinstance(self.store, SQLiteStore)

    def search_pool(self) -> ThreadPoolExecutor:
        """Threads that search the store while the caller embeds the query."""
        pool: ThreadPoolExecutor = self._open_once(
            "_searches", lambda: ThreadPoolExecutor(4, thread_name_prefix="tiermem-search")
        )
        return pool

    # -- background work ---------------------------------------------------------------------

    @property
    def worker(self) -> Any:
        """The :class:`~tiermem.work.worker.StoreWorker` that embeds and summarizes the store's
        pending work (shared with every process using the same store)."""
        return self._open_once("_worker", self._build_worker)

    def _build_worker(self) -> Any:
        from tiermem.work.worker import StoreWorker

        settings = self.config.memory.buffer
        work = self.config.memory.worker
        return StoreWorker(
            self.store,
            self.embedder,
            self.new_summarizer,
            window=settings.size,
            summary_batch=min(settings.summary_batch, settings.size),
            batch_size=work.batch_size,
            lease=work.lease_seconds,
            max_attempts=work.max_attempts,
            retry_backoff=work.retry_backoff,
            delay=work.delay,
            background=work.background,
            facts=self._new_fact_worker(),
            passages=self.config.memory.passages,
            counter=self.token_counter,
        )

    def _new_fact_worker(self) -> Any:
        """The fact extractor's worker when ``memory.facts.enabled`` (else None)."""
        settings = self.config.memory.facts
        if not settings.enabled:
            return None
        from tiermem.facts.worker import FactWorker

        use_llm = self.uses_llm(settings.extractor, "memory.facts.extractor", "offline")

        def extractor() -> Any:
            from tiermem.facts.extract import LLMExtractor, OfflineExtractor

            if use_llm:
                return LLMExtractor(self.llm, structured=settings.structured)
            return OfflineExtractor()

        return FactWorker(
            self.store,
            self.embedder,
            extractor,
            batch=settings.batch,
            max_batch=settings.max_batch,
            lease=settings.lease_seconds,
            concurrency=settings.concurrency,
            retry_backoff=settings.retry_backoff,
            max_backoff=settings.max_backoff,
            related=settings.related,
            sweep_interval=settings.sweep_seconds,
        )

    def new_summarizer(self) -> Any:
        """The summarizer of sessions: the one given, else by ``memory.buffer.summarizer``."""
        from tiermem.summaries.summarize import ExtractiveSummarizer, MemorySummarizer

        if self._summarizer is not None:
            return self._summarizer
        settings = self.config.memory.buffer
        use_llm = self.uses_llm(settings.summarizer, "memory.buffer.summarizer", "extractive")
        return MemorySummarizer(model=self.llm) if use_llm else ExtractiveSummarizer()

    def new_buffer(self, user_id: str, session_id: str | None) -> BufferMemory:
        """A session's buffer (retention without the store keeps the conversation there)."""
        from tiermem.summaries.worker import SummaryPolicy

        settings = self.config.memory.buffer
        return BufferMemory(
            buffer_size=settings.size,
            max_tokens=settings.max_tokens,
            summarizer=self.new_summarizer(),
            multiplier=settings.multiplier,
            token_counter=self.token_counter,
            summary_policy=SummaryPolicy(batch_size=min(settings.summary_batch, settings.size)),
        )

    # -- the end ---------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise ClosedError once :meth:`close` began."""
        if self.closed:
            raise ClosedError("this Memory is closed: make a new Memory (or use `with Memory()`)")

    def flush(self, timeout: float | None) -> bool:
        """Wait for the access counts and every buffer's summaries; False on timeout."""
        done = self._accesses.flush() if self._accesses is not None else True
        for key in self.buffers:
            buffer = self.buffers.peek(*key)
            if buffer is not None:
                done = buffer.flush(timeout) and done
        return done

    def close(self, timeout: float | None) -> None:
        """Index what the worker can in ``timeout`` and release every part built here."""
        if self._worker is not None:
            self._worker.close(timeout)
            try:  # what can be indexed now is, before the process goes, if it can in time
                self._worker.drain(timeout)
            except TiermemError as exc:  # the store is down: the rows wait in the store
                log.warning("close: the store's pending work stays pending: %s", exc)
        if self._searches is not None:
            self._searches.shutdown()
        if self._accesses is not None:
            self._accesses.close()
        if self._working is not None:
            self._working.close()
        if self._synopsis is not None and self._owns_synopsis:
            self._synopsis.cache.close()
        if self._store is not None and self.owns_store:
            self._store.close()


def _check_dimension(store: Any, embedder: Any) -> None:
    """A given store must hold vectors of the embedder's width (else every write fails)."""
    if store.dimension != embedder.dimension:
        raise DimensionMismatchError(
            "embedder",
            f"{embedder.model_id} makes {embedder.dimension}-dimensional vectors, "
            f"the store holds {store.dimension}",
            "use an embedder and a store of the same dimension",
        )


def _current(records: list[Any]) -> list[Any]:
    """The current versions among ``records`` (a superseded fact is history)."""
    from tiermem.stores.facts import current

    return [r for r in records if current(r.metadata)]


@contextmanager
def _provider_errors() -> Iterator[None]:
    """An embedder's own exception becomes a ProviderError (ours pass as they are): a
    ProviderUnavailableError when it says the embedder is down (a ``ConnectionError`` or
    another ``OSError``: :func:`tiermem.breaker.model_unavailable`)."""
    try:
        yield
    except TiermemError:
        raise
    except Exception as exc:
        kind = ProviderUnavailableError if model_unavailable(exc) else ProviderError
        raise kind(f"the embedder failed: {type(exc).__name__}: {exc}") from exc
