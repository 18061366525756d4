"""Where the embedded store's SQLite file lives, and the one check of a given path.

The default file (``memory.db`` under the user's data directory) has its folder
created on first use; a path a user gives must be in an existing folder, so a
mistyped path is an error instead of a new, empty database somewhere else.
"""

from __future__ import annotations

import os
from pathlib import Path

from tiermem.errors import InputError

MEMORY = ":memory:"


def default_sqlite_path() -> Path:
    """``memory.db`` under the user's data directory (``$XDG_DATA_HOME/tiermem`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("tiermem", appauthor=False)) / "memory.db"


def sqlite_file(path: str | os.PathLike[str], field: str = "path") -> str:
    """``path`` ready to open: the default file's folder is created, any other path must
    be a file (or not exist yet) in an existing folder.

    Raises:
        InputError: naming ``field``, for a folder or a file in a missing folder.
    """
    text = os.fspath(path)
    if text == MEMORY:
        return text
    target = Path(text).expanduser()
    if target.is_dir():
        raise InputError(field, f"{text} is a folder", "give the path of the SQLite file in it")
    if target.absolute() == default_sqlite_path().absolute():
        target.parent.mkdir(parents=True, exist_ok=True)
    elif not target.parent.is_dir():
        raise InputError(
            field,
            f"the folder {str(target.parent)!r} does not exist",
            "check the path, or create the folder first",
        )
    return str(target)
