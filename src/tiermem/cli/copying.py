"""Copy a whole store into another: SQLite to PostgreSQL, and back (``tiermem copy``).

What moves: every user's memories with their vectors (facts with every version), the
transcript (each message, in order, with its work state), the sessions' summaries and
fact marks, then the server's API keys and tenant users. Memory ids and message ids are
kept. A user moves page by page as the lines of their archive (docs/export.md: the same
writer, the same checks, the same idempotent restore), memories first so each indexed
message finds its index row.

Resuming: the destination keeps where the copy stands (:mod:`tiermem.stores.copies`),
written in the transaction of the page it accounts for; every write also skips what is
there (ids, message ids, sessions). A copy killed or cut off at any point and run again
continues from its last page and doubles nothing.

Verifying: per user, the counts and a SHA-256 of the user's archive lines (vectors
included, the header left out, since it holds the time it was written) read back from
both stores; the keys by their rows.
"""

from __future__ import annotations

import hashlib
import urllib.parse
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tiermem.errors import DimensionMismatchError, InputError, StoreError
from tiermem.memory.export import (
    KINDS,
    archive_lines,
    dumps,
    header_line,
    memory_line,
    message_line,
    read_archive,
    session_lines,
)
from tiermem.stores.copies import CopyStateOp, SaveCopyStateOp
from tiermem.stores.migrate import index_dimensions, is_postgres, list_tables, open_store
from tiermem.stores.ops import ScanOp, TableSizeOp
from tiermem.stores.protocol import MemoryStore
from tiermem.stores.queue import WorkStatsOp
from tiermem.types.checks import check_limit

Progress = Callable[[int, int, str], None]
"""Called after each page: rows copied so far, rows in the source, the user at hand."""

KEY_TABLES = ("tiermem_api_keys", "tiermem_tenant_users")
MODEL = "tiermem-copy"
"""The model named in the pages' archive headers (the vectors are the source's)."""
COUNTED = KINDS[1:-1]


@dataclass(frozen=True)
class UserCheck:
    """One user read back from both stores: counts by kind and the archive's hash.

    ``contained``: every line of the source's archive is in the destination's (what a
    copy into a store that held the user already can promise).
    """

    user_id: str
    source: dict[str, int]
    destination: dict[str, int]
    source_hash: str
    destination_hash: str
    contained: bool

    @property
    def same(self) -> bool:
        return self.source_hash == self.destination_hash


@dataclass(frozen=True)
class CopyReport:
    """What a copy did and what the verification found."""

    source: str
    destination: str
    dimension: int
    resumed: bool
    merge: bool
    sent: dict[str, int]
    """Lines read from the source and written by this run, by kind (a rerun sends again
    what an interrupted run's last page held)."""
    added: dict[str, int]
    """Messages and memories this run added (the rest were in the destination already)."""
    users: list[UserCheck] = field(default_factory=list)
    keys: tuple[int, int] = (0, 0)
    """Rows of the key tables in the source, and of those, rows found in the destination."""

    @property
    def mismatches(self) -> list[UserCheck]:
        return [u for u in self.users if not (u.same or (self.merge and u.contained))]

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.keys[0] == self.keys[1]


def copy_store(
    source: str,
    destination: str,
    *,
    dimension: int | None = None,
    merge: bool = False,
    batch_size: int = 500,
    progress: Progress | None = None,
    partitions: int | None = None,
) -> CopyReport:
    """Copy everything of the store ``source`` into ``destination`` and verify it.

    Args:
        source: a SQLite file path or a ``postgresql://`` URL.
        destination: the same; a SQLite file is created (its folder must exist).
        dimension: which ``memories_{dim}`` table to copy, when the source has several.
        merge: copy into a destination that holds other data (users on both sides get
            the union: what is there stays, what is new is added).
        batch_size: rows read and written per transaction.
        progress: called after each page (see :data:`Progress`).
        partitions: a PostgreSQL destination's layout when the copy creates its tables
            (unset: an existing store's, else the default, 16 partitions by user; an
            existing store of another count is refused, :class:`PartitionsMismatchError`).

    Raises:
        InputError: a missing or non-tiermem source, the same store twice, a bad batch
            size, a destination of other data without ``merge``.
        DimensionMismatchError: the destination holds vectors of another dimension (the
            message says how to re-embed).
        StoreUnavailableError: a store went away; the message names the user and the row
            the copy reached. Run it again to resume.
    """
    for name, value in (("source", source), ("destination", destination)):
        if not isinstance(value, str) or not value.strip():
            raise InputError(name, "is required", "give a SQLite file path or a postgresql:// URL")
    check_limit(batch_size, "batch_size")
    label, target = location_label(source), location_label(destination)
    if label == target:
        raise InputError("destination", "is the source", "copy into another database")
    tables = list_tables(source)
    if tables is None:
        raise InputError("source", f"{source} does not exist", "give the path of the store")
    dim = _dimension(source, tables, dimension)
    _check_destination(destination, dim, source)
    src = open_store(source, dim)
    try:
        dst = open_store(destination, dim, partitions=partitions)
        try:
            run = _Copy(src, dst, label, dim, batch_size, progress)
            resumed = run.start(merge, destination)
            run.users()
            keys = _copy_keys(source, destination) if set(KEY_TABLES) & tables else (0, 0)
            run.finish()
            return CopyReport(
                source=label,
                destination=target,
                dimension=dim,
                resumed=resumed,
                merge=merge,
                sent=run.sent,
                added=run.added,
                users=verify(src, dst, dim),
                keys=keys,
            )
        finally:
            dst.close()
    finally:
        src.close()


