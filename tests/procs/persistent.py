"""The ``memory.persistent`` settings the test processes open their store with."""

from __future__ import annotations

# Several processes connect at once on 2 loaded cores; a connection that takes more
# than the library's default 3 s there is the machine, not what these tests measure.
CONNECT_TIMEOUT = 30.0


def persistent(store: str, connect_timeout: float = CONNECT_TIMEOUT) -> dict[str, object]:
    """Settings for STORE: a ``postgresql://`` URI or a SQLite path."""
    if store.startswith("postgresql://"):
        return {
            "provider": "postgresql",
            "connection_string": store,
            "connect_timeout": connect_timeout,
        }
    return {"path": store}
