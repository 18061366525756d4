"""One user's data as a versioned JSON Lines archive (docs/export.md): writing and reading.

:func:`archive_lines` writes the lines of an archive from a store; :func:`read_archive`
checks a whole archive (every line, before anything is written) and returns what a
restore writes, or raises an :class:`~tiermem.errors.InputError` naming the line that is
wrong. ``Memory.export`` and ``Memory.import_archive`` join them to a store and an embedder.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np

from tiermem._version import __version__
from tiermem.errors import InputError, TiermemError
from tiermem.messages import Message
from tiermem.stores.facts import FactMarkOp
from tiermem.stores.ops import ScanOp
from tiermem.stores.transcript import WORK_STATES, RestoredRow, SessionsOp, SummaryOp
from tiermem.stores.validate import MAX_STORED_CHARS, message_entry
from tiermem.types.checks import (
    check_content,
    check_importance,
    check_limit,
    check_memory_type,
    check_metadata,
    check_text_id,
    check_timestamp,
    check_user_id,
)
from tiermem.types.records import MemoryRecord
from tiermem.types.transcript import TranscriptRow

FORMAT = "tiermem-archive"
VERSION = 1
PAGE = 1000
KINDS = ("header", "message", "summary", "fact_mark", "memory", "end")


def _time(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat()


def _importance(value: float) -> float:
    """Six significant digits: what every engine keeps (PostgreSQL stores a float4)."""
    return float(f"{value:.6g}")


def archive_lines(
    store: Any,
    user_id: str,
    *,
    model: str,
    dimension: int,
    include_vectors: bool = False,
) -> Iterator[dict[str, Any]]:
    """The archive of ``user_id`` in ``store``, line by line (page by page from the store)."""
    yield header_line(user_id, model, dimension, include_vectors)
    counts = dict.fromkeys(KINDS[1:-1], 0)
    ids: dict[tuple[str | None, int], str] = {}  # (session, seq) -> message id
    after = 0
    while True:
        rows = store.transcript.rows(user_id, after=after, limit=PAGE)
        for row in rows:
            ids[(row.session_id, row.seq)] = row.message.message_id
            counts["message"] += 1
            yield message_line(row)
        if len(rows) < PAGE:
            break
        after = rows[-1].seq
    for line in session_lines(store, user_id, ids):
        counts[line["kind"]] += 1
        yield line
    last = None
    while True:
        page = store.batch([ScanOp(last, PAGE, user_id)])[0]
        for record in page:
            counts["memory"] += 1
            yield memory_line(record, include_vectors)
        if len(page) < PAGE:
            break
        last = page[-1].id
    yield {"kind": "end", "counts": counts}


def header_line(user_id: str, model: str, dimension: int, include_vectors: bool) -> dict[str, Any]:
    """The first line of an archive: what it is, whose, and the model of its vectors."""
    return {
        "kind": "header",
        "format": FORMAT,
        "version": VERSION,
        "tiermem": __version__,
        "user_id": user_id,
        "embedding": {"model": model, "dimension": dimension},
        "vectors": include_vectors,
        "created_at": _time(datetime.now(timezone.utc)),
    }


def message_line(row: TranscriptRow) -> dict[str, Any]:
    """The archive line of one transcript row."""
    return {
        "kind": "message",
        "session_id": row.session_id,
        "agent_id": row.agent_id,
        "previous_id": row.previous_id,
        "state": row.state,
        "attempts": row.attempts,
        "error": row.error,
        "message": row.message.to_dict(),
    }


def session_lines(
    store: Any, user_id: str, ids: Mapping[tuple[str | None, int], str]
) -> Iterator[dict[str, Any]]:
    """The ``summary`` and ``fact_mark`` lines of the user's sessions; ``ids`` maps each
    transcript row's (session, seq) to its message id."""
    for session in sorted(store.batch([SessionsOp(user_id)])[0], key=_session_order):
        sid = session.session_id
        summary, mark = store.batch([SummaryOp(user_id, sid), FactMarkOp(user_id, sid)])
        for kind, upto, extra in (
            ("summary", summary.upto, {"text": summary.text}),
            ("fact_mark", mark.upto, {}),
        ):
            covered = _covered(ids, sid, upto)
            if covered is None or (kind == "summary" and not summary.text):
                continue
            yield {"kind": kind, "session_id": sid, **extra, "upto_message_id": covered}


def _session_order(session: Any) -> str:
    return "" if session.session_id is None else "\x01" + session.session_id


def _covered(ids: Mapping[tuple[str | None, int], str], session: str | None, upto: int) -> Any:
    """The id of the session's last message at or before ``upto`` (None: none)."""
    best = max((seq for (sid, seq) in ids if sid == session and seq <= upto), default=None)
    return None if best is None else ids[(session, best)]


