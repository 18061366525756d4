"""``tiermem serve``: uvicorn in front of :func:`~tiermem.server.app.create_app`.

Without keys the server is in development mode: anyone who reaches it can read every
user, so it binds only to a loopback address until a key exists (``tiermem keys
create``) or an admin key is configured.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from tiermem.errors import ConfigError
from tiermem.extras import needs_extra
from tiermem.heap import freeze_startup

CONFIG_ENV = "TIERMEM_SERVE_CONFIG"
DB_ENV = "TIERMEM_SERVE_DB"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_memory(config: str | None, db: str | None) -> Any:
    from tiermem.memory import Memory

    return Memory(db, config=config)


def app_from_env() -> Any:
    """The app of one worker of ``--workers N`` (its settings come in the environment)."""
    from tiermem.server.app import create_app

    memory = build_memory(os.environ.get(CONFIG_ENV) or None, os.environ.get(DB_ENV) or None)
    return frozen(create_app(memory, own_memory=True))


def frozen(app: Any) -> Any:
    """``app``, with what the process holds so far (FastAPI, pydantic's schemas, MCP) out
    of full collections (:func:`~tiermem.heap.freeze_startup`)."""
    freeze_startup()
    return app


def serve(
    config: str | None = None,
    db: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    workers: int = 1,
) -> None:
    """Run the server until interrupted.

    Raises:
        ConfigError: a non-loopback ``host`` while no key exists (development mode).
    """
    with needs_extra("server", "tiermem serve", "the HTTP server"):
        import uvicorn

    from tiermem.server.app import create_app
    from tiermem.server.keys import KeyStore, keys_location
    from tiermem.server.service import ADMIN_KEY_ENV
    from tiermem.server.writes import JoinedWritesProtocol

    if workers < 1:
        raise ConfigError("--workers", f"{workers} is less than 1", "use 1 or more")
    memory = build_memory(config, db)
    keys = KeyStore(keys_location(memory.config, db))
    try:
        protected = bool(os.environ.get(ADMIN_KEY_ENV)) or keys.keys_exist()
    finally:
        keys.close()
    if not protected and not is_loopback(host):
        memory.close()
        raise ConfigError(
            "--host",
            f"{host} is not a loopback address and no key exists (development mode)",
            "create a key first (tiermem keys create --tenant NAME) or serve on 127.0.0.1",
        )
    # no access log (the metrics count requests); an answer in one write (server/writes.py)
    serving: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": False,
        "http": JoinedWritesProtocol,
    }
    if workers == 1:
        uvicorn.run(frozen(create_app(memory, own_memory=True)), **serving)
        return
    memory.close()
    os.environ[CONFIG_ENV] = config or ""
    os.environ[DB_ENV] = db or ""
    uvicorn.run("tiermem.server.run:app_from_env", factory=True, workers=workers, **serving)
