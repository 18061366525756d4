"""Print the tiermem server's OpenAPI document (what ``GET /openapi.json`` answers) as
JSON, from the FastAPI app itself: no server, no store on disk.

    python clients/typescript/scripts/openapi.py > openapi.json
"""

from __future__ import annotations

import json
import sys

from tiermem.memory import Memory
from tiermem.server import create_app


def main() -> int:
    with Memory(":memory:") as memory:
        app = create_app(memory, keys=":memory:", mcp=False)
        json.dump(app.openapi(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
