"""A real process that reads one user's memory from a shared store, for forget tests.

    python tests/procs/reader.py STORE CONFIG_JSON USER

STORE is a SQLite path or a postgresql:// URI; CONFIG_JSON the ``memory`` settings
(synopsis cache...). Prints "ready", then for each line "QUERY" read on stdin one JSON
line: every text the user's faces show (context, search, synopsis, facts).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: embedders


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    store, settings, user = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]

    from persistent import persistent

    from embedders import HashEmbedder
    from tiermem.memory import Memory

    config = {"memory": {**settings, "persistent": persistent(store)}}
    memory = Memory(config=config, embedder=HashEmbedder(32))
    print("ready", flush=True)
    for line in sys.stdin:
        query = line.strip()
        seen = {
            "context": memory.get_context(query, user, "s1").text(),
            "search": [h.record.content for h in memory.search(query, user)],
            "synopsis": memory.synopsis(user).render(),
            "facts": [f.content for f in memory.facts(user)],
        }
        print(json.dumps(seen), flush=True)
    memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
