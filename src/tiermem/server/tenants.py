"""Tenants: each API key's users live in their own namespace of the store.

The store keys every memory by ``user_id``; the server stores a tenant's user ``u`` as
``f"{tenant}{SEPARATOR}{u}"``, so the same ``user_id`` in two tenants is two users and no
query of one tenant can match a row of another. ``SEPARATOR`` (ASCII unit separator,
U+001F) is refused in user ids given to the API, so no id can forge another tenant's
prefix. In development mode (no keys) the tenant is ``None`` and user ids are stored as
they are: the server then shows what the embedded library wrote to the same file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tiermem.errors import InputError
from tiermem.types.checks import MAX_ID_CHARS, check_user_id

SEPARATOR = "\x1f"
TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def check_tenant(tenant: object) -> str:
    """A tenant name: 1-63 letters, digits, ``.``, ``_`` or ``-``, starting alphanumeric."""
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise InputError(
            "tenant",
            f"{tenant!r} is not a tenant name",
            "use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return tenant


@dataclass(frozen=True)
class Tenant:
    """The namespace a request acts in (``name`` None: development mode)."""

    name: str | None

    def scope(self, user_id: object, field: str = "user_id") -> str:
        """The store's id of the caller's ``user_id``."""
        user = check_user_id(user_id, field)
        if SEPARATOR in user:
            raise InputError(field, "contains the control character U+001F", "remove it")
        if self.name is None:
            return user
        room = MAX_ID_CHARS - len(self.name) - 1
        if len(user) > room:
            raise InputError(field, f"has {len(user)} characters, the most is {room}", "")
        return f"{self.name}{SEPARATOR}{user}"

    def unscope(self, stored: str) -> str | None:
        """The caller's id of a stored user id, or None if it is not this tenant's."""
        if self.name is None:
            return None if SEPARATOR in stored else stored
        prefix = self.name + SEPARATOR
        return stored[len(prefix) :] if stored.startswith(prefix) else None
