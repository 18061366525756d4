"""Typed errors raised by tiermem.

Every error a user can cause names the offending field and how to fix it, so a
caller can both catch a precise type and show a useful message. Errors about
bad input also subclass :class:`ValueError` or :class:`TypeError`, so code written
against the seeds' plain exceptions keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable


class TiermemError(Exception):
    """Base class of every error tiermem raises on purpose."""


class InputError(TiermemError, ValueError):
    """A value given to a public entry point is not acceptable.

    Attributes:
        field: the argument or key that was wrong (``"role"``, ``"metadata.user_id"``).
        hint: what to do instead.
    """

    def __init__(self, field: str, problem: str, hint: str = "") -> None:
        self.field = field
        self.problem = problem
        self.hint = hint
        super().__init__(_with_hint(field, problem, hint))

    def relabel(self, field: str) -> InputError:
        """The same error (same type, problem and hint) about ``field`` instead."""
        moved = InputError.__new__(type(self))
        InputError.__init__(moved, field, self.problem, self.hint)
        return moved


class InvalidTypeError(InputError, TypeError):
    """A value has the wrong Python type (metadata that is a str, content that is an int)."""


class InvalidRoleError(InputError):
    """A message role outside user, assistant, system, tool, agent_call, agent_response."""


class InvalidSizeError(InputError):
    """A size, window or budget that is zero, negative or otherwise out of range."""


class SerializationError(InputError):
    """JSON or dict data that is malformed, truncated or of an unknown shape."""


class ContentTooLargeError(InputError):
    """Content larger than the configured maximum."""


class MissingUserError(InputError):
    """An operation that must be scoped to a user was called without ``user_id``."""


class DimensionMismatchError(InputError):
    """A vector whose dimension differs from the index or table it is meant for."""


class AmbiguousIdError(InputError):
    """An id prefix that matches several memories: give more of the id."""


class ConfigError(InputError):
    """A configuration key with a missing, unknown or out-of-range value.

    Several problems found together are all in the message, each followed by its own
    hint; ``field``, ``problem`` and ``hint`` are the first one's, ``problems`` all
    ``(field, problem, hint)``.
    """

    def __init__(
        self,
        field: str,
        problem: str,
        hint: str = "",
        also: tuple[tuple[str, str, str], ...] = (),
    ) -> None:
        super().__init__(field, problem, hint)
        self.problems = ((field, problem, hint), *also)
        if also:
            text = "; also ".join(_with_hint(f, p, h) for f, p, h in self.problems)
            Exception.__init__(self, text)


class PartitionsMismatchError(ConfigError):
    """A PostgreSQL store opened with a ``memory.persistent.partitions`` other than the
    one its tables were created with (partitioned into another count, or not at all)."""


class MissingExtraError(ConfigError, ImportError):
    """A feature needs an optional extra that is not installed; the hint is the
    ``pip install 'tiermem[EXTRA]'`` that installs it (see :mod:`tiermem.extras`).

    Attributes:
        extra: the extra's name (``"server"``, ``"postgres"``...).
    """

    def __init__(self, field: str, problem: str, extra: str, module: str | None = None) -> None:
        super().__init__(field, problem, f"pip install 'tiermem[{extra}]'")
        self.extra = extra
        self.name = module


def _with_hint(field: str, problem: str, hint: str) -> str:
    return f"{field}: {problem}" + (f" ({hint})" if hint else "")


class NotFoundError(TiermemError, KeyError):
    """A memory, message or user that does not exist (or belongs to another user)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class MessageNotFoundError(NotFoundError):
    """No message of the user has this id (another user's message is not found either)."""


class ProviderError(TiermemError):
    """An LLM or embedding provider failed; the work that needed it is kept for retry."""


class ProviderUnavailableError(ProviderError):
    """The provider cannot serve now, whatever the input: unreachable, too slow, rate
    limited or failing (5xx). Background work waits for it with backoff; no row is at fault."""


class ProviderTimeoutError(ProviderUnavailableError, TimeoutError):
    """The provider did not answer within the configured timeout."""


class RateLimitError(ProviderUnavailableError):
    """The provider answered 429 and retries were exhausted."""


class AuthenticationError(ProviderError):
    """The provider rejected the credentials, or none were configured."""


class ProviderResponseError(ProviderError):
    """The provider answered with an error status or a body tiermem cannot read."""


class ProviderServerError(ProviderUnavailableError, ProviderResponseError):
    """The provider answered a server error (5xx, 408, 409, 425) and retries were exhausted."""


class MalformedAnswerError(ProviderResponseError):
    """The model answered, but not in the shape asked for (e.g. no JSON where JSON was
    required); the caller falls back (fact extraction: the offline extractor)."""


class ModelLoadError(TiermemError):
    """A local model could not be loaded; the message says how to provide it."""


class ClosedError(TiermemError, RuntimeError):
    """A call on a :class:`~tiermem.Memory` (or another resource) after ``close()``."""


class StoreError(TiermemError):
    """A long-term store operation failed; its transaction was rolled back."""


class StoreUnavailableError(StoreError, ConnectionError):
    """The database cannot be reached (down, refused, or lost mid-operation)."""


class MissingExtensionError(StoreUnavailableError):
    """The PostgreSQL server lacks the ``vector`` extension (pgvector); the message says
    how to install it (docs/postgres.md)."""


class CacheError(TiermemError):
    """The synopsis or shared cache backend failed."""


def shown(value: int) -> str:
    """An int as an error shows it: whole while short, else its size (Python refuses to
    print an int of over 4,300 digits, and nobody reads one of 400)."""
    if -(10**18) < value < 10**18:
        return str(value)
    digits = int(value.bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}an int of about {digits} digits"


def refuse_unknown(
    given: Iterable[str],
    known: Iterable[str],
    where: str,
    what: str,
    kind: type[InputError] = InvalidTypeError,
) -> None:
    """Raise ``kind`` naming the first of ``given`` not in ``known`` (a typo in a name
    would otherwise be dropped without a word): ``where.name is not <what>``."""
    names = sorted(known)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise kind(
            f"{where}.{unknown[0]}" if where else unknown[0],
            f"is not {what}",
            f"use one of {', '.join(names)}",
        )
