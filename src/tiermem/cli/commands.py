"""The subcommands of ``tiermem``: one function per command, and the helpers they share."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.errors import AmbiguousIdError, InputError, SerializationError

if TYPE_CHECKING:
    from rich.console import Console

    from tiermem.memory import Memory
    from tiermem.messages import Message

Command = Callable[[argparse.Namespace], int]


def make_console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr)."""
    from rich.console import Console

    return Console(stderr=stderr)


def check_db(path: str | None, field: str = "--db") -> str | None:
    """Refuse a database path whose folder does not exist (a mistyped path would
    otherwise create a new, empty database) or that is a folder, before anything loads
    (:func:`tiermem.paths.sqlite_file`, the check ``Memory`` makes too)."""
    from tiermem.paths import sqlite_file

    return None if path is None else sqlite_file(path, field)


@contextmanager
def _memory(args: argparse.Namespace) -> Iterator[Memory]:
    from tiermem.memory import Memory

    memory = Memory(check_db(args.db), config=args.config)
    try:
        yield memory
    finally:
        memory.close()


def cmd_demo(args: argparse.Namespace) -> int:
    from tiermem.cli.demo import run_demo

    run_demo(db=check_db(args.db), max_tokens=args.max_tokens)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        message = memory.add(args.role, args.text, args.user, args.session, name=args.name)
        memory_id = stored_id(memory, args.user, message)
    if memory_id is None:  # nothing goes to the long-term store (retention)
        make_console().print(f"added message {message.message_id} for user {args.user!r}")
    else:
        make_console().print(f"added {memory_id} for user {args.user!r}")
    return 0


def stored_id(memory: Memory, user_id: str, message: Message) -> str | None:
    """The long-term store's id of an added message (the id ``search`` shows and
    ``forget`` takes), once it is archived; None when nothing was stored."""
    from tiermem.messages import transcript_line

    memory.flush()
    found = memory.list_memories(user_id, limit=1, metadata={"message_id": message.message_id})
    if found:
        return str(found[0].id)
    line = transcript_line(message)  # the same text was stored before: that memory
    hits = memory.search(line, user_id, k=20, mode="keyword")
    return next((str(h.record.id) for h in hits if h.record.content == line), None)


def _user_ids(memory: Memory, user_id: str) -> list[str]:
    """Every memory id of ``user_id``, sorted."""
    ids: list[str] = []
    while page := memory.list_memories(user_id, limit=1000, offset=len(ids)):
        ids += [str(record.id) for record in page]
    return sorted(ids)


def short_ids(all_ids: Sequence[str], wanted: Sequence[str], least: int = 8) -> dict[str, str]:
    """The shortest prefix (at least ``least`` characters) of each of ``wanted`` that no
    other id of ``all_ids`` (sorted) starts with."""
    import bisect

    out = {}
    for full in wanted:
        at = bisect.bisect_left(all_ids, full)
        neighbours = [all_ids[i] for i in (at - 1, at + 1) if 0 <= i < len(all_ids)]
        shared = max((_common(full, other) for other in neighbours if other != full), default=0)
        out[full] = full[: max(least, shared + 1)]
    return out


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def resolve_id(memory: Memory, user_id: str, given: str) -> str:
    """The full id of the user's memory that ``given`` (a whole id or a prefix) names."""
    import uuid

    try:
        return str(uuid.UUID(given.strip()))
    except ValueError:
        return pick_id(given, _user_ids(memory, user_id), user_id)


def pick_id(given: str, ids: Sequence[str], user_id: str) -> str:
    """The one id of ``ids`` that starts with ``given`` (4 or more characters, any case).

    Raises:
        InputError: ``given`` is not (the start of) an id.
        AmbiguousIdError: several ids start with it.
        NotFoundError: none does.
    """
    import re

    from tiermem.errors import NotFoundError

    text = given.strip().lower()
    if not re.fullmatch(r"[0-9a-f-]{4,36}", text):
        raise InputError(
            "--id", f"{given!r} is not a memory id", "give the id `search` shows (4+ characters)"
        )
    matches = [i for i in ids if i.startswith(text)]
    if not matches:
        raise NotFoundError(f"no memory of user {user_id!r} has an id starting with {given!r}")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise AmbiguousIdError(
            "--id",
            f"{given!r} starts {len(matches)} ids of user {user_id!r} ({shown})",
            "give more of the id",
        )
    return matches[0]


