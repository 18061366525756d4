"""The ``tiermem`` command: the library's operations from a shell, with rich output.

Every command that touches memory takes ``--config PATH`` (a YAML file, see
docs/configuration.md) and ``--db PATH`` (the SQLite file of the embedded store); the
commands mirror :class:`tiermem.Memory` one to one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem import __version__
from tiermem.errors import InputError, SerializationError, TiermemError

if TYPE_CHECKING:
    from rich.console import Console

    from tiermem.memory import Memory

Command = Callable[[argparse.Namespace], int]


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr)


@contextmanager
def _memory(args: argparse.Namespace) -> Iterator[Memory]:
    from tiermem.memory import Memory

    memory = Memory(args.db, config=args.config)
    try:
        yield memory
    finally:
        memory.close()


def _cmd_demo(args: argparse.Namespace) -> int:
    from tiermem.demo import run_demo

    run_demo(db=args.db, max_tokens=args.max_tokens)
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        message = memory.add(args.role, args.text, args.user, args.session, name=args.name)
    _console().print(f"added {message.message_id} for user {args.user!r}")
    return 0


def _read_history(path: Path) -> list[dict[str, Any]]:
    """Messages from a JSON list (or ``{"messages": [...]}``) or a JSONL file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise SerializationError(f"{path.name}:{number}", exc.msg) from None
        return rows
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerializationError(path.name, f"line {exc.lineno}: {exc.msg}") from None
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise SerializationError(path.name, "expected a list of messages or {'messages': [...]}")
    return data


