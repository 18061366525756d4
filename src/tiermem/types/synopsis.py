"""A user's synopsis: two tiers, identity and context (seed 001)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from tiermem.errors import InvalidTypeError
from tiermem.types.checks import check_user_id

Tier = Literal["identity", "context"]
TIERS: tuple[Tier, ...] = get_args(Tier)
Source = Literal["llm", "offline"]

#: Memory types that describe who the user is (identity tier) and what they are doing now.
IDENTITY_TYPES = ("fact", "preference")
CONTEXT_TYPES = ("context", "summary", "message")
CONTEXT_HEADER = "Current context:"
"""The line before the context tier in :meth:`Synopsis.render`."""


@dataclass(frozen=True)
class SynopsisTier:
    """The text of one tier, when and how it was written, and the user's change
    generation it was written at (None: unknown; see :meth:`SynopsisService.get`)."""

    text: str
    generated_at: datetime
    source: Source
    generation: int | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "text": self.text,
            "generated_at": self.generated_at.isoformat(),
            "source": self.source,
        }
        if self.generation is not None:
            data["generation"] = self.generation
        return json.dumps(data)

    @classmethod
    def from_json(cls, raw: str) -> SynopsisTier | None:
        """Parse a cached value; ``None`` (a miss) when it is not one this module wrote."""
        try:
            data = json.loads(raw)
            source = data["source"]
            generation = data.get("generation")
            if not isinstance(data["text"], str) or source not in get_args(Source):
                return None
            if generation is not None and type(generation) is not int:
                return None
            return cls(data["text"], _parse_time(data["generated_at"]), source, generation)
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class Synopsis:
    """A user's profile: ``identity`` (name, preferences, traits) and ``context``
    (recent topics, current goals).

    When the tiers were cached at different times, ``generated_at`` is the older of the
    two and ``source`` is ``"llm"`` only if both came from the LLM.
    """

    user_id: str
    identity: str
    context: str
    generated_at: datetime
    source: Source = "offline"

    def render(self) -> str:
        """The synopsis as text for a prompt; empty when nothing is known about the user.

        The identity tier comes first, as it is (the context's synopsis section puts it
        under its own header, "What is known about the user:"), then ``Current context:``
        and the context tier.
        """
        parts = []
        if self.identity.strip():
            parts.append(self.identity.strip())
        if self.context.strip():
            parts.append(f"{CONTEXT_HEADER}\n{self.context.strip()}")
        return "\n\n".join(parts)

    def tier(self, tier: Tier) -> SynopsisTier:
        """One tier of this synopsis, as the cache stores it."""
        return SynopsisTier(getattr(self, tier), self.generated_at, self.source)

    @classmethod
    def from_tiers(cls, user_id: str, tiers: Mapping[Tier, SynopsisTier]) -> Synopsis:
        """Join the two cached tiers (both must be present)."""
        identity, context = tiers["identity"], tiers["context"]
        both_llm = identity.source == "llm" and context.source == "llm"
        return cls(
            user_id=user_id,
            identity=identity.text,
            context=context.text,
            generated_at=min(identity.generated_at, context.generated_at),
            source="llm" if both_llm else "offline",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "identity": self.identity,
            "context": self.context,
            "generated_at": self.generated_at.isoformat(),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Synopsis:
        """Inverse of :meth:`to_dict`.

        Raises:
            InvalidTypeError: ``data`` is not a mapping or a field has the wrong type.
        """
        if not isinstance(data, Mapping):
            raise InvalidTypeError("data", f"expected a dict, got {type(data).__name__}")
        for name in ("identity", "context"):
            if not isinstance(data.get(name), str):
                raise InvalidTypeError(name, f"expected str, got {data.get(name)!r}")
        source = data.get("source", "offline")
        if source not in get_args(Source):
            raise InvalidTypeError("source", f"{source!r} is not one of {get_args(Source)}")
        return cls(
            user_id=check_user_id(data.get("user_id")),
            identity=data["identity"],
            context=data["context"],
            generated_at=_parse_time(data.get("generated_at")),
            source=source,
        )


def _parse_time(value: object) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidTypeError("generated_at", f"{value!r} is not an ISO time") from exc
    else:
        raise InvalidTypeError("generated_at", f"expected an ISO time, got {value!r}")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