def memory_line(record: MemoryRecord, include_vectors: bool) -> dict[str, Any]:
    """The archive line of one memory (with its vector when ``include_vectors``)."""
    line = {
        "kind": "memory",
        "id": str(record.id),
        "memory_type": record.memory_type,
        "content": record.content,
        "agent_id": record.agent_id,
        "session_id": record.session_id,
        "importance": _importance(record.importance),
        "metadata": record.metadata,
        "created_at": _time(record.created_at),
        "accessed_at": _time(record.accessed_at),
        "access_count": record.access_count,
    }
    if include_vectors and record.embedding is not None:
        vector = np.asarray(record.embedding, dtype="<f4")
        line["embedding"] = base64.b64encode(vector.tobytes()).decode("ascii")
    return line


def dumps(line: Mapping[str, Any]) -> str:
    """One archive line as JSON text (keys sorted: the same data, the same bytes)."""
    return json.dumps(line, ensure_ascii=False, sort_keys=True, allow_nan=False)


# -- reading -------------------------------------------------------------------------


@dataclass
class Restore:
    """What an archive restores: its header, transcript rows, summaries, fact marks, and
    memories (with their vectors, when the archive has them)."""

    header: dict[str, Any]
    user_id: str
    rows: list[RestoredRow] = field(default_factory=list)
    summaries: list[tuple[str | None, str, str]] = field(default_factory=list)
    marks: list[tuple[str | None, str]] = field(default_factory=list)
    records: list[MemoryRecord] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)

    def ops(self, embedder: Any, dimension: int) -> list[Any]:
        """The writes of the restore, for one transaction: the memories (embedded again
        when the archive has no vectors or another model's) and the transcript.

        ``embedder`` None: the archive's vectors are the store's (a copy between stores);
        every memory must carry one.
        """
        from tiermem.stores.ops import ImportOp
        from tiermem.stores.transcript import RestoreOp
        from tiermem.stores.validate import check_vector

        same = embedder is None or (
            self.header["embedding"]["model"] == embedder.model_id
            and self.header["embedding"]["dimension"] == embedder.dimension
        )
        missing = [i for i, v in enumerate(self.vectors) if v is None or not same]
        if missing and embedder is None:
            raise InputError(f"memories[{missing[0]}].embedding", "is missing")
        vectors = list(self.vectors)
        for start in range(0, len(missing), 256):
            part = missing[start : start + 256]
            # a long message's index line: what the embedder takes of it (it reads less)
            most = getattr(embedder, "max_chars", MAX_STORED_CHARS)
            found = embedder.embed([self.records[i].content[:most] for i in part])
            for i, vector in zip(part, found, strict=True):
                vectors[i] = vector
        records = tuple(
            replace(r, embedding=check_vector(v, dimension, f"memories[{i}]"))
            for i, (r, v) in enumerate(zip(self.records, vectors, strict=True))
        )
        rows = RestoreOp(self.user_id, tuple(self.rows), tuple(self.summaries), tuple(self.marks))
        return [ImportOp(records), rows]


def read_archive(
    lines: Iterable[str | bytes | Mapping[str, Any]], user_id: str | None = None
) -> Restore:
    """Check every line of an archive and return what it restores as ``user_id`` (None:
    the archive's own user, :attr:`Restore.user_id`).

    Raises:
        InputError: naming ``line N`` and the field that is wrong: not JSON, not a
            tiermem archive or of a newer version, a value the store would refuse, a
            line after the end or no end line (a truncated archive).
    """
    restore: Restore | None = None
    ended = False
    number = 0
    for number, raw in enumerate(lines, 1):
        where = f"line {number}"
        if ended:
            raise InputError(where, "follows the end line", "the archive was concatenated")
        data = _parse(raw, where)
        kind = data.get("kind")
        if restore is None:
            header = _header(data, where)
            restore = Restore(header, user_id or header["user_id"])
            continue
        try:
            if kind == "message":
                restore.rows.append(_row(data, restore.user_id, restore.header["user_id"]))
            elif kind in ("summary", "fact_mark"):
                session = check_text_id(data.get("session_id"), "session_id")
                upto = check_text_id(data.get("upto_message_id"), "upto_message_id")
                if upto is None:
                    raise InputError("upto_message_id", "is required")
                if kind == "summary":
                    restore.summaries.append(
                        (session, check_content(data.get("text"), "text"), upto)
                    )
                else:
                    restore.marks.append((session, upto))
            elif kind == "memory":
                record, vector = _record(data, restore.user_id, restore.header)
                restore.records.append(record)
                restore.vectors.append(vector)
            elif kind == "end":
                ended = True
            else:
                raise InputError("kind", f"{kind!r} is not a line of a tiermem archive")
        except TiermemError as exc:
            raise _at(where, exc) from None
    if restore is None:
        raise InputError("archive", "is empty", "pass the lines Memory.export wrote")
    if not ended:
        raise InputError(
            f"line {number + 1}", "is missing: the archive has no end line (truncated?)"
        )
    return restore