def location_label(location: str) -> str:
    """A store's location as the copy state names it: a URL without its password, or a
    SQLite file's absolute path."""
    if is_postgres(location):
        parts = urllib.parse.urlsplit(location)
        netloc = parts.netloc.rpartition("@")
        user = netloc[0].partition(":")[0]
        host = f"{user}@{netloc[2]}" if netloc[1] else netloc[2]
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, ""))
    return str(Path(location.removeprefix("sqlite:///")).expanduser().resolve())


def _dimension(source: str, tables: set[str], wanted: int | None) -> int:
    dims = index_dimensions(tables)
    if not dims or "tiermem_transcript" not in tables:
        raise InputError("source", f"{source} is not a tiermem store (no memories_N table)")
    if wanted is not None:
        if check_limit(wanted, "dimension") not in dims:
            raise InputError("dimension", f"the source has no memories_{wanted} table", f"{dims}")
        return wanted
    if len(dims) > 1:
        raise InputError(
            "dimension",
            f"the source has memories tables of {len(dims)} dimensions ({dims})",
            "pass the one to copy: --dimension N",
        )
    return dims[0]


def _check_destination(destination: str, dim: int, source: str) -> None:
    """Refuse a destination of another embedding dimension before anything is written."""
    if not is_postgres(destination):
        from tiermem.paths import sqlite_file

        sqlite_file(destination.removeprefix("sqlite:///"), "destination")
    theirs = index_dimensions(list_tables(destination) or set())
    if theirs and dim not in theirs:
        raise DimensionMismatchError(
            "destination",
            f"holds vectors of {theirs[0]} dimensions (memories_{theirs[0]}), the source of {dim}",
            f"re-embed the source first: tiermem migrate-embeddings --from-dim {dim} "
            f"--to-dim {theirs[0]} --to-model MODEL --connection-string {source}; then "
            f"copy with --dimension {theirs[0]}",
        )


class _Copy:
    """One run of a copy: the state kept in the destination, and the pages written."""

    def __init__(
        self,
        src: MemoryStore,
        dst: MemoryStore,
        label: str,
        dim: int,
        batch: int,
        progress: Progress | None,
    ) -> None:
        self.src, self.dst, self.label, self.dim, self.batch = src, dst, label, dim, batch
        self.progress = progress
        self.sent = dict.fromkeys(COUNTED, 0)
        self.added = {"message": 0, "memory": 0}
        self.state: dict[str, Any] = {}
        work = src.batch([WorkStatsOp(None), TableSizeOp()])
        self.total = work[0].pending + work[0].done + work[0].failed + int(work[1])
        self.done = 0

    def start(self, merge: bool, destination: str) -> bool:
        """Load or begin the state; refuse a destination of other data unless ``merge``.
        Whether this run resumes an unfinished copy."""
        with self._reading("destination"):
            state, held = self.dst.batch([CopyStateOp(self.label), CopyStateOp(None)])
            users = self.dst.transcript.users(limit=1)
        if state is None and not merge and (users or held is not None or _has_keys(destination)):
            what = f"user {users[0]!r}" if users else "a copy of another store or API keys"
            raise InputError(
                "destination",
                f"{destination} is not empty (it holds {what})",
                "copy into an empty store, or pass --merge to add to what it holds",
            )
        resumed = state is not None and not state.get("finished")
        if not resumed:
            state = {"after_user": "", "user": None, "phase": None, "cursor": None, "rows": 0}
        self.state = cast(dict[str, Any], state)
        self.done = int(self.state["rows"]) if resumed else 0
        return resumed

    def users(self) -> None:
        after = str(self.state["after_user"])
        while True:
            with self._reading("source"):
                users = self.src.transcript.users(100, after)
            if not users:
                return
            for user in users:
                self._user(user)
            after = users[-1]

    def finish(self) -> None:
        self.state = {**self.state, "finished": True}
        self._write("", [], "the end", "-")

    def _user(self, user: str) -> None:
        """Copy one user: memories, messages, then the sessions' summaries and marks."""
        s = self.state
        if s["user"] != user:
            s.update(user=user, phase="memories", cursor=None)
        while s["phase"] == "memories":
            after = None if s["cursor"] is None else uuid.UUID(s["cursor"])
            with self._reading("source"):
                page = self.src.batch([ScanOp(after, self.batch, user)])[0]
            if page:
                s["cursor"] = str(page[-1].id)
            if len(page) < self.batch:
                s.update(phase="messages", cursor=0)
            lines = [memory_line(r, True) for r in page]
            self._write(user, lines, "memory", f"memory {after or '(first)'}")
        while s["phase"] == "messages":
            after_seq = int(s["cursor"])
            with self._reading("source"):
                rows = self.src.transcript.rows(user, after=after_seq, limit=self.batch)
            if rows:
                s["cursor"] = rows[-1].seq
            if len(rows) < self.batch:
                s.update(phase="sessions", cursor=None)
            lines = [message_line(r) for r in rows]
            self._write(user, lines, "message", f"transcript seq {after_seq} of the source")
        ids: dict[tuple[str | None, int], str] = {}
        after_seq = 0
        with self._reading("source"):
            while page := self.src.transcript.rows(user, after=after_seq, limit=1000):
                ids.update(((r.session_id, r.seq), r.message.message_id) for r in page)
                after_seq = page[-1].seq
            lines = list(session_lines(self.src, user, ids))
        s.update(after_user=user, user=None, phase=None, cursor=None)
        self._write(user, lines, "session", "its sessions' summaries and fact marks")

    @contextmanager
    def _reading(self, side: str) -> Iterator[None]:
        """A failed read names where the copy stood."""
        try:
            yield
        except StoreError as exc:
            raise type(exc)(
                f"copy stopped reading the {side} at {self._where()}: {exc}; "
                "run the same command again to resume"
            ) from exc

    def _where(self) -> str:
        s = self.state
        if s.get("user") is None:
            return f"the user after {s.get('after_user')!r}"
        return f"user {s['user']!r}, {s['phase']} after {s['cursor']!r}"

    def _write(self, user: str, lines: list[dict[str, Any]], kind: str, reached: str) -> None:
        """Write one page and the state after it in one transaction."""
        ops: list[Any] = []
        if lines:
            restore = read_archive([header_line(user, MODEL, self.dim, True), *lines, _END])
            ops = restore.ops(None, self.dim)
        counts = _count(lines)
        rows = counts["message"] + counts["memory"]
        self.state["rows"] = self.done + rows
        try:
            results = self.dst.batch([*ops, SaveCopyStateOp(self.label, self.state)])
        except StoreError as exc:
            raise type(exc)(
                f"copy stopped at user {user!r}, the page after {reached} "
                f"({self.done} of {self.total} rows copied): {exc}; "
                "run the same command again to resume"
            ) from exc
        if ops:
            self.added["memory"] += int(results[0])
            self.added["message"] += int(results[1])
        for kind, n in counts.items():
            self.sent[kind] += n
        self.done += rows
        if self.progress is not None and user:
            self.progress(self.done, self.total, user)


