"""tiermem as a service: the HTTP app (FastAPI), keys and tenants, metrics, the inspector.

Needs the ``server`` extra (``pip install 'tiermem[server]'``); without it the names
below raise :class:`~tiermem.errors.MissingExtraError`. They are imported on first use,
so the key store (``tiermem keys``) loads without FastAPI.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "KeyStore": "tiermem.server.keys",
    "create_app": "tiermem.server.app",
    "serve": "tiermem.server.run",
}

if TYPE_CHECKING:
    from tiermem.server.app import create_app
    from tiermem.server.keys import KeyStore
    from tiermem.server.run import serve

__all__ = ["KeyStore", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tiermem.server' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
