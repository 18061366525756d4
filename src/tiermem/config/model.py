"""Configuration: seed 001's YAML reference, validated with pydantic, with secret interpolation.

``TiermemConfig.load(source)`` takes a YAML file, YAML text or a dict. Before validation,
every string value may reference the environment: ``${NAME}``, ``${NAME:-default}`` and
``${{ secrets.NAME }}`` are replaced by the variable from the environment, else from a
secrets file (``secrets_file=`` or ``$TIERMEM_SECRETS_FILE``; ``KEY=VALUE`` lines or a YAML
mapping). ``$${`` writes a literal ``${``. A reference that resolves nowhere raises
:class:`~tiermem.errors.ConfigError` naming the key and the variable.

Credentials (``connection_string``, ``api_key``, ``redis_url``) are pydantic ``SecretStr``:
masked in ``repr``, ``str``, logs and ``model_dump``; read them with
``.get_secret_value()``. Every validation error becomes a ``ConfigError`` that names the
key path (``memory.persistent.provider``) and the allowed values; an unknown key gets a
"did you mean" suggestion.

Defaults are the embedded setup: SQLite in the user data directory, local MiniLM
embeddings, extractive summaries, an in-process synopsis cache and no LLM.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from tiermem.config.source import Resolver, key_path, read_source, secrets_path
from tiermem.embeddings.factory import DEFAULT_MODEL as DEFAULT_EMBEDDING_MODEL
from tiermem.embeddings.factory import PROVIDERS as EMBEDDING_PROVIDERS
from tiermem.errors import ConfigError
from tiermem.llm.factory import PROVIDERS as CHAT_PROVIDERS
from tiermem.paths import default_sqlite_path as default_sqlite_path
from tiermem.planner.settings import PlannerConfig
from tiermem.rerank.settings import RerankConfig as RerankConfig
from tiermem.sections import KeyProblem, Section, unwrap
from tiermem.work.vectors import PassageSettings

log = logging.getLogger(__name__)

MASK = "**********"

Retention = Literal["single_run", "session", "persistent"]
Durability = Literal["committed", "synced", "async_commit", "memory"]


def _check_model(value: str | None, providers: Any, example: str) -> str | None:
    """Accept ``provider/name`` (or ``provider:name``) with a known provider."""
    if value is None:
        return None
    for separator in ("/", ":"):
        provider, found, name = value.partition(separator)
        if found and provider.lower() in providers and name.strip():
            return value
    allowed = ", ".join(sorted(providers))
    raise ValueError(
        f"{value!r} is not '<provider>/<model>' with provider in {allowed} ({example})"
    )


EmbeddingModel = Annotated[
    str | None,
    AfterValidator(
        functools.partial(
            _check_model, providers=EMBEDDING_PROVIDERS, example="e.g. local/all-MiniLM-L6-v2"
        )
    ),
]
"""An embedding model's name, ``provider/model`` with a known provider."""
ChatModel = Annotated[
    str | None,
    AfterValidator(
        functools.partial(_check_model, providers=CHAT_PROVIDERS, example="e.g. openai/gpt-4o-mini")
    ),
]
"""A chat model's name, ``provider/model`` with a known provider."""


class BufferConfig(Section):
    """``memory.buffer``: the per-session message ring and its summaries."""

    size: int = Field(
        default=50, gt=0, description="Messages kept before the oldest are summarized."
    )
    multiplier: int = Field(default=10, gt=0, description="Summaries kept: size * multiplier.")
    vector_search: bool = Field(default=True, description="Search the buffer semantically too.")
    embedding_model: EmbeddingModel = Field(
        default=None, description="Embedding model, when llm.models has no embedding entry."
    )
    max_tokens: int | None = Field(
        default=None, gt=0, description="Also evict beyond this many tokens."
    )
    summary_batch: int = Field(
        default=10, gt=0, description="Oldest messages summarized per overflow."
    )
    summarizer: Literal["auto", "llm", "extractive"] = Field(
        default="auto", description="auto: the chat model when one is configured, else extractive."
    )

    @model_validator(mode="after")
    def _batch_fits(self) -> BufferConfig:
        if self.summary_batch > self.size:
            raise KeyProblem(
                "summary_batch",
                f"{self.summary_batch} is larger than size ({self.size})",
                "use a batch of at most size messages",
            )
        return self


class WorkingConfig(Section):
    """``memory.working``: the in-process vector index."""

    enabled: bool = True
    max_memory_mb: float = Field(
        default=10, gt=0, description="Memory limit; oldest entries go first."
    )
    fifo_interval_min: float = Field(default=5, gt=0, description="Minutes between cleanup passes.")