def _parse(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(where, "is not UTF-8") from None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise InputError(where, f"is not JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise InputError(where, f"must be a JSON object, got {type(raw).__name__}")
    return dict(raw)


def _header(data: dict[str, Any], where: str) -> dict[str, Any]:
    if data.get("kind") != "header" or data.get("format") != FORMAT:
        raise InputError(where, f"is not a {FORMAT} header", "pass what Memory.export wrote")
    version = data.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        raise InputError(
            f"{where}.version", f"{version!r} is not a version this tiermem reads (1..{VERSION})"
        )
    try:
        check_user_id(data.get("user_id"))
        embedding = data.get("embedding")
        if not isinstance(embedding, Mapping) or not isinstance(embedding.get("model"), str):
            raise InputError("embedding", "must be {model, dimension}")
        check_limit(embedding.get("dimension"), "embedding.dimension")
    except TiermemError as exc:
        raise _at(where, exc) from None
    return data


def _at(where: str, exc: TiermemError) -> InputError:
    """``exc`` as an InputError whose field leads with the line: ``line 7.content``."""
    if isinstance(exc, InputError):
        return InputError(f"{where}.{exc.field}", exc.problem, exc.hint)
    return InputError(where, str(exc))


def _row(data: dict[str, Any], user_id: str, archived: str) -> RestoredRow:
    raw = data.get("message")
    if not isinstance(raw, Mapping):
        raise InputError("message", "must be an object")
    message = _message(raw)
    metadata = dict(message.metadata)
    if metadata.get("user_id") == archived:  # the stored copy names its new owner
        metadata["user_id"] = user_id
        message = Message.from_dict({**message.to_dict(), "metadata": metadata})
    state = data.get("state", "pending")
    if state not in WORK_STATES:
        raise InputError("state", f"{state!r} is not a work state", f"use one of {WORK_STATES}")
    attempts = data.get("attempts", 0)
    if type(attempts) is not int or attempts < 0:
        raise InputError("attempts", f"{attempts!r} is not a count")
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        raise InputError("error", "must be a string or null")
    entry = message_entry(  # what a store held, whatever its memory.max_message_chars
        message,
        check_text_id(data.get("previous_id"), "previous_id"),
        check_text_id(data.get("agent_id"), "agent_id"),
        max_chars=MAX_STORED_CHARS,
    )
    return RestoredRow(
        entry, check_text_id(data.get("session_id"), "session_id"), state, attempts, error
    )


def _message(raw: Mapping[str, Any]) -> Message:
    try:
        return Message.from_dict(dict(raw))
    except InputError as exc:
        raise InputError(f"message.{exc.field}", exc.problem, exc.hint) from None
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError("message", f"is not a message: {exc}") from None


def _record(
    data: dict[str, Any], user_id: str, header: Mapping[str, Any]
) -> tuple[MemoryRecord, np.ndarray | None]:
    from tiermem.embeddings.cache import content_hash
    from tiermem.types.checks import check_uuid

    content = check_content(data.get("content"), max_chars=MAX_STORED_CHARS)  # a long line
    metadata = check_metadata(data.get("metadata"))
    if metadata.get("user_id") == header["user_id"]:  # a message's copy names its new owner
        metadata["user_id"] = user_id
    memory_id = check_uuid(data.get("id"), "id")
    if user_id != header["user_id"]:  # a copy beside the original: ids of its own
        memory_id = _moved(memory_id, user_id)
        for link in FACT_LINKS:
            if isinstance(metadata.get(link), str):
                metadata[link] = str(_moved(check_uuid(metadata[link], link), user_id))
    count = data.get("access_count", 0)
    if type(count) is not int or count < 0:
        raise InputError("access_count", f"{count!r} is not a count")
    record = MemoryRecord(
        id=memory_id,
        user_id=user_id,
        content=content,
        memory_type=check_memory_type(data.get("memory_type")),  # type: ignore[arg-type]
        agent_id=check_text_id(data.get("agent_id"), "agent_id"),
        session_id=check_text_id(data.get("session_id"), "session_id"),
        importance=check_importance(data.get("importance")),
        metadata=metadata,
        created_at=_stamp(data.get("created_at"), "created_at"),
        accessed_at=_stamp(data.get("accessed_at"), "accessed_at"),
        access_count=count,
        content_hash=content_hash(content),
    )
    vector = None
    encoded = data.get("embedding")
    if encoded is not None:
        try:
            vector = np.frombuffer(base64.b64decode(encoded, validate=True), dtype="<f4")
        except (TypeError, ValueError):
            raise InputError("embedding", "is not base64 of float32 values") from None
        dimension = header["embedding"]["dimension"]
        if vector.shape != (dimension,) or not np.all(np.isfinite(vector)):
            raise InputError("embedding", f"is not {dimension} finite float32 values")
    return record, vector


FACT_LINKS = ("replaces", "superseded_by")
"""Metadata keys of a fact version that hold another version's id."""


def _moved(memory_id: uuid.UUID, user_id: str) -> uuid.UUID:
    """The id of a memory imported as another user: derived from the original id and the
    new owner, so the copy never collides with the original and importing it twice adds
    nothing."""
    return uuid.uuid5(memory_id, user_id)


def _stamp(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise InputError(name, "must be an ISO 8601 time")
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(name, f"{value!r} is not an ISO 8601 time") from None
    return check_timestamp(stamp, name)


__all__ = [
    "FORMAT",
    "KINDS",
    "VERSION",
    "Restore",
    "archive_lines",
    "dumps",
    "header_line",
    "memory_line",
    "message_line",
    "read_archive",
    "session_lines",
]
