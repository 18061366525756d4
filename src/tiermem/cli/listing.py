"""``tiermem users``, ``tiermem sessions USER`` and ``tiermem memories USER``: what is in
the store, listed as :meth:`Memory.users`, :meth:`Memory.sessions` and
:meth:`Memory.list_memories` return it (``--json``: their values, as the REST API writes
them), with the library's paging and filters as options and its errors as they are.

Listings go to stdout, one line per item in text, so they can be piped; what says there
is more (the next page's option) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from tiermem.cli.commands import _memory, _user_ids, make_console, short_ids
from tiermem.errors import InputError


def _store_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="YAML configuration")
    parser.add_argument("--db", help="SQLite file of the embedded store")
    parser.add_argument("--json", action="store_true", help="print the values as JSON")


def _user_argument(parser: argparse.ArgumentParser) -> None:
    """``USER``, or ``--user USER`` as every other command takes it (one of them)."""
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("user_id", nargs="?", metavar="USER", help="whose (user_id)")
    who.add_argument("--user", dest="user_option", metavar="USER", help="the same, as an option")


def _user(args: argparse.Namespace) -> str:
    user: str = args.user_id if args.user_id is not None else args.user_option
    return user


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _more(hint: str) -> None:
    """Say on stderr how to get the next page (stdout stays the listing alone)."""
    make_console(stderr=True).print(hint, markup=False, highlight=False)


# -- tiermem users ------------------------------------------------------------------------


def add_users_arguments(parser: argparse.ArgumentParser) -> None:
    _store_options(parser)
    parser.add_argument("--limit", type=int, default=100, help="how many (default 100)")
    parser.add_argument("--after", default="", help="the last id of the page before")


def cmd_users(args: argparse.Namespace) -> int:
    """``Memory.users(limit, after)``: every user of the store, by id."""
    with _memory(args) as memory:
        users = memory.users(args.limit, args.after)
    if args.json:
        _print_json(users)
    elif not users:
        _more("no users after that id" if args.after else "no users yet")
    for user in [] if args.json else users:
        print(user)
    if len(users) == args.limit:
        _more(f"more: tiermem users --after {json.dumps(users[-1], ensure_ascii=False)}")
    return 0


# -- tiermem sessions USER ------------------------------------------------------------------


def add_sessions_arguments(parser: argparse.ArgumentParser) -> None:
    _user_argument(parser)
    _store_options(parser)


def cmd_sessions(args: argparse.Namespace) -> int:
    """``Memory.sessions(user)``: the user's sessions, most recently active first."""
    from rich.table import Table

    from tiermem.wire import session_to_json

    user = _user(args)
    with _memory(args) as memory:
        sessions = memory.sessions(user)
    if args.json:
        _print_json([session_to_json(s) for s in sessions])
        return 0
    if not sessions:
        _more(f"user {user!r} has no messages")
        return 0
    table = Table("session", "messages", "first", "last", title=f"sessions of {user!r}")
    for s in sessions:
        first, last = (f"{t:%Y-%m-%d %H:%M}" for t in (s.first, s.last))
        name = "(none)" if s.session_id is None else s.session_id
        table.add_row(name, str(s.messages), first, last)
    make_console().print(table)
    return 0


# -- tiermem memories USER ------------------------------------------------------------------


def add_memories_arguments(parser: argparse.ArgumentParser) -> None:
    _user_argument(parser)
    _store_options(parser)
    parser.add_argument("--limit", type=int, default=100, help="how many (default 100)")
    parser.add_argument("--offset", type=int, default=0, help="how many to skip (newest first)")
    parser.add_argument(
        "--type",
        action="append",
        dest="memory_type",
        metavar="TYPE",
        help="only this memory type (fact, preference, message...; repeat for several)",
    )
    parser.add_argument("--session", help="only this session's")
    parser.add_argument("--agent", help="only this agent's")
    parser.add_argument("--created-after", help="only from this time on (ISO 8601)")
    parser.add_argument("--created-before", help="only before this time (ISO 8601)")
    parser.add_argument("--metadata", help='a JSON object of equalities, {"kind": "note"}')


def _time(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            option, f"{text!r} is not an ISO 8601 time", f"e.g. {option} 2024-05-01T12:00:00Z"
        ) from None


def cmd_memories(args: argparse.Namespace) -> int:
    """``Memory.list_memories(user, limit=, offset=, **filters)``: a page of the user's
    memories, newest first."""
    from rich.table import Table

    from tiermem.wire import metadata_filter_from_json, record_to_json

    user = _user(args)
    filters = {
        "memory_type": args.memory_type,
        "session_id": args.session,
        "agent_id": args.agent,
        "created_after": _time(args.created_after, "--created-after"),
        "created_before": _time(args.created_before, "--created-before"),
        "metadata": metadata_filter_from_json(
            args.metadata, "--metadata", """e.g. --metadata '{"kind": "note"}'"""
        ),
    }
    with _memory(args) as memory:
        page = memory.list_memories(user, limit=args.limit, offset=args.offset, **filters)
        ids = [str(record.id) for record in page]
        shown = short_ids(_user_ids(memory, user), ids) if ids and not args.json else {}
    if args.json:
        _print_json([record_to_json(r) for r in page])
    elif page:  # as `search` shows them: the id `forget --id` takes, at the end
        table = Table("type", "created", "content", title=f"memories of {user!r}")
        table.add_column("id", no_wrap=True, min_width=8)
        for record, memory_id in zip(page, ids, strict=True):
            created = f"{record.created_at:%Y-%m-%d}"
            table.add_row(record.memory_type, created, record.content[:90], shown[memory_id])
        make_console().print(table)
    else:
        _more(f"user {user!r} has no memories" + (f" past {args.offset}" if args.offset else ""))
    if len(page) == args.limit:
        _more(f"more: --offset {args.offset + args.limit}")
    return 0


LISTINGS: tuple[tuple[str, Callable[[argparse.Namespace], int], str, Callable[..., None]], ...] = (
    ("users", cmd_users, "list the users of the store", add_users_arguments),
    ("sessions", cmd_sessions, "list a user's sessions", add_sessions_arguments),
    ("memories", cmd_memories, "list a user's memories, newest first", add_memories_arguments),
)
"""The listing commands: name, handler, help and the function that adds their options."""