_END = {"kind": "end", "counts": {}}


def _count(lines: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(COUNTED, 0)
    for line in lines:
        counts[line["kind"]] += 1
    return counts


def _has_keys(location: str) -> bool:
    if not set(KEY_TABLES) & (list_tables(location) or set()):
        return False
    from tiermem.server.keys import KeyStore

    keys = KeyStore(location)
    try:
        return any(keys.rows().values())
    finally:
        keys.close()


def _copy_keys(source: str, destination: str) -> tuple[int, int]:
    """Copy the key tables; (rows in the source, of those found in the destination)."""
    from tiermem.server.keys import KeyStore

    src, dst = KeyStore(source), KeyStore(destination)
    try:
        rows = src.rows()
        try:
            dst.add_rows(rows)
            there = dst.rows()
        except StoreError as exc:
            raise type(exc)(
                f"copy stopped at the API keys: {exc}; run the same command again to resume"
            ) from exc
        total = sum(len(r) for r in rows.values())
        found = sum(len(set(map(tuple, there[t])) & set(map(tuple, r))) for t, r in rows.items())
        return total, found
    finally:
        src.close()
        dst.close()


def user_digest(
    store: MemoryStore, user_id: str, dimension: int
) -> tuple[dict[str, int], str, set[bytes]]:
    """A user's counts by kind, the SHA-256 of their archive lines (vectors included,
    header left out) and each line's digest."""
    whole = hashlib.sha256()
    lines: set[bytes] = set()
    counts: dict[str, int] = {}
    for line in archive_lines(
        store, user_id, model=MODEL, dimension=dimension, include_vectors=True
    ):
        if line["kind"] == "header":
            continue
        if line["kind"] == "end":
            counts = dict(line["counts"])
            continue
        data = dumps(line).encode()
        whole.update(data + b"\n")
        lines.add(hashlib.sha256(data).digest())
    return counts, whole.hexdigest(), lines


def verify(src: MemoryStore, dst: MemoryStore, dimension: int) -> list[UserCheck]:
    """Every user of ``src`` read back from both stores."""
    checks = []
    after = ""
    while users := src.transcript.users(100, after):
        for user in users:
            ours, theirs = user_digest(src, user, dimension), user_digest(dst, user, dimension)
            checks.append(
                UserCheck(user, ours[0], theirs[0], ours[1], theirs[1], ours[2] <= theirs[2])
            )
        after = users[-1]
    return checks


__all__ = ["CopyReport", "UserCheck", "copy_store", "location_label", "user_digest", "verify"]
