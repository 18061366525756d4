"""The filters of search, list and count: :class:`Filters` (the keywords every face
takes) and :class:`MemoryFilter` (what a store's operation carries), and
:func:`make_filter`, the one check between them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError, refuse_unknown
from tiermem.types.checks import check_aware, check_memory_type, check_text_id

if TYPE_CHECKING:
    from typing_extensions import Unpack


class MemoryFilter(NamedTuple):
    """Conditions every returned record meets (besides belonging to the user).

    ``metadata`` matches top-level keys by equality with a JSON scalar value.
    ``created_after`` is inclusive, ``created_before`` exclusive.
    """

    memory_types: tuple[str, ...] | None = None
    session_id: str | None = None
    agent_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    metadata: Mapping[str, str | int | float | bool | None] | None = None


NO_FILTER = MemoryFilter()


class Filters(TypedDict, total=False):
    """The keyword filters of search, list and count, as every face takes them: a type
    (or several), a session, an agent, a creation-time window, and ``metadata`` (top-level
    keys equal to these str, int, float, bool or None values)."""

    memory_type: str | Iterable[str] | None
    session_id: str | None
    agent_id: str | None
    created_after: datetime | None
    created_before: datetime | None
    metadata: Mapping[str, Any] | None


SEARCH_FILTERS = frozenset(Filters.__annotations__)
"""The names of the keyword filters."""

INT64 = (-(2**63), 2**63 - 1)
"""The ints a metadata filter compares: what every engine holds as a JSON number."""


def _check_number(value: object, name: str) -> None:
    """A filter's number: finite, and an int within 64 bits (the engines compare no other)."""
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise InvalidSizeError(
            name, "is an int outside 64 bits", "compare numbers from -2**63 to 2**63 - 1"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(name, f"is {value}, which no stored value equals", "use a finite number")


def check_search_filters(filters: object) -> Mapping[str, Any]:
    """``search``'s ``filters``: a dict whose keys are :data:`SEARCH_FILTERS` (the user, the
    query, the limit and the mode are arguments of their own, never filters)."""
    if not isinstance(filters, Mapping):
        raise InvalidTypeError("filters", f"expected a dict, got {type(filters).__name__}")
    for key in filters:
        if not isinstance(key, str):
            raise InvalidTypeError("filters", f"has a key of type {type(key).__name__}, not str")
    if "user_id" in filters:
        raise InvalidTypeError(
            "filters.user_id",
            "is not a filter",
            "a search reads the memories of its user_id argument only; pass the user there",
        )
    refuse_unknown(filters, SEARCH_FILTERS, "filters", "a filter")
    return filters


def make_filter(**filters: Unpack[Filters]) -> MemoryFilter:
    """Validate the keyword filters of the derived methods into a :class:`MemoryFilter`."""
    refuse_unknown(filters, SEARCH_FILTERS, "filters", "a filter")
    memory_type = filters.get("memory_type")
    metadata = filters.get("metadata")
    types: tuple[str, ...] | None = None
    if memory_type is not None:
        if not isinstance(memory_type, (str, list, tuple, set, frozenset)):
            raise InvalidTypeError(
                "memory_type", f"must be a str or a list of str, got {type(memory_type).__name__}"
            )
        raw = (memory_type,) if isinstance(memory_type, str) else tuple(memory_type)
        types = tuple(check_memory_type(t) for t in raw)
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise InvalidTypeError("metadata", f"must be a dict, got {type(metadata).__name__}")
        for key, val in metadata.items():
            if not isinstance(key, str) or not key:
                raise InvalidTypeError("metadata", f"filter key {key!r} must be a non-empty str")
            if val is not None and not isinstance(val, (str, int, float, bool)):
                raise InvalidTypeError(
                    f"metadata.{key}", "filter values must be str, int, float, bool or None"
                )
            if isinstance(val, str) and "\x00" in val:
                raise InputError(f"metadata.{key}", "contains a NUL character")
            _check_number(val, f"metadata.{key}")
    return MemoryFilter(
        memory_types=types,
        session_id=check_text_id(filters.get("session_id"), "session_id"),
        agent_id=check_text_id(filters.get("agent_id"), "agent_id"),
        created_after=check_aware(filters.get("created_after"), "created_after"),
        created_before=check_aware(filters.get("created_before"), "created_before"),
        metadata=dict(metadata) if metadata else None,
    )
