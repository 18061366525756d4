"""Where a copy between stores stands, kept in the destination (``tiermem copy``).

One row per source in ``tiermem_copies``: a JSON state (the users done, the user being
copied, its phase and cursor) written in the same transaction as the rows it accounts
for, so a copy that is killed resumes at the page it had reached and writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from tiermem.stores.schema import Migration, created

COPIES = "tiermem_copies"


class CopyStateOp(NamedTuple):
    """Admin: the state of the copy from ``source`` (None: never started), or, with
    ``source`` None, the first copy state of any source (``(source, state)`` or None)."""

    source: str | None


class SaveCopyStateOp(NamedTuple):
    """Admin: set the state of the copy from ``source``."""

    source: str
    state: Mapping[str, Any]


def migrations() -> dict[str, list[Migration]]:
    """The schema history of the copy-state table; append, never edit."""
    columns = (
        "source TEXT NOT NULL PRIMARY KEY, state TEXT NOT NULL,"
        " updated_at DOUBLE PRECISION NOT NULL"
    )
    return {COPIES: [Migration("001_create", created(columns))]}
