"""Facts extracted from conversations: the store's side (marks, leases, versioned writes).

Facts are memories of type ``fact`` in the index table; what this module adds is the
bookkeeping that lets any process extract them once:

* ``tiermem_fact_marks``: per (user, session), the last transcript ``seq`` whose
  messages have been turned into facts (the high-water mark), with the error and the
  time of the next try after a failed extraction;
* ``tiermem_fact_leases``: per user, which process is extracting that user's facts and
  until when. One extraction per user at a time means two processes never compare a
  new fact against the same old facts at once (so they cannot both add it).

:class:`FactsDueOp` leases a user and returns a session's new messages;
:class:`SaveFactsOp` writes the new facts, closes the versions they supersede, merges
repeated facts and advances the mark in one transaction, only if the lease is still
held, so a process that dies or loses its lease writes nothing and the next one redoes
the batch. The metadata keys of a fact are listed in :data:`FACT_KEYS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tiermem.stores.schema import Migration, created

if TYPE_CHECKING:
    from tiermem.stores.records import NewMemory
    from tiermem.types.transcript import TranscriptRow

MARKS = "tiermem_fact_marks"
LEASES = "tiermem_fact_leases"

FACT_KEYS = (
    "claim",  # the fact's text folded (case, punctuation): repeated facts share it
    "sources",  # message ids the fact was read from
    "evidence",  # those messages' lines (shortened), for Context.explain
    "valid_from",  # ISO time of the newest source message
    "valid_until",  # ISO time the next version started; None while current
    "replaces",  # id of the version it closed ("update" or "supersede")
    "superseded_by",  # id of the version that closed it
    "change",  # "update" (a fuller statement) or "supersede" (no longer true)
    "extractor",  # "offline" or the chat model's id
)


@dataclass(frozen=True)
class FactsDue:
    """A leased batch: the session's mark and the messages after it (oldest first)."""

    upto: int
    rows: list[TranscriptRow]


@dataclass(frozen=True)
class FactMark:
    """A session's extraction state: the mark, failed tries in a row, the last error."""

    upto: int
    attempts: int
    error: str | None
    retry_at: float


class FactWrite(NamedTuple):
    """One decided fact to write.

    ``memory`` is the new version (``None`` when the fact is only merged); ``replaces``
    the id of the version it closes; ``merge_into`` the id of a known fact that already
    says it (its sources are extended).
    """

    memory: NewMemory | None
    replaces: str | None = None
    change: str | None = None
    merge_into: str | None = None
    sources: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()


# -- operations ----------------------------------------------------------------------


class DueSessionsOp(NamedTuple):
    """Admin: up to ``limit`` (user, session) pairs with at least ``batch`` messages after
    their mark, whose user is not leased and whose retry time has come."""

    batch: int
    limit: int


class FactsDueOp(NamedTuple):
    """Lease ``user_id`` to ``owner`` and return up to ``limit`` messages of the session
    after its mark, if at least ``batch`` are waiting (``None``: nothing due, the user is
    leased by a live process, or a failed batch waits for its retry time)."""

    owner: str
    user_id: str
    session_id: str | None
    batch: int
    limit: int
    lease: float
    force: bool = False
    """Ignore the retry time (an explicit request)."""


class SaveFactsOp(NamedTuple):
    """Apply ``writes``, advance the session's mark from ``previous`` to ``upto`` and free
    the lease, if ``owner`` still holds it; result: the ids written (new versions and
    merged facts, in order), or ``None`` when the lease was lost (nothing written)."""

    owner: str
    user_id: str
    session_id: str | None
    previous: int
    upto: int
    writes: tuple[FactWrite, ...]


class FactsFailOp(NamedTuple):
    """An extraction failed: keep the mark, record ``error``, retry after ``retry_in``
    seconds and free the lease (if ``owner`` holds it)."""

    owner: str
    user_id: str
    session_id: str | None
    error: str
    retry_in: float


class FactMarkOp(NamedTuple):
    """A session's :class:`FactMark` (mark 0 when it has none)."""

    user_id: str
    session_id: str | None


class FactVersionsOp(NamedTuple):
    """Every version of the fact ``memory_id`` belongs to, oldest first (no access is
    counted)."""

    user_id: str
    memory_id: str


def migrations() -> dict[str, list[Migration]]:
    """The schema history of the marks and leases tables (same SQL on both engines);
    append, never edit. As for the transcript's, each first step creates its table if it
    is missing (older databases hold it already)."""
    return {
        MARKS: [
            Migration(
                "001_create",
                created(
                    "user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
                    " upto BIGINT NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0,"
                    " error TEXT, retry_at DOUBLE PRECISION NOT NULL DEFAULT 0,"
                    " updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (user_id, session_id)"
                ),
            )
        ],
        LEASES: [
            Migration(
                "001_create",
                created(
                    "user_id TEXT NOT NULL PRIMARY KEY, lease_owner TEXT,"
                    " lease_until DOUBLE PRECISION NOT NULL DEFAULT 0"
                ),
            )
        ],
    }


def current(metadata: Any) -> bool:
    """Whether a fact's metadata says it is the current version."""
    return not (isinstance(metadata, dict) and metadata.get("valid_until"))