class PersistentConfig(Section):
    """``memory.persistent``: the long-term store."""

    enabled: bool = True
    provider: Literal["sqlite", "postgresql"] = "sqlite"
    path: Path = Field(default_factory=default_sqlite_path, description="SQLite file.")
    connection_string: SecretStr | None = Field(default=None, description="PostgreSQL URI.")
    connect_timeout: float = Field(
        default=3.0,
        gt=0,
        description="PostgreSQL: seconds a call waits for a connection before "
        "StoreUnavailableError (the server's 503 with Retry-After).",
    )
    cache_mb: int = Field(
        default=512,
        ge=1,
        description="SQLite: memory for users' vector matrices in each process (least "
        "recently used go first); a serving process's memory is set by this, not the store.",
    )
    native_async: bool = Field(
        default=True,
        description="PostgreSQL: async calls (the server's context, search and list routes) "
        "read on an async connection pool, with no thread; false runs them in threads.",
    )
    user_isolation: Literal[True] = Field(
        default=True, description="Always true: every query filters on user_id at the data layer."
    )
    partitions: int | None = Field(
        default=None,
        ge=0,
        le=1024,
        description="PostgreSQL: create the tables hash-partitioned by user_id into this many "
        "(0: not partitioned); fixed when the tables are created. Unset: an existing store "
        "opens with its own layout, a new one is made with 16.",
    )
    read_connection_string: SecretStr | None = Field(
        default=None,
        description="PostgreSQL: a streaming replica's URI; reads go there, writes and "
        "claims to connection_string.",
    )
    replica_wait: float = Field(
        default=1.0,
        ge=0,
        description="Seconds a read waits for the replica to replay the newest commit "
        "before it reads the primary.",
    )

    @field_validator("path")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _provider_needs(self) -> PersistentConfig:
        if self.provider == "postgresql" and self.enabled and self.connection_string is None:
            raise KeyProblem(
                "connection_string",
                "is required when provider is postgresql",
                "e.g. connection_string: ${{ secrets.POSTGRES_URI }}",
            )
        for key in ("connection_string", "read_connection_string", "partitions"):
            if self.provider == "sqlite" and getattr(self, key):
                raise KeyProblem(
                    key,
                    "is only used with provider: postgresql",
                    "for sqlite set path, or set provider: postgresql",
                )
        return self


class SynopsisConfig(Section):
    """``memory.synopsis``: the two-tier user synopsis cache."""

    enabled: bool = True
    identity_ttl: int = Field(default=604_800, gt=0, description="Seconds (7 days).")
    context_ttl: int = Field(default=3_600, gt=0, description="Seconds (1 hour).")
    refresh_on_access: bool = True
    backend: Literal["memory", "redis"] = "memory"
    redis_url: SecretStr = SecretStr("redis://127.0.0.1:6379/0")
    namespace: str = Field(
        default="tiermem", pattern=r"^[^:\s]+$", description="Key prefix in Redis."
    )
    max_items: int = Field(default=10, gt=0, description="Memories used per tier.")


class WorkerConfig(Section):
    """``memory.worker``: the background work claimed from the store (embedding, summaries)."""

    batch_size: int = Field(default=64, gt=0, le=10_000, description="Rows claimed at once.")
    lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a claim holds its rows; a dead process's rows are free after it.",
    )
    max_attempts: int = Field(
        default=3, gt=0, le=100, description="Tries of one row before it is marked failed."
    )
    retry_backoff: float = Field(
        default=0.5, ge=0, description="Seconds before a failed row's first retry (doubles)."
    )
    delay: float = Field(
        default=0.05,
        ge=0,
        le=60,
        description="Seconds a worker waits after new messages, so a burst is one batch.",
    )
    background: bool = Field(
        default=True,
        description="Run the worker thread in this process (false: other processes do the "
        "work, or flush()).",
    )


