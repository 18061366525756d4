"""A real process that uses tiermem the way an agent server does, for crash and
several-process tests: it adds messages (printing the id of each one acknowledged,
flushed at once), reads contexts, lets its worker embed, and may be killed any time.

    python tests/procs/writer.py STORE NAME COUNT [--model hash|default] [--rate N]
        [--users N] [--read-every N] [--flush] [--durability committed|synced|async_commit]

STORE is a SQLite path or a postgresql:// URI. Prints "ack <user> <session> <message_id>"
per acknowledged message and "done" at the end.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: embedders


def build(store: str, model: str, lease: float, durability: str, connect_timeout: float) -> object:
    from persistent import persistent

    from tiermem.memory import Memory

    embedder: object = None
    if model == "hash":
        from embedders import HashEmbedder

        embedder = HashEmbedder(384)
    config = {
        "memory": {
            "persistent": persistent(store, connect_timeout),
            "buffer": {"size": 8, "summary_batch": 4},
            "worker": {"lease_seconds": lease},
            "durability": durability,
        }
    }
    return Memory(config=config, embedder=embedder)


def main() -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck writer's stacks
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("name")
    parser.add_argument("count", type=int)
    parser.add_argument("--model", default="hash")
    parser.add_argument("--rate", type=float, default=0.0, help="messages per second (0: flat out)")
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--read-every", type=int, default=0)
    parser.add_argument("--flush", action="store_true", help="finish the store's work at the end")
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--durability", default="committed")
    parser.add_argument("--connect-timeout", type=float, default=3.0)
    args = parser.parse_args()
    memory = build(args.store, args.model, args.lease, args.durability, args.connect_timeout)
    print("ready", flush=True)
    for i in range(args.count):
        user = f"{args.name}-u{i % args.users}"
        session = f"s{i % 2}"
        message = memory.add(
            "user", f"{args.name} says line {i} about topic {i % 7}", user, session
        )  # type: ignore[attr-defined]
        print(f"ack {user} {session} {message.message_id}", flush=True)
        if args.read_every and i % args.read_every == 0:
            memory.get_context(f"topic {i % 7}", user, session, max_tokens=300)  # type: ignore[attr-defined]
        if args.rate:
            time.sleep(1.0 / args.rate)
    if args.flush:
        assert memory.flush(120)  # type: ignore[attr-defined]
    memory.close()  # type: ignore[attr-defined]
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
