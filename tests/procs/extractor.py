"""A real process that extracts facts from a shared store, for crash and several-process
tests: it extracts every given session of one user (in the order given) and exits.

    python tests/procs/extractor.py STORE USER SESSION [SESSION ...] [--llm URL] [--lease S]

STORE is a SQLite path or a postgresql:// URI; with --llm the facts come from the
OpenAI-protocol server at URL, else from the offline extractor. Prints "ready" once the
store is open, "extracted <session> <n>" per session and "done" at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: embedders


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("user")
    parser.add_argument("sessions", nargs="+")
    parser.add_argument("--llm", default=None)
    parser.add_argument("--lease", type=float, default=60.0)
    args = parser.parse_args()

    from persistent import persistent

    from embedders import HashEmbedder
    from tiermem.llm import OpenAIModel
    from tiermem.memory import Memory

    facts = {"enabled": True, "lease_seconds": args.lease, "extractor": "offline"}
    llm = None
    if args.llm:
        facts["extractor"] = "llm"
        llm = OpenAIModel("fake", base_url=args.llm, api_key="k", max_retries=0, timeout=60)
    config = {"memory": {"persistent": persistent(args.store), "facts": facts}}
    memory = Memory(config=config, embedder=HashEmbedder(384), llm=llm)
    print("ready", flush=True)
    for session in args.sessions:
        written = memory.extract_facts(args.user, session)
        print(f"extracted {session} {len(written)}", flush=True)
    memory.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