class FactsConfig(Section):
    """``memory.facts``: facts extracted from conversations in the background."""

    enabled: bool = Field(default=False, description="Extract facts from stored sessions.")
    extractor: Literal["auto", "llm", "offline"] = Field(
        default="auto", description="auto: the chat model when one is configured, else offline."
    )
    batch: int = Field(
        default=20, gt=0, le=1000, description="New messages of a session before extraction."
    )
    max_batch: int = Field(
        default=50, gt=0, le=1000, description="Most messages read per extraction (one call)."
    )
    concurrency: int = Field(default=2, gt=0, le=64, description="Extractions at once.")
    lease_seconds: float = Field(
        default=120.0, gt=0, description="How long one extraction holds its user."
    )
    retry_backoff: float = Field(
        default=2.0, ge=0, description="Seconds before a failed batch's first retry (doubles)."
    )
    max_backoff: float = Field(default=300.0, ge=0, description="Longest wait between retries.")
    related: int = Field(
        default=20, ge=0, le=200, description="Known facts shown to the extractor per batch."
    )
    structured: Literal["auto", "json_schema", "prompt"] = Field(
        default="auto", description="auto: a JSON schema for OpenAI-compatible providers."
    )
    sweep_seconds: float = Field(
        default=30.0, gt=0, description="Seconds between looks for batches nobody took."
    )


class MemoryConfig(Section):
    """``memory``: the tiers."""

    buffer: BufferConfig = Field(default_factory=lambda: BufferConfig())
    working: WorkingConfig = Field(default_factory=lambda: WorkingConfig())
    rerank: RerankConfig = Field(default_factory=lambda: RerankConfig())
    persistent: PersistentConfig = Field(default_factory=lambda: PersistentConfig())
    synopsis: SynopsisConfig = Field(default_factory=lambda: SynopsisConfig())
    planner: PlannerConfig = Field(default_factory=lambda: PlannerConfig())
    worker: WorkerConfig = Field(default_factory=lambda: WorkerConfig())
    facts: FactsConfig = Field(default_factory=lambda: FactsConfig())
    passages: PassageSettings = Field(default_factory=lambda: PassageSettings())
    retention: Retention = "persistent"
    durability: Durability = Field(
        default="committed",
        description=(
            "committed: add() returns once the message is committed (survives the death of "
            "any process, the database server's included); synced: once it is on disk "
            "(survives a power loss too); async_commit: before PostgreSQL flushed it (a crash "
            "of the database server may lose the last moments; on SQLite, committed); "
            "memory: queued in process and written in batches (bulk loads; a crash loses "
            "the queue)."
        ),
    )
    max_message_chars: int = Field(
        default=4_000_000,  # stores.validate.MAX_MESSAGE_CHARS, at most MAX_STORED_CHARS
        gt=0,
        le=100_000_000,
        description="The longest message text add() takes, kept whole (else ContentTooLargeError).",
    )


class ModelEntry(Section):
    """One item of ``llm.models``: ``embedding: provider/model`` and/or ``chat: provider/model``."""

    embedding: EmbeddingModel = None
    chat: ChatModel = None

    @model_validator(mode="after")
    def _not_empty(self) -> ModelEntry:
        if self.embedding is None and self.chat is None:
            raise ValueError("names no model; write embedding: ... or chat: ...")
        return self


class LLMConfig(Section):
    """``llm``: the models and the options of their HTTP providers."""

    models: list[ModelEntry] = Field(default_factory=list)
    base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint, e.g. Ollama."
    )
    api_key: SecretStr | None = None
    timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=3, ge=0)

    @model_validator(mode="after")
    def _one_of_each(self) -> LLMConfig:
        for kind in ("embedding", "chat"):
            if sum(getattr(m, kind) is not None for m in self.models) > 1:
                raise KeyProblem("models", f"lists more than one {kind} model", "keep one")
        return self

    @property
    def chat_model(self) -> str | None:
        """The chat model (summaries, synopses), or None to work offline."""
        return next((m.chat for m in self.models if m.chat), None)

    @property
    def embedding_model(self) -> str | None:
        return next((m.embedding for m in self.models if m.embedding), None)

    def provider_options(self) -> dict[str, Any]:
        """Keyword options for ``get_llm`` / ``get_embedder`` (only those set)."""
        options: dict[str, Any] = {"timeout": self.timeout, "max_retries": self.max_retries}
        if self.base_url:
            options["base_url"] = self.base_url
        if self.api_key is not None:
            options["api_key"] = self.api_key.get_secret_value()
        return options


