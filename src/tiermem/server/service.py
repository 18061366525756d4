"""What the routes and the MCP endpoint share: the memory, the keys, the caller's tenant."""

from __future__ import annotations

import hmac

from tiermem.extras import needs_extra

with needs_extra("server", "tiermem.server", "the HTTP server"):
    from fastapi import Request

from tiermem.errors import TiermemError
from tiermem.memory import Memory
from tiermem.server.commits import GroupCommit
from tiermem.server.errors import Forbidden, Unauthorized
from tiermem.server.keys import KeyStore
from tiermem.server.tenants import Tenant

ADMIN_KEY_ENV = "TIERMEM_ADMIN_KEY"


class Service:
    """What the routes share: the memory, the keys, the caller's tenant, and the group
    commit of added messages."""

    def __init__(self, memory: Memory, keys: KeyStore, admin_key: str | None) -> None:
        self.memory = memory
        self.keys = keys
        self.admin_key = admin_key
        self.commits = GroupCommit(memory.commit_staged)

    def auth_required(self) -> bool:
        """Keys are required once an admin key is configured or any key was created."""
        return self.admin_key is not None or self.keys.keys_exist()

    def _token(self, request: Request) -> str | None:
        header = request.headers.get("authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("the Authorization header must read 'Bearer <key>'")
        return token.strip()

    def _is_admin(self, token: str) -> bool:
        return self.admin_key is not None and hmac.compare_digest(
            token.encode(), self.admin_key.encode()
        )

    def tenant(self, request: Request) -> Tenant:
        """The tenant of the request's key (development mode: no keys, tenant None)."""
        token = self._token(request)
        if token is None:
            if self.auth_required():
                raise Unauthorized(
                    "this server requires a key: send 'Authorization: Bearer tm_...'"
                )
            return Tenant(None)
        if self._is_admin(token):
            raise Forbidden("the admin key manages keys only; use a tenant's key for data")
        key = self.keys.verify(token)
        if key is None:
            raise Unauthorized("unknown or revoked key")
        return Tenant(key.tenant)

    def admin(self, request: Request) -> None:
        """Admin routes: the admin key, or any caller in development mode."""
        token = self._token(request)
        if token is not None and self._is_admin(token):
            return
        if token is None and not self.auth_required():
            return
        if token is not None and self.keys.verify(token) is not None:
            raise Forbidden("this route needs the admin key")
        raise Unauthorized(f"this route needs the admin key (set {ADMIN_KEY_ENV})")

    def note_user(self, tenant: Tenant, user_id: str) -> None:
        self.keys.note_user(tenant.name or "", user_id)

    def figures(self) -> dict[str, float | None]:
        """Process and store figures for /metrics (None: not known right now)."""
        try:
            size: float | None = float(self.memory.size())
            work = self.memory.work_stats()
            pending: float | None = float(work.pending)
            failed: float | None = float(work.failed)
        except TiermemError:
            size = pending = failed = None
        figures = {
            "queued_messages": float(self.memory.pending),
            "pending_work": pending,
            "failed_work": failed,
            "store_memories": size,
        }
        replica = self.memory.replica_status()
        if replica is not None:
            figures.update(
                replica_up=float(replica.up),
                replica_lag_bytes=None if replica.lag_bytes is None else float(replica.lag_bytes),
                replica_lag_seconds=replica.lag_seconds,
                replica_reads=float(replica.reads),
                replica_reads_to_primary=float(replica.behind + replica.down),
            )
        return figures
