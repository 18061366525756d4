"""Read your writes by meaning: an added message is found in the very next context, from
another process, before any worker has embedded it.

A writer process (its worker off, so nothing is indexed while this runs) adds facts; this
process asks a paraphrase right after each acknowledgement. The pairs come from templates
with varied entities ("I adopted a beagle named Olu." / "What is my dog called?"); a
question shares no keyword (nor five-letter stem) with its fact, so only meaning finds it.
Each user has chit-chat and up to ``--per-user`` facts; a hit is the fact's text in the
context. Every question is asked twice, in the same run: by a Memory that embeds the
user's newest not-yet-indexed messages with the query (``planner.pending_vectors``, the
default 32) and by one with it off (0: keyword search only, the comparison).

Latency (same store, this process): ``get_context`` p50 for a user with 8 indexed
messages and none pending, beside users with 8 pending ones: the same 8 asked again
(their vectors cached by content hash after the first call), 2 of them new since the last
call (a turn: the user's message and the reply), all 8 never seen before (each call
embeds 8 new messages), and 8 pending with the feature off; rounds interleave them.

    python benchmarks/read_your_writes.py [--pairs 1000] [--per-user 4] [--rounds 100]
        [--store postgresql://...] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import reproduce_command, rich_table, write_json

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES: list[tuple[str, str]] = [
    ("I adopted a {breed} named {name}.", "What is my dog called?"),
    ("My sister {name} lives in {city}.", "Which city is my sibling in?"),
    ("I work as a {job} in {city}.", "What is my occupation?"),
    ("My favourite food is {dish}.", "What do I like to eat most?"),
    ("I drive a {color} {car}.", "What kind of vehicle do I own?"),
    ("My daughter {name} was born in {month}.", "When is my child's birthday?"),
    ("I play the {instrument} every weekend.", "Which musical instrument do I practise?"),
    ("I studied {subject} at university.", "Which subject was my degree in?"),
    ("My husband {name} is a {job}.", "What does my spouse do for work?"),
]
ENTITIES: dict[str, list[str]] = {
    "breed": ["greyhound", "beagle", "poodle", "dachshund", "corgi", "husky", "whippet"],
    "name": ["Pixel", "Ana", "Tomasz", "Yuki", "Olu", "Marta", "Ines", "Kofi", "Lena", "Ravi"],
    "city": ["Porto", "Lyon", "Osaka", "Lagos", "Quito", "Tartu", "Leeds", "Hanoi", "Perth"],
    "job": ["nurse", "carpenter", "pilot", "chef", "lawyer", "plumber", "dentist", "baker"],
    "dish": ["lasagna", "ramen", "paella", "pho", "goulash", "falafel", "pierogi", "tacos"],
    "color": ["red", "blue", "silver", "green", "black"],
    "car": ["Volvo", "Toyota", "Tesla", "Fiat", "Skoda", "Honda"],
    "month": ["March", "July", "October", "January", "May"],
    "instrument": ["cello", "violin", "banjo", "saxophone", "trumpet", "harp", "ukulele"],
    "subject": ["chemistry", "philosophy", "architecture", "economics", "linguistics"],
}
CHITCHAT = [
    "Good morning! The weather looks lovely today.",
    "Thanks, that was really helpful.",
    "I had coffee with a colleague earlier.",
    "Remind me later about the meeting notes.",
    "Haha, that's funny.",
    "I'm feeling a bit tired this afternoon.",
]
QUESTION = "What is my dog called?"


def pairs(count: int, per_user: int, run: str, seed: int = 7) -> list[tuple[str, str, str]]:
    """``count`` (user, fact, question) triples: ``per_user`` facts of distinct templates
    per user (ids prefixed by ``run``), each with entities drawn at random."""
    from tiermem.planner import _stems
    from tiermem.stores.keywords import keyword_terms

    rng = random.Random(seed)
    out: list[tuple[str, str, str]] = []
    for number in range(-(-count // per_user)):
        user = f"{run}-{number}"
        for fact, question in rng.sample(TEMPLATES, per_user):
            text = fact.format(**{k: rng.choice(v) for k, v in ENTITIES.items()})
            shared = _stems(" ".join(keyword_terms(text))) & _stems(
                " ".join(keyword_terms(question))
            )
            assert not shared, (text, question, shared)  # only meaning can find it
            out.append((user, text, question))
    return out[:count]


# -- the writer process ----------------------------------------------------------------


def memory_for(store: str, pending_vectors: int | None = None, embedder: Any = None) -> Any:
    """A Memory on ``store`` (SQLite path or postgresql:// URL) whose worker never runs
    in the background (its rows stay pending until :meth:`Memory.flush`)."""
    from tiermem.memory import Memory

    persistent: dict[str, Any] = (
        {"provider": "postgresql", "connection_string": store}
        if store.startswith("postgresql://")
        else {"path": store}
    )
    memory: dict[str, Any] = {"persistent": persistent, "worker": {"background": False}}
    if pending_vectors is not None:
        memory["planner"] = {"pending_vectors": pending_vectors}
    return Memory(config={"memory": memory}, embedder=embedder)


def writer(store: str) -> int:
    """Serve JSON lines on stdin: ``{"add": [user, session, text]}`` or ``{"flush": 1}``;
    print ``ack`` once each is committed."""
    memory = memory_for(store)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "add" in request:
            user, session, text = request["add"]
            memory.add("user", text, user, session)
        else:
            memory.flush()
        print("ack", flush=True)
    memory.close(timeout=0)
    return 0


class Writer:
    """The writer process, driven over its stdin."""

    def __init__(self, store: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--writer", store],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self._expect("ready")

    def _expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        if got != word:
            raise RuntimeError(f"the writer said {got!r}, not {word!r}")

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        self._expect("ack")

    def add(self, user: str, session: str, text: str) -> None:
        self.send({"add": [user, session, text]})

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


# -- the figures -----------------------------------------------------------------------


def misses(writer: Writer, askers: dict[str, Any], triples: list[tuple[str, str, str]]) -> Any:
    """Add each fact in the writer, then ask its question here with every asker; the
    misses per asker and the pending rows the users had when asked."""
    missed = dict.fromkeys(askers, 0)
    seen: set[str] = set()
    for user, fact, question in triples:
        if user not in seen:
            seen.add(user)
            for text in random.Random(user).sample(CHITCHAT, 2):
                writer.add(user, "chat", text)
        writer.add(user, "facts", fact)
        for name, memory in askers.items():
            if fact not in memory.get_context(question, user, "asking").text():
                missed[name] += 1
    return missed


def latencies(
    writer: Writer, memory: Any, off: Any, run: str, rounds: int, rows: int = 8
) -> dict[str, list[float]]:
    """Interleaved ``get_context`` times (ms) for users with ``rows`` indexed, pending
    (seen before), pending (new each call) and pending with the feature off. Every call
    asks a question of its own (a repeated one would come from the embedder's cache)."""
    texts = [f"Note {i}: the {ENTITIES['dish'][i]} recipe needs more salt." for i in range(rows)]
    none, seen = f"{run}-lat-none", f"{run}-lat-pending"
    for text in texts:
        writer.add(none, "s", text)
    writer.send({"flush": 1})  # the first user's rows are indexed
    for text in texts:
        writer.add(seen, "s", text)
    for r in range(rounds):
        for i in range(rows):
            writer.add(f"{run}-lat-new-{r}", "s", f"Round {r} note {i}: {texts[i]}")
            turn = texts[i] if i < rows - 2 else f"Round {r} turn {i}: {texts[i]}"
            writer.add(f"{run}-lat-turn-{r}", "s", turn)
    calls: dict[str, tuple[Any, Callable[[int], str]]] = {
        "none pending (8 indexed)": (memory, lambda r: none),
        "8 pending, seen before": (memory, lambda r: seen),
        "8 pending, 2 new each call": (memory, lambda r: f"{run}-lat-turn-{r}"),
        "8 pending, 8 new each call": (memory, lambda r: f"{run}-lat-new-{r}"),
        "8 pending, feature off": (off, lambda r: seen),
    }
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            asker, user = calls[name]
            question = f"{QUESTION} ({r}, {names.index(name)})"
            start = time.perf_counter()
            asker.get_context(question, user(r), "q")
            if r:  # round 0 warms up (connections; the seen-before user's vectors)
                times[name].append((time.perf_counter() - start) * 1000)
    return times


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=100, help="latency rounds")
    parser.add_argument("--store", default=None, help="postgresql:// URL (default: SQLite)")
    parser.add_argument("--quick", action="store_true", help="40 pairs, 12 rounds")
    parser.add_argument("--writer", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default="benchmarks/results/read_your_writes.json")
    args = parser.parse_args(argv)
    if args.writer:
        raise SystemExit(writer(args.writer))
    n, rounds = (40, 12) if args.quick else (args.pairs, args.rounds)
    folder = tempfile.mkdtemp(prefix="tiermem-ryw-")
    store = args.store or str(Path(folder) / "memory.db")
    run = f"ryw-{uuid.uuid4().hex[:8]}"  # users of an earlier run on the same store differ
    triples = pairs(n, args.per_user, run)
    on = memory_for(store)
    off = memory_for(store, pending_vectors=0, embedder=on.embedder)
    proc = Writer(store)
    try:
        start = time.perf_counter()
        missed = misses(proc, {"on": on, "off": off}, triples)
        elapsed = time.perf_counter() - start
        times = latencies(proc, on, off, run, rounds)
        pending = on.work_stats().pending
    finally:
        proc.close()
        on.close(timeout=0)
        off.close(timeout=0)
    base = statistics.median(times["none pending (8 indexed)"])
    results = {
        "pairs": len(triples),
        "users": len({u for u, _, _ in triples}),
        "store": "postgresql" if args.store else "sqlite",
        "misses": {"pending embedded with the query": missed["on"], "keyword only": missed["off"]},
        "seconds": elapsed,
        "rows_pending_at_end": pending,
        "latency_ms": {
            name: {"p50": statistics.median(v), "ratio_p50": statistics.median(v) / base}
            for name, v in times.items()
        },
        "rounds": rounds - 1,
        "command": reproduce_command(__file__, argv),
    }
    report(results)
    write_json(args.out, results)
    return results


def report(results: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    table = rich_table(
        f"Add in one process, ask by meaning in another: {results['pairs']} pairs, "
        f"{results['users']} users ({results['store']}, worker off)",
        ("context", "misses", "of"),
    )
    for name, count in results["misses"].items():
        table.add_row(name, str(count), str(results["pairs"]))
    console.print(table)
    table = rich_table(
        f"get_context p50, {results['rounds']} interleaved rounds", ("user", "p50 ms", "ratio")
    )
    for name, row in results["latency_ms"].items():
        table.add_row(name, f"{row['p50']:.1f}", f"{row['ratio_p50']:.2f}x")
    console.print(table)
    console.print(f"rows still pending at the end: {results['rows_pending_at_end']}")
    console.print(f"reproduce: {results['command']}")


if __name__ == "__main__":
    main()
