"""tiermem as a service: the HTTP app (FastAPI), keys and tenants, metrics, the inspector.

Needs the ``server`` extra (``pip install 'tiermem[server]'``).
"""

from __future__ import annotations

from tiermem.server.app import create_app
from tiermem.server.keys import KeyStore
from tiermem.server.run import serve

__all__ = ["KeyStore", "create_app", "serve"]
