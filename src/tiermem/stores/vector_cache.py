"""Per-user in-process vector matrices kept in sync with a SQLite table.

SQLiteStore keeps every vector in the database file (the source of truth) and
searches a per-user float32 matrix in memory with one matrix-vector product: exact
(recall 1.0) and 5-10x faster than sqlite-vec for a 50k-row user (docs/stores.md).

Each user has a row ``(vseq, epoch)`` in the store's users table, written in the same
transaction as the vectors: ``vseq`` grows on every insert or re-embedding (the changed
rows carry it), ``epoch`` grows on every delete. A cached matrix that saw an older
``vseq`` fetches just the newer rows; one that saw another ``epoch`` reloads. So
several processes writing one file never leave a reader with stale vectors.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import ThreadpoolController

# One BLAS thread per product: a matrix-vector product is memory-bound, and waking
# BLAS threads on a busy machine costs more (p95 8 ms for a 1.5k x 384 product on two
# loaded cores) than it saves (2.9 ms single-threaded for 50k x 384).
_BLAS = ThreadpoolController()


@dataclass
class UserVectors:
    """A user's vectors: ``seqs[i]`` (ascending row ids) owns ``matrix[i]``."""

    seqs: np.ndarray
    matrix: np.ndarray
    size: int
    vseq: int
    epoch: int

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.seqs.nbytes)

    def apply(self, rows: Iterable[tuple[int, bytes]], vseq: int) -> None:
        """Insert or replace rows given in ascending ``seq`` order."""
        for seq, blob in rows:
            vec = np.frombuffer(blob, dtype=np.float32)
            pos = int(np.searchsorted(self.seqs[: self.size], seq))
            if pos < self.size and self.seqs[pos] == seq:
                self.matrix[pos] = vec
                continue
            if pos != self.size:  # rows only ever append: seq is AUTOINCREMENT
                raise RuntimeError("vector cache out of order")
            self._grow(self.size + 1)
            self.seqs[self.size] = seq
            self.matrix[self.size] = vec
            self.size += 1
        self.vseq = vseq

    def _grow(self, needed: int) -> None:
        if needed <= len(self.seqs):
            return
        capacity = max(needed, 2 * len(self.seqs), 16)
        seqs = np.zeros(capacity, dtype=np.int64)
        matrix = np.zeros((capacity, self.matrix.shape[1]), dtype=np.float32)
        seqs[: self.size] = self.seqs[: self.size]
        matrix[: self.size] = self.matrix[: self.size]
        self.seqs, self.matrix = seqs, matrix

    def positions(self, seqs: np.ndarray) -> np.ndarray:
        """Positions of the given row ids (all must be cached)."""
        pos = np.searchsorted(self.seqs[: self.size], seqs)
        found: np.ndarray = pos[
            (pos < self.size) & (self.seqs[np.minimum(pos, self.size - 1)] == seqs)
        ]
        return found

    def top_k(
        self, query: np.ndarray, k: int, subset: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` best ``(seq, cosine similarity)`` pairs, best first."""
        if self.size == 0:
            return []
        rows = self.matrix[: self.size] if subset is None else self.matrix[subset]
        seqs = self.seqs[: self.size] if subset is None else self.seqs[subset]
        if len(seqs) == 0:
            return []
        with _BLAS.limit(limits=1, user_api="blas"):
            scores = rows @ query
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        return list(zip(seqs[best].tolist(), scores[best].tolist(), strict=True))


def load(rows: list[tuple[int, bytes]], dimension: int, vseq: int, epoch: int) -> UserVectors:
    """Build a user's matrix from ``(seq, float32 blob)`` rows in ascending order."""
    entry = UserVectors(
        seqs=np.zeros(0, dtype=np.int64),
        matrix=np.zeros((0, dimension), dtype=np.float32),
        size=0,
        vseq=vseq,
        epoch=epoch,
    )
    entry._grow(len(rows))
    if rows:
        entry.seqs[: len(rows)] = [r[0] for r in rows]
        entry.matrix[: len(rows)] = np.frombuffer(
            b"".join(r[1] for r in rows), dtype=np.float32
        ).reshape(len(rows), dimension)
    entry.size = len(rows)
    return entry


class VectorCache:
    """Thread-safe LRU of :class:`UserVectors` bounded by total bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, UserVectors] = OrderedDict()
        self.lock = threading.RLock()

    def get(self, user_id: str) -> UserVectors | None:
        with self.lock:
            entry = self._entries.get(user_id)
            if entry is not None:
                self._entries.move_to_end(user_id)
            return entry

    def put(self, user_id: str, entry: UserVectors) -> None:
        with self.lock:
            self._entries[user_id] = entry
            self._entries.move_to_end(user_id)
            total = sum(e.nbytes for e in self._entries.values())
            while total > self.max_bytes and len(self._entries) > 1:
                _, evicted = self._entries.popitem(last=False)
                total -= evicted.nbytes

    def drop(self, user_id: str) -> None:
        with self.lock:
            self._entries.pop(user_id, None)

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()
