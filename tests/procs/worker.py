"""`tiermem worker` with a small real embedder, for tests of worker processes: the same
loop, health endpoint and signal handling as the command (``run_worker``), on a Memory
whose embedder is the tests' hash embedder (or a slow one, to be stopped mid-round).

    python tests/procs/worker.py STORE PORT [--lease S] [--delay S] [--grace S] [--batch N]

STORE is a SQLite path or a postgresql:// URI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: embedders


def main() -> int:
    from persistent import persistent

    from embedders import HashEmbedder, SlowEmbedder
    from tiermem.cli.worker import run_worker
    from tiermem.memory import Memory
    from tiermem.work.process import WorkerProcess

    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("port", type=int)
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per embedding call")
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    embedder = SlowEmbedder(args.delay, dimension=384) if args.delay else HashEmbedder(384)
    config = {
        "memory": {
            "persistent": persistent(args.store),
            "worker": {
                "lease_seconds": args.lease,
                "batch_size": args.batch,
                "background": False,
            },
        }
    }
    memory = Memory(config=config, embedder=embedder)
    return run_worker(WorkerProcess(memory, idle=0.05), "127.0.0.1", args.port, args.grace)


if __name__ == "__main__":
    raise SystemExit(main())
