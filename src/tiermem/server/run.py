"""``tiermem serve``: uvicorn in front of :func:`~tiermem.server.app.create_app`.

Without keys the server is in development mode: anyone who reaches it can read every
user, so it binds only to a loopback address until a key exists (``tiermem keys
create``) or an admin key is configured.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from typing import Any

from tiermem.errors import ConfigError
from tiermem.extras import needs_extra
from tiermem.server.heap import freeze_startup

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


def check_port(host: str, port: int) -> None:
    """Raise ConfigError at once when ``host:port`` cannot be listened on (another server
    holds it, a privileged port, an address not of this machine), before the model and
    the store load: uvicorn would say so only after them, with its own traceback.

    The port is bound as uvicorn binds it (``SO_REUSEADDR``: a port left in TIME_WAIT by a
    server that just stopped is free) and released at once.
    """
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError("--host", f"cannot resolve {host!r} ({exc.strerror})") from exc
    for family, kind, proto, _, address in found:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise _unusable(host, port, exc) from exc


def _unusable(host: str, port: int, exc: OSError) -> ConfigError:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(
            "--port",
            f"{where} is already in use, by another tiermem serve or another program",
            f"stop it, or choose another port: --port {port + 1 if port < 65535 else 8765}",
        )
    if exc.errno == errno.EACCES:
        return ConfigError(
            "--port", f"may not listen on {where}: permission denied", "use a port above 1023"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return ConfigError(
            "--host", f"{host} is not an address of this machine", "serve on 127.0.0.1"
        )
    return ConfigError("--host", f"cannot listen on {where}: {exc.strerror or exc}")


def announce(location: str | None, host: str, port: int, protected: bool) -> None:
    """Say on stderr, before uvicorn's lines, which store is served, whether a key is
    needed, and where the inspector, the API's docs and MCP are."""
    import sys

    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    if location == ":memory:":
        store = "SQLite in memory (nothing is kept once the server stops)"
    else:
        store = f"SQLite {location}" if location else "the configured PostgreSQL store"
    mode = "keys required" if protected else "development mode: no key needed"
    print(
        f"tiermem serve: {store} ({mode})\n"
        f"  inspector {url}/ui, API docs {url}/docs, MCP {url}/mcp",
        file=sys.stderr,
        flush=True,
    )


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
    of full collections (:func:`~tiermem.server.heap.freeze_startup`)."""
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
        ConfigError: a non-loopback ``host`` while no key exists (development mode), or a
            ``host:port`` that cannot be listened on (:func:`check_port`).
    """
    with needs_extra("server", "tiermem serve", "the HTTP server"):
        import uvicorn

    if workers < 1:
        raise ConfigError("--workers", f"{workers} is less than 1", "use 1 or more")
    check_port(host, port)  # before the app, the model and the store load
    from tiermem.server.app import create_app
    from tiermem.server.keys import KeyStore, keys_location
    from tiermem.server.service import ADMIN_KEY_ENV
    from tiermem.server.writes import JoinedWritesProtocol

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
    announce(memory.location, host, port, protected)
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
