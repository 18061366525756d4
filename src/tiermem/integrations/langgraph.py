"""LangGraph: ``TiermemStore``, a ``BaseStore`` whose items are tiermem memories.

A graph compiled with ``graph.compile(store=TiermemStore(memory))`` reads and writes
long-term memories through LangGraph's store API (``put`` / ``get`` / ``search`` /
``delete`` / ``list_namespaces`` and their async twins), and everything it stores is a
tiermem memory of the user: found by ``Memory.search`` and fed to ``Memory.get_context``.

Namespaces map to users and kinds of memory. The label at ``user_label`` (default 0) is
the ``user_id``; the other labels are the *kind*. ``("ana", "preference")`` is Ana's
memory of kind ``preference``; with ``user_label=1``, ``("memories", "ana")`` is Ana's
memory of kind ``memories``. Every operation is scoped to one user: a search or a listing
must name the user in its prefix, so no call reads across users.

Each item is one memory row: the content is ``"{kind}/{key}: {text}"`` (the text of the
value's indexed fields, see :class:`TiermemStore`), the value, kind and key are in its
metadata, and its memory type is the kind's first label when that is a tiermem type
(``fact``, ``preference``, ``context``), else ``fact``.

Requires the ``langgraph`` extra (``pip install "tiermem[langgraph]"``).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from tiermem.extras import needs_extra

with needs_extra("langgraph", "tiermem.integrations.langgraph", "the LangGraph store"):
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path

from tiermem.errors import InputError, InvalidSizeError, InvalidTypeError
from tiermem.integrations import _common
from tiermem.types.checks import MAX_LIMIT

KIND_TYPES = ("fact", "preference", "context")
"""Kinds whose first label is also the memory type of their items."""
_KIND = "langgraph_namespace"
_KEY = "langgraph_key"
_VALUE = "langgraph_value"
_UPDATED = "langgraph_updated_at"
_PREFIX = "langgraph_prefix_{}"
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class NamespaceError(InputError, InvalidNamespaceError):
    """A namespace LangGraph or tiermem cannot use (both error types catch it)."""


class TiermemStore(BaseStore):
    """A LangGraph store over a :class:`tiermem.Memory`.

    Args:
        memory: where the items live (shared with the rest of the application).
        user_label: position of the user id in every namespace.
        fields: paths of the value whose text is indexed (LangGraph's path syntax, as in
            ``IndexConfig["fields"]``); default: every string in the value. ``put(...,
            index=[...])`` overrides it for one item, ``index=False`` indexes the value's JSON.
        importance: explicit importance of the memories written (0 to 1).

    Operations of one :meth:`batch` run in order; a ``put`` of an existing key updates
    that memory in place (``created_at`` kept, ``updated_at`` set).
    """

    def __init__(
        self,
        memory: Any,
        *,
        user_label: int = 0,
        fields: list[str] | None = None,
        importance: float = 0.5,
    ) -> None:
        if isinstance(user_label, bool) or not isinstance(user_label, int) or user_label < 0:
            raise InvalidSizeError("user_label", f"must be an int >= 0, got {user_label!r}")
        if fields is not None and (
            not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields)
        ):
            raise InvalidTypeError("fields", "expected a list of non-empty path strings")
        self.memory = memory
        self.user_label = user_label
        self.fields = fields
        self.importance = importance
        self._writing = threading.Lock()

    # -- the two methods LangGraph asks for ---------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph operations in order; one result per operation."""
        results: list[Result] = []
        for i, op in enumerate(_operations(ops)):
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise InvalidTypeError(
                    f"ops[{i}]",
                    f"{type(op).__name__} is not a LangGraph store operation",
                    "use GetOp, PutOp, SearchOp or ListNamespacesOp",
                )
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch` (runs it in a thread)."""
        return await _common.in_thread(self.batch, _operations(ops))

    # -- operations ---------------------------------------------------------------------

    def _get(self, op: GetOp) -> Item | None:
        user_id, kind = self._split(op.namespace)
        record = self._find(user_id, kind, _check_key(op.key))
        return None if record is None else self._item(record, Item)

    def _put(self, op: PutOp) -> None:
        user_id, kind = self._split(op.namespace, put=True)
        key = _check_key(op.key)
        if op.ttl is not None:
            raise InputError("ttl", "is not supported", "tiermem keeps memories until deleted")
        with self._writing:
            found = self._find(user_id, kind, key)
            if op.value is None:
                if found is not None:
                    self.memory.forget(str(found.id), user_id)
                return
            if not isinstance(op.value, Mapping):
                raise InvalidTypeError(
                    "value", f"expected a dict, got {type(op.value).__name__}", "pass a dict"
                )
            value = _common.json_copy(dict(op.value), "value")
            content = f"{'/'.join((*kind, key))}: {self._text(value, op.index)}"
            metadata = _metadata(kind, key, value)
            if found is not None:  # embedded again by update_memory
                self.memory.update_memory(
                    str(found.id), user_id, content=content, metadata=metadata
                )
                return
            memory_type = kind[0] if kind and kind[0] in KIND_TYPES else "fact"
            memory_id = self.memory.remember(
                content, user_id, memory_type, self.importance, metadata=metadata
            )
            stored = self.memory.get_memory(memory_id, user_id)
            if stored is not None and (stored.metadata.get(_KEY), stored.metadata.get(_KIND)) != (
                key,
                ".".join(kind),
            ):  # another item has the same line (labels may hold "/"): tell them apart
                self.memory.remember(
                    f"{content} [{uuid.uuid4().hex[:8]}]",
                    user_id,
                    memory_type,
                    self.importance,
                    metadata=metadata,
                )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user_id, kind = self._split(op.namespace_prefix, prefix=True)
        limit = _check_count(op.limit, "limit", 1)
        offset = _check_count(op.offset, "offset", 0)
        wanted = _check_filter(op.filter)
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidTypeError("query", f"expected str, got {type(op.query).__name__}")
        scope = {_PREFIX.format(len(kind)): ".".join(kind)}
        pool = offset + limit
        found: list[tuple[Any, float | None]]
        while True:
            size = min(pool, MAX_LIMIT)
            if op.query and op.query.strip():
                hits = self.memory.search(op.query, user_id, k=size, filters={"metadata": scope})
                found = [(h.record, float(h.score)) for h in hits]
            else:
                records = self.memory.list_memories(user_id, limit=size, metadata=scope)
                found = [(r, None) for r in records]
            matching = [(r, s) for r, s in found if _matches(r.metadata.get(_VALUE), wanted)]
            if len(matching) >= pool or len(found) < size or size == MAX_LIMIT:
                break
            pool *= 4
        return [
            self._item(record, SearchItem, score=score)
            for record, score in matching[offset : offset + limit]
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        users = {
            c.path[self.user_label]
            for c in conditions
            if _is_condition(c)
            and c.match_type == "prefix"
            and len(c.path) > self.user_label
            and c.path[self.user_label] != "*"
        }
        if len(users) != 1:
            raise NamespaceError(
                "prefix",
                "must name exactly one user",
                f"tiermem never lists across users: pass prefix=(...) with the user id at "
                f"position {self.user_label}",
            )
        user_id = _common.check_id(users.pop(), "user_id")
        for condition in conditions:
            _check_labels(condition.path, "prefix")
        limit = _check_count(op.limit, "limit", 1)
        offset = _check_count(op.offset, "offset", 0)
        depth = op.max_depth
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)):
            raise InvalidTypeError("max_depth", f"expected an int, got {type(depth).__name__}")
        namespaces = set()
        records: list[Any] = []
        while True:
            page = self.memory.list_memories(
                user_id, limit=MAX_LIMIT, offset=len(records), metadata={_PREFIX.format(0): ""}
            )
            records += page
            if len(page) < MAX_LIMIT:
                break
        for record in records:
            namespace = self._namespace(user_id, record)
            if all(_namespace_matches(c, namespace) for c in conditions):
                namespaces.add(namespace if depth is None else namespace[:depth])
        return sorted(namespaces)[offset : offset + limit]

    # -- helpers ------------------------------------------------------------------------

    def _split(
        self, namespace: Any, *, put: bool = False, prefix: bool = False
    ) -> tuple[str, tuple[str, ...]]:
        """(user_id, kind) of a namespace; typed errors for what cannot be one."""
        field = "namespace_prefix" if prefix else "namespace"
        if not isinstance(namespace, tuple):
            raise InvalidTypeError(
                field, f"expected a tuple of str, got {type(namespace).__name__}"
            )
        _check_labels(namespace, field)
        if put and namespace and namespace[0] == "langgraph":
            raise NamespaceError(field, 'the root label "langgraph" is reserved')
        if len(namespace) <= self.user_label:
            raise NamespaceError(
                field,
                f"{namespace!r} has no user id at position {self.user_label}",
                "every namespace names the user whose memory it is",
            )
        user_id = _common.check_id(namespace[self.user_label], "user_id")
        kind = namespace[: self.user_label] + namespace[self.user_label + 1 :]
        return user_id, kind

    def _namespace(self, user_id: str, record: Any) -> tuple[str, ...]:
        kind_text = record.metadata.get(_KIND) or ""
        kind = tuple(kind_text.split(".")) if kind_text else ()
        return (*kind[: self.user_label], user_id, *kind[self.user_label :])

    def _find(self, user_id: str, kind: tuple[str, ...], key: str) -> Any:
        found = self.memory.list_memories(
            user_id, limit=1, metadata={_KIND: ".".join(kind), _KEY: key}
        )
        return found[0] if found else None

    def _item(self, record: Any, cls: type[Any], **extra: Any) -> Any:
        metadata = record.metadata
        return cls(
            namespace=self._namespace(record.user_id, record),
            key=metadata[_KEY],
            value=metadata.get(_VALUE) or {},
            created_at=record.created_at,
            updated_at=_time(metadata.get(_UPDATED), record.created_at),
            **extra,
        )

    def _text(self, value: dict[str, Any], index: Any) -> str:
        if index is False:
            return json.dumps(value, ensure_ascii=False, sort_keys=True)
        paths = self.fields if index is None else index
        if paths is None:
            texts = _strings(value)
        else:
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise InvalidTypeError("index", "expected False, None or a list of paths")
            texts = [t for path in paths for t in get_text_at_path(value, path)]
        text = "\n".join(t for t in texts if t.strip())
        return text or json.dumps(value, ensure_ascii=False, sort_keys=True)


def _operations(ops: Any) -> list[Any]:
    if (
        isinstance(ops, (str, bytes, Mapping))
        or hasattr(ops, "_fields")
        or not isinstance(ops, Iterable)
    ):
        raise InvalidTypeError(
            "ops", f"expected a list of operations, got {type(ops).__name__}", "wrap one in a list"
        )
    return list(ops)


def _check_labels(labels: Any, field: str) -> None:
    for label in labels:
        if not isinstance(label, str):
            raise NamespaceError(field, f"label {label!r} is a {type(label).__name__}, not a str")
        if not label:
            raise NamespaceError(field, "labels must not be empty")
        if "." in label or "\x00" in label:
            raise NamespaceError(field, f"label {label!r} contains '.' or NUL")


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidTypeError("key", f"expected a non-empty str, got {key!r}")
    if "\x00" in key:
        raise InputError("key", "contains a NUL character")
    return key


def _check_count(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(field, f"expected an int, got {type(value).__name__}")
    if not minimum <= value <= MAX_LIMIT:
        raise InvalidSizeError(field, f"{value} is outside [{minimum}, {MAX_LIMIT}]")
    return value


def _check_filter(wanted: Any) -> dict[str, Any]:
    if wanted is None:
        return {}
    if not isinstance(wanted, Mapping):
        raise InvalidTypeError("filter", f"expected a dict, got {type(wanted).__name__}")
    for key, condition in wanted.items():
        if isinstance(condition, Mapping):
            unknown = [k for k in condition if k.startswith("$") and k not in _OPERATORS]
            if unknown:
                raise InputError(
                    f"filter.{key}", f"unknown operator {unknown[0]!r}", f"use {_OPERATORS}"
                )
    return dict(wanted)


def _matches(value: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether an item's value meets a LangGraph filter (equality, nested dicts, $ops)."""
    if not isinstance(value, Mapping):
        return not wanted
    return all(_meets(value.get(k), condition) for k, condition in wanted.items())


def _meets(actual: Any, condition: Any) -> bool:
    if isinstance(condition, Mapping):
        if any(str(k).startswith("$") for k in condition):
            return all(_compare(actual, op, expected) for op, expected in condition.items())
        return isinstance(actual, Mapping) and _matches(actual, condition)
    return bool(actual == condition)


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if op == "$eq":
        return bool(actual == expected)
    if op == "$ne":
        return bool(actual != expected)
    try:
        left, right = float(actual), float(expected)
    except (TypeError, ValueError):
        return False
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right}.get(op, left <= right)


def _is_condition(condition: Any) -> bool:
    if not isinstance(condition, MatchCondition):
        raise InvalidTypeError("match_conditions", "expected MatchCondition items")
    return True


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    if condition.match_type not in ("prefix", "suffix"):
        raise InputError("match_type", f"{condition.match_type!r} is not 'prefix' or 'suffix'")
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return not path or all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _metadata(kind: tuple[str, ...], key: str, value: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        _KIND: ".".join(kind),
        _KEY: key,
        _VALUE: value,
        _UPDATED: datetime.now(timezone.utc).isoformat(),
    }
    for depth in range(len(kind) + 1):
        metadata[_PREFIX.format(depth)] = ".".join(kind[:depth])
    return metadata


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return []


def _time(raw: Any, default: datetime) -> datetime:
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else default
    except ValueError:
        return default


__all__ = ["NamespaceError", "TiermemStore"]