def _cmd_import(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    rows = _read_history(args.file)
    with _memory(args) as memory, Progress(console=_console()) as progress:
        task = progress.add_task("importing", total=len(rows))
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            memory.add_messages(chunk, args.user, args.session)
            progress.advance(task, len(chunk))
        progress.update(task, description="archiving")
        memory.flush()
    _console().print(f"imported {len(rows)} messages for user {args.user!r}")
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _memory(args) as memory:
        hits = memory.search(args.query, args.user, k=args.k, mode=args.mode)
    table = Table("score", "type", "created", "content", "id", title=f"search: {args.query!r}")
    for hit in hits:
        record = hit.record
        table.add_row(
            f"{hit.score:.3f}",
            record.memory_type,
            record.created_at.strftime("%Y-%m-%d"),
            record.content[:90],
            str(record.id)[:8],
        )
    _console().print(table)
    return 0


def _cmd_context(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        context = memory.get_context(args.query, args.user, args.session, args.max_tokens)
    if args.json:
        print(json.dumps(context.messages, ensure_ascii=False, indent=2))
    else:
        _console().print(context.explain(), markup=False, highlight=False)
    return 0


def _cmd_synopsis(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        synopsis = memory.synopsis(args.user)
    _console().print(synopsis.render() or f"nothing is known about {args.user!r} yet")
    return 0


def _cmd_remember(args: argparse.Namespace) -> int:
    with _memory(args) as memory:
        memory_id = memory.remember(args.text, args.user, args.type, args.importance)
    _console().print(f"remembered {memory_id}")
    return 0


def _cmd_forget(args: argparse.Namespace) -> int:
    if bool(args.id) == bool(args.all):
        raise InputError("forget", "give either --id ID or --all", "--all erases the user")
    with _memory(args) as memory:
        if args.all:
            count = memory.forget_user(args.user)
            _console().print(f"erased {count} memories of user {args.user!r}")
            return 0
        found = memory.forget(args.id, args.user)
    _console().print("forgotten" if found else f"no memory {args.id} for user {args.user!r}")
    return 0 if found else 1


def _cmd_stats(args: argparse.Namespace) -> int:
    from rich.table import Table

    with _memory(args) as memory:
        stats = memory.store.stats(args.user)
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
    _console().print(table)
    return 0


def _cmd_config_check(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tiermem.config import check_config

    rows = check_config(args.path, secrets_file=args.secrets_file)
    table = Table("key", "value", title=f"{args.path}: valid")
    for key, value in rows:
        table.add_row(key, value)
    _console().print(table)
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from tiermem.stores.migrate import migrate_embeddings

    report = migrate_embeddings(
        from_dim=args.from_dim,
        to_dim=args.to_dim,
        to_model=args.to_model,
        connection_string=args.connection_string,
        batch_size=args.batch_size,
    )
    _console().print(
        f"memories_{args.from_dim} -> memories_{args.to_dim}: {report.source_rows} rows, "
        f"{report.migrated} migrated now, {report.already_present} already there, "
        f"{report.duplicates} duplicates skipped; the source table is unchanged"
    )
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    from tiermem.chat import run_chat

    return run_chat(args)


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Command,
    help: str,
    *,
    memory: bool = True,
) -> argparse.ArgumentParser:
    """Add a subcommand; memory commands get ``--config``, ``--db`` and ``--user``."""
    parser = commands.add_parser(name, help=help)
    if memory:
        parser.add_argument("--config", type=Path, help="YAML configuration")
        parser.add_argument("--db", help="SQLite file of the embedded store")
        parser.add_argument("--user", required=True, help="whose memory (user_id)")
    parser.set_defaults(handler=handler)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(prog="tiermem", description="Tiered memory for LLM agents.")
    parser.add_argument("--version", action="version", version=f"tiermem {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = _command(
        commands, "demo", _cmd_demo, "walk through the tiers on a sample conversation", memory=False
    )
    demo.add_argument("--db", help="SQLite file to use (default: a temporary one)")
    demo.add_argument("--max-tokens", type=int, default=500, help="context budget to show")

    add = _command(commands, "add", _cmd_add, "add one message to a conversation")
    add.add_argument("text")
    add.add_argument("--role", default="user")
    add.add_argument("--name", help="speaker name")
    add.add_argument("--session")

    imp = _command(commands, "import", _cmd_import, "import a JSON or JSONL history")
    imp.add_argument("file", type=Path)
    imp.add_argument("--session")

    remember = _command(commands, "remember", _cmd_remember, "store a fact or preference")
    remember.add_argument("text")
    remember.add_argument("--type", default="fact", help="fact, preference, context, ...")
    remember.add_argument("--importance", type=float, default=0.5)

    search = _command(commands, "search", _cmd_search, "search long-term memories")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=10)
    search.add_argument("--mode", choices=("hybrid", "vector", "keyword"), default="hybrid")

    context = _command(commands, "context", _cmd_context, "build and explain a prompt's context")
    context.add_argument("query")
    context.add_argument("--session")
    context.add_argument("--max-tokens", type=int)
    context.add_argument("--json", action="store_true", help="print the messages as JSON")

    _command(commands, "synopsis", _cmd_synopsis, "show what is known about a user")
    forget = _command(commands, "forget", _cmd_forget, "delete a memory or a whole user")
    forget.add_argument("--id", help="the memory to delete")
    forget.add_argument("--all", action="store_true", help="erase everything of the user")
    _command(commands, "stats", _cmd_stats, "figures about a user's memories")

    config = commands.add_parser("config", help="configuration tools")
    checks = config.add_subparsers(dest="config_command", metavar="COMMAND")
    check = _command(checks, "check", _cmd_config_check, "validate a YAML file", memory=False)
    check.add_argument("path", type=Path)
    check.add_argument("--secrets-file", type=Path)

    migrate = _command(
        commands,
        "migrate-embeddings",
        _cmd_migrate,
        "re-embed memories_{from} into memories_{to}",
        memory=False,
    )
    migrate.add_argument("--from-dim", type=int, required=True)
    migrate.add_argument("--to-dim", type=int, required=True)
    migrate.add_argument("--to-model", required=True, help="e.g. local/all-MiniLM-L6-v2")
    migrate.add_argument(
        "--connection-string", required=True, help="postgresql://... or a SQLite file path"
    )
    migrate.add_argument("--batch-size", type=int, default=256)

    from tiermem.chat import add_chat_arguments

    chat = _command(commands, "chat", _cmd_chat, "chat with the configured model", memory=False)
    add_chat_arguments(chat)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tiermem`` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except (TiermemError, OSError) as exc:
        from rich.markup import escape

        _console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
