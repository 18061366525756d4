"""tiermem away from this folder, as docs/install.md says: ``python -m build`` makes an sdist
and, from it, a wheel, both carrying the package data (the embedder's tokenizer, the
inspector's page); the wheel installs with ``[server]`` into a fresh virtualenv outside the
source tree, and there the demo runs, ``tiermem serve`` answers a request, and the client
talks to it. The dependencies come from the configured package indexes (at the locked
versions, usually from pip's cache); nothing of the source tree is on the path. Slow: about
a minute and a half.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import httpx
import pytest

from liveserver import serve_process

ROOT = Path(__file__).parents[1]
DATA = [
    "tiermem/embeddings/data/all-MiniLM-L6-v2/tokenizer.json",
    "tiermem/embeddings/data/all-MiniLM-L6-v2/LICENSE",
    "tiermem/embeddings/data/all-MiniLM-L6-v2/NOTICE",
    "tiermem/server/ui/index.html",
    "tiermem/server/ui/app.js",
    "tiermem/server/ui/style.css",
    "tiermem/server/ui/docs.html",
    "tiermem/server/ui/docs.js",
    "tiermem/py.typed",
]
CLIENT = """
import sys
from tiermem.client import MemoryClient

with MemoryClient(sys.argv[1]) as client:
    client.add("user", "I adopted a greyhound named Pixel.", "ana", "s1")
    client.remember("Ana prefers tea to coffee.", "ana", "preference")
    assert client.flush(60)
    print(client.search("what does Ana drink?", "ana", k=1)[0].record.content)
    print(client.get_context("What is my dog called?", "ana", "s1").messages)
"""

pytestmark = pytest.mark.slow


def run(argv: list[str | Path], env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(
        [str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_wheel_installs_and_serves_outside_the_source_tree(tmp_path: Path) -> None:
    tools = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # pip's settings
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], tools, tmp_path)
    (wheel,) = dist.glob("tiermem-*.whl")
    (sdist,) = dist.glob("tiermem-*.tar.gz")
    assert set(DATA) <= set(zipfile.ZipFile(wheel).namelist())
    top = sdist.name.removesuffix(".tar.gz")
    with tarfile.open(sdist) as archive:
        assert {f"{top}/src/{name}" for name in DATA} <= set(archive.getnames())

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], tools, tmp_path)
    lock = ROOT / "requirements-dev.lock"  # the versions the suite runs on
    run([venv / "bin" / "pip", "install", "-q", "-c", lock, f"{wheel}[server]"], tools, tmp_path)

    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    user = {  # a user's shell: the virtualenv's commands, an empty home, no network models
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "HF_HUB_OFFLINE": "1",
        "COLUMNS": "80",
    }
    where = run(
        [venv / "bin" / "python", "-c", "import tiermem; print(tiermem.__file__)"], user, home
    )
    assert where.startswith(str(venv)), where  # the wheel's copy, not the source tree

    out = run(["tiermem", "demo"], user, home)
    assert "Buffer: the 6 most recent of 17 messages" in " ".join(out.split())

    with serve_process(["tiermem", "serve"], user, cwd=home) as (url, server):
        message = {"role": "user", "content": "My sister Lena lives in Graz."}
        added = httpx.post(url + "/v1/messages", json={"user_id": "ana", "messages": [message]})
        assert added.status_code == 201 and len(added.json()["ids"]) == 1, added.text
        assert "Start here" in httpx.get(url + "/ui").text  # the inspector, from the wheel

        out = run([venv / "bin" / "python", "-c", CLIENT, url], user, home)
        first, context = out.splitlines()
        assert first == "Ana prefers tea to coffee." and "Pixel" in context
    assert server.returncode in (0, -15), server.returncode  # SIGTERM: a clean stop
