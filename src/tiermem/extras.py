"""Optional extras: one way to say that a feature needs ``pip install 'tiermem[EXTRA]'``.

Modules that need an extra import its packages inside :func:`needs_extra`, so a missing
package is a :class:`~tiermem.errors.MissingExtraError` (one line naming the extra),
never a raw ``ModuleNotFoundError``, from the CLI and from a Python import alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tiermem.errors import MissingExtraError


@contextmanager
def needs_extra(extra: str, field: str, feature: str) -> Iterator[None]:
    """Turn a third-party ``ModuleNotFoundError`` raised inside into MissingExtraError.

    Args:
        extra: the extra that installs the packages (``"server"``).
        field: what the user asked for (``"tiermem.server"``, ``"memory.persistent.provider"``).
        feature: what needs the package, for the message (``"the HTTP server"``).
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = exc.name or "a package"
        if missing.partition(".")[0] == "tiermem":
            raise  # a module of our own is missing: a broken install, not an extra
        raise MissingExtraError(
            field, f"{feature} needs {missing}, which is not installed", extra, missing
        ) from exc