class TiermemConfig(Section):
    """The whole configuration; ``TiermemConfig()`` is the embedded default."""

    memory: MemoryConfig = Field(default_factory=lambda: MemoryConfig())
    llm: LLMConfig = Field(default_factory=lambda: LLMConfig())
    _secret_paths: frozenset[str] = PrivateAttr(default=frozenset())

    @property
    def embedding_model(self) -> str:
        """``llm.models[].embedding``, else ``memory.buffer.embedding_model``, else local MiniLM."""
        return (
            self.llm.embedding_model
            or self.memory.buffer.embedding_model
            or DEFAULT_EMBEDDING_MODEL
        )

    @property
    def chat_model(self) -> str | None:
        return self.llm.chat_model

    @classmethod
    def load(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        secrets_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> TiermemConfig:
        """Load a YAML file, YAML text or a dict (None: the defaults), interpolate, validate.

        Raises:
            ConfigError: unreadable file or YAML, missing variable, or invalid value.
        """
        raw = read_source(source)
        env = os.environ if environ is None else environ
        resolver = Resolver(env, secrets_path(secrets_file, env))
        data = resolver.interpolate(raw, ())
        try:
            config = cls.model_validate(data)
        except ValidationError as exc:
            raise _config_error(exc, resolver.secret_paths) from None
        config._secret_paths = frozenset(resolver.secret_paths)
        log.debug("configuration loaded; variables resolved: %s", sorted(resolver.used))
        return config

    def report(self) -> list[tuple[str, str]]:
        """Every key with its effective value, secrets masked; for ``tiermem config check``."""
        rows = list(_flatten(self, ""))
        rows = [(key, MASK if key in self._secret_paths else value) for key, value in rows]
        rows.append(("(effective) embedding model", self.embedding_model))
        rows.append(("(effective) chat model", self.chat_model or "none (offline)"))
        return rows


def check_config(
    path: str | os.PathLike[str],
    *,
    secrets_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """Load and validate a configuration file; return ``(key, value)`` rows, secrets masked.

    Raises:
        ConfigError: the file is missing, malformed or invalid (the message says where).
    """
    if not Path(path).is_file():
        raise ConfigError("path", f"{os.fspath(path)!r} is not a file", "pass a YAML file")
    return TiermemConfig.load(Path(path), secrets_file=secrets_file, environ=environ).report()


# -- errors and reports ----------------------------------------------------------------


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The section class that the key path ``loc`` points into."""
    model: type[BaseModel] | None = TiermemConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        inner = unwrap(field.annotation) if field is not None else None
        model = inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None
    return model


def _is_secret(loc: tuple[str | int, ...]) -> bool:
    parent = _model_at(loc[:-1]) if loc else None
    field = parent.model_fields.get(str(loc[-1])) if parent is not None else None
    return field is not None and SecretStr in (field.annotation, *get_args(field.annotation))


def _config_error(exc: ValidationError, secret_paths: set[str]) -> ConfigError:
    problems = [_describe(err, secret_paths) for err in exc.errors(include_url=False)]
    (field, problem, hint), rest = problems[0], problems[1:]
    return ConfigError(field, problem, hint, tuple(rest))


def _describe(err: Any, secret_paths: set[str]) -> tuple[str, str, str]:
    """(key path, problem, hint) for one pydantic error, never showing a secret value."""
    loc: tuple[str | int, ...] = tuple(err["loc"])
    kind, ctx = err["type"], err.get("ctx") or {}
    reason = ctx.get("error")
    if isinstance(reason, KeyProblem):
        return key_path((*loc, reason.key)), reason.problem, reason.hint
    path = key_path(loc) or "config"
    hidden = path in secret_paths or _is_secret(loc)
    shown = "<hidden>" if hidden else repr(err.get("input"))
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        problem = "unknown key" + (f"; did you mean {close[0]!r}?" if close else "")
        return path, problem, f"allowed keys: {', '.join(allowed)}"
    if kind == "literal_error":
        return path, f"{shown} is not allowed", f"allowed values: {ctx.get('expected')}"
    if kind == "missing":
        return path, "is required", ""
    if kind == "value_error":  # our validators' messages already say what was wrong
        return path, str(err["msg"]).removeprefix("Value error, "), ""
    return path, f"{err['msg']} (got {shown})", ""


def _flatten(value: Any, prefix: str) -> Any:
    """(dotted key, printable value) for every leaf of a section; secrets masked."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _flatten(getattr(value, name), f"{prefix}.{name}" if prefix else name)
    elif isinstance(value, list) and value and isinstance(value[0], BaseModel):
        for i, item in enumerate(value):
            yield from _flatten(item, f"{prefix}[{i}]")
    elif isinstance(value, SecretStr):
        yield prefix, MASK
    elif isinstance(value, list):
        yield prefix, ", ".join(map(str, value)) or "[]"
    elif value is None:
        yield prefix, "null"
    elif isinstance(value, bool):
        yield prefix, str(value).lower()
    else:
        yield prefix, str(value)
