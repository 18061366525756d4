"""The TypeScript package built from its sources, once, for the Python suite and the
benchmark: ``npm ci`` when its ``node_modules`` is missing, ``npm run build`` when a
source is newer than ``dist/``; under a lock, as several test processes may ask at once
(one would read ``dist/`` while another's ``tsc`` rewrites it)."""

from __future__ import annotations

import fcntl
import subprocess
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
LOCK = Path(tempfile.gettempdir()) / "tiermem-typescript-build.lock"


def _stale(entry: Path) -> bool:
    if not entry.is_file():
        return True
    built = entry.stat().st_mtime
    sources = [*PACKAGE.joinpath("src").rglob("*.ts"), PACKAGE / "tsconfig.json"]
    return any(source.stat().st_mtime > built for source in sources)


def ensure_built() -> Path:
    """The package's entry point (``dist/index.js``), built from the current sources."""
    entry = PACKAGE / "dist" / "index.js"
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (PACKAGE / "node_modules").is_dir():
            _npm("ci", "--no-audit", "--no-fund")  # its prepare builds dist/
        if _stale(entry):
            _npm("run", "build")
    return entry


def _npm(*args: str) -> None:
    done = subprocess.run(["npm", *args], cwd=PACKAGE, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(
            f"npm {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