def _read_history(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Messages from a JSON list (or ``{"messages": [...]}``) or a JSONL file, and where
    each is (``name:LINE`` for JSONL, ``name message N`` for JSON; both count from 1)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows, places = [], []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SerializationError(f"{path.name}:{number}", exc.msg) from None
                places.append(f"{path.name}:{number}")
        return rows, places
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(f"{path.name}:{exc.lineno}", exc.msg) from None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise SerializationError(path.name, "expected a list of messages or {'messages': [...]}")
    return data, [f"{path.name} message {n}" for n in range(1, len(data) + 1)]


def _in_file(exc: InputError, places: Sequence[str], start: int) -> InputError:
    """``exc`` about ``messages[i].x`` of the chunk at ``start`` as an error about the
    file's line (or message number) of that row; other errors unchanged."""
    import re

    found = re.match(r"messages\[(\d+)\]\.?(.*)", exc.field)
    if found is None:
        return exc
    where = places[start + int(found.group(1))]
    return exc.relabel(f"{where} {found.group(2) or 'message'}")


def cmd_export(args: argparse.Namespace) -> int:
    """``tiermem export``: the user's archive (docs/export.md) to a file or stdout."""
    from tiermem.memory.export import dumps

    with _memory(args) as memory:
        lines = memory.export(args.user, include_vectors=args.vectors)
        out = sys.stdout if args.output is None else args.output.open("w", encoding="utf-8")
        try:
            for line in lines:
                out.write(dumps(line) + "\n")
        finally:
            if out is not sys.stdout:
                out.close()
    if args.output is not None:
        make_console().print(f"exported user {args.user!r} to {args.output}")
    return 0


def _is_archive(path: Path) -> bool:
    """Whether a file is a tiermem archive (its first line is the archive's header)."""
    from tiermem.memory.export import FORMAT

    with path.open(encoding="utf-8", errors="replace") as f:
        first = f.readline(4096)
    try:
        header = json.loads(first)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT


def cmd_import(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    if _is_archive(args.file):  # an archive of `tiermem export`, restored as --user
        with _memory(args) as memory, args.file.open(encoding="utf-8") as lines:
            added = memory.import_archive(lines, args.user)
        make_console().print(
            f"restored {added['messages']} messages and {added['memories']} memories "
            f"for user {args.user!r}"
        )
        return 0
    rows, places = _read_history(args.file)
    with _memory(args) as memory, Progress(console=make_console()) as progress:
        task = progress.add_task("importing", total=len(rows))
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            try:
                memory.add_messages(chunk, args.user, args.session)
            except InputError as exc:
                raise _in_file(exc, places, start) from None
            progress.advance(task, len(chunk))
        progress.update(task, description="archiving")
        memory.flush()
    make_console().print(f"imported {len(rows)} messages for user {args.user!r}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _memory(args) as memory:
        hits = memory.search(
            args.query, args.user, k=args.k, mode=args.mode, min_score=args.min_score
        )
        ids = [str(hit.record.id) for hit in hits]
        shown = short_ids(_user_ids(memory, args.user), ids) if ids and not args.json else {}
    if args.json:  # the hits as POST /v1/search writes its results
        from tiermem.wire import hit_to_json

        print(json.dumps([hit_to_json(hit) for hit in hits], ensure_ascii=False, indent=2))
        return 0
    if not hits:  # said on stderr, as `tiermem memories` says it, instead of an empty table
        least = f"scores {args.min_score} or more for" if args.min_score else "matches"
        make_console(stderr=True).print(
            f"no memory of user {args.user!r} {least} {args.query!r}",
            markup=False,
            highlight=False,
        )
        return 0
    table = Table("score", "type", "created", "content", title=f"search: {args.query!r}")
    table.add_column("id", no_wrap=True, min_width=8)
    for hit, memory_id in zip(hits, ids, strict=True):
        record = hit.record
        table.add_row(
            f"{hit.score:.3f}",
            record.memory_type,
            record.created_at.strftime("%Y-%m-%d"),
            record.content[:90],
            shown[memory_id],
        )
    make_console().print(table)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        context = memory.get_context(args.query, args.user, args.session, args.max_tokens)
    if args.json:
        print(json.dumps(context.messages, ensure_ascii=False, indent=2))
    else:
        make_console().print(context.explain(), markup=False, highlight=False)
    return 0


def cmd_synopsis(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        synopsis = memory.synopsis(args.user)
    make_console().print(synopsis.render() or f"nothing is known about {args.user!r} yet")
    return 0


def cmd_remember(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        memory_id = memory.remember(args.text, args.user, args.type, args.importance)
    make_console().print(f"remembered {memory_id}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    if bool(args.id) == bool(args.all):
        raise InputError("forget", "give either --id ID or --all", "--all erases the user")
    with _memory(args) as memory:
        if args.all:
            count = memory.forget_user(args.user)
            make_console().print(f"erased {count} memories of user {args.user!r}")
            return 0
        memory_id = resolve_id(memory, args.user, args.id)
        found = memory.forget(memory_id, args.user)
    make_console().print(
        f"forgotten {memory_id}" if found else f"no memory {memory_id} for user {args.user!r}"
    )
    return 0 if found else 1


def cmd_stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _memory(args) as memory:
        stats = memory.stats(args.user)
    table = Table("figure", "value", title=f"memories of {args.user!r}")
    table.add_row("count", str(stats.count))
    for memory_type, count in sorted(stats.by_type.items()):
        table.add_row(f"  {memory_type}", str(count))
    table.add_row("oldest", str(stats.oldest or "-"))
    table.add_row("newest", str(stats.newest or "-"))
    table.add_row("accesses", str(stats.total_access_count))
    table.add_row(
        "mean importance", f"{stats.mean_importance:.2f}" if stats.mean_importance else "-"
    )
    make_console().print(table)
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tiermem.config.model import check_config

    rows = check_config(args.path, secrets_file=args.secrets_file)
    table = Table("key", "value", title=f"{args.path}: valid")
    for key, value in rows:
        table.add_row(key, value)
    make_console().print(table)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from tiermem.stores.migrate import migrate_embeddings

    report = migrate_embeddings(
        from_dim=args.from_dim,
        to_dim=args.to_dim,
        to_model=args.to_model,
        connection_string=args.connection_string,
        batch_size=args.batch_size,
    )
    make_console().print(
        f"memories_{args.from_dim} -> memories_{args.to_dim}: {report.source_rows} rows, "
        f"{report.migrated} migrated now, {report.already_present} already there, "
        f"{report.duplicates} duplicates skipped; the source table is unchanged"
    )
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    """``tiermem copy``: every user's data and the keys into another store, verified."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from tiermem.cli.copying import copy_store

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    bar = Progress(*columns, console=make_console(stderr=True), transient=True)
    task = bar.add_task("copying", total=None)

    def shown(done: int, total: int, user: str) -> None:
        if not bar.live.is_started:  # from the first page on: an error before prints alone
            bar.start()
        bar.update(task, completed=done, total=total, description=f"copying {user!r}")

    try:
        report = copy_store(
            args.source,
            args.destination,
            dimension=args.dimension,
            merge=args.merge,
            batch_size=args.batch_size,
            progress=shown,
            partitions=args.partitions,
        )
    finally:
        if bar.live.is_started:
            bar.stop()
    table = Table(
        "user", *COUNTS, "sha256", "check", title=f"{report.source} -> {report.destination}"
    )
    bad = {id(u) for u in report.mismatches}
    for user in report.users:
        counts = [
            str(user.source.get(k, 0))
            if user.source.get(k, 0) == user.destination.get(k, 0)
            else f"{user.source.get(k, 0)} -> {user.destination.get(k, 0)}"
            for k in COUNTS
        ]
        check = "MISMATCH" if id(user) in bad else "ok" if user.same else "ok (merged)"
        table.add_row(repr(user.user_id), *counts, user.source_hash[:12], check)
    console = make_console()
    console.print(table)
    sent, added = report.sent, report.added
    console.print(
        f"{'resumed' if report.resumed else 'copied'} into memories_{report.dimension}: "
        f"{added['message']} messages and {added['memory']} memories added "
        f"({sent['message'] - added['message']} and {sent['memory'] - added['memory']} were "
        f"there), {sent['summary']} summaries, {sent['fact_mark']} fact marks; "
        f"keys and tenant users: {report.keys[1]} of {report.keys[0]} rows in the destination; "
        f"{len(report.users)} users verified, {len(report.mismatches)} mismatched",
        highlight=False,
    )
    return 0 if report.ok else 1


COUNTS = ("message", "summary", "fact_mark", "memory")


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from tiermem.cli.doctor import run_checks

    checks = run_checks(args.config, args.db)
    console = make_console()
    colours = {"ok": "green", "fail": "bold red", "skip": "yellow"}
    for check in checks:
        status = f"[{colours[check.status]}]{check.status:<4}[/]"
        line = f"{status}  {check.name:<15}  {escape(check.detail)}"
        console.print(line, soft_wrap=True, highlight=False)
        if check.status == "fail" and check.fix:
            console.print(f"      {'':<15}  fix: {escape(check.fix)}", soft_wrap=True)
    return 1 if any(check.status == "fail" for check in checks) else 0


def cmd_chat(args: argparse.Namespace) -> int:
    from tiermem.cli.chat import run_chat

    check_db(args.db)
    return run_chat(args)


def cmd_serve(args: argparse.Namespace) -> int:
    from tiermem.server.run import serve

    serve(args.config, args.db, args.host, args.port, args.workers)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    import os

    from tiermem.server.mcp import run_stdio

    if args.url:
        from tiermem.client import MemoryClient

        with MemoryClient(args.url, os.environ.get("TIERMEM_API_KEY")) as client:
            run_stdio(client, args.user)
        return 0
    with _memory(args) as memory:
        run_stdio(memory, args.user)
    return 0


@contextmanager
def _keys(args: argparse.Namespace) -> Iterator[Any]:
    from tiermem.config.model import TiermemConfig
    from tiermem.server.keys import KeyStore, keys_location

    keys = KeyStore(keys_location(TiermemConfig.load(args.config), args.db))
    try:
        yield keys
    finally:
        keys.close()


def cmd_keys(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _keys(args) as keys:
        if args.keys_command == "create":
            key, token = keys.create(args.tenant, args.name)
            make_console().print(f"key {key.id} of tenant {key.tenant!r} (shown once, keep it):")
            print(token)
            return 0
        if args.keys_command == "revoke":
            found = keys.revoke(args.id)
            make_console().print("revoked" if found else f"no active key {args.id!r}")
            return 0 if found else 1
        table = Table("id", "tenant", "name", "created", "revoked", title="API keys")
        for key in keys.list(args.tenant):
            table.add_row(key.id, key.tenant, key.name or "", key.created_at, key.revoked_at or "")
        make_console().print(table)
    return 0
