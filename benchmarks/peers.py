"""Peer libraries for benchmarks, each in its own cached virtualenv.

tiermem is measured beside other frameworks' memory classes. Those frameworks are
never project dependencies: each is installed at a pinned version in a virtualenv
of its own under ``$TMPDIR/tiermem-bench-venvs`` (kept between runs, keyed by peer
name, Python and requirements), and a benchmark runs a snippet there as a
subprocess that prints JSON.

    from peers import run_in_peer, PeerUnavailable
    try:
        out = run_in_peer("promptise", "emit({'n': ARGS['n'] + 1})", {"n": 1})
    except PeerUnavailable as exc:
        print("promptise not measured:", exc)

Also runnable: ``python benchmarks/peers.py install promptise langchain`` prepares
the caches, ``python benchmarks/peers.py list`` shows what is installed.

This module uses only the standard library, so benchmark code that imports it can
itself run inside a peer's virtualenv.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Python 3.12 from pyenv, for peers that do not install on 3.11.
PY312 = "pyenv:3.12.1"
#: torch for peers that embed with sentence-transformers: the CPU build, installed first.
TORCH_CPU = "torch==2.13.0"

# Lines printed by a snippet are free-form; the result is the last line that
# starts with this marker, so a peer's own prints or warnings cannot corrupt it.
RESULT_MARKER = "@@TIERMEM-BENCH-RESULT@@"

_PRELUDE = f"""\
import json as _json, sys as _sys
ARGS = _json.loads(_sys.stdin.read() or "null")
def emit(obj):
    _sys.stdout.write("\\n{RESULT_MARKER}" + _json.dumps(obj) + "\\n")
    _sys.stdout.flush()
"""


@dataclass(frozen=True)
class Peer:
    """A library measured against tiermem.

    Attributes:
        name: short key used on the command line (``promptise``).
        requirements: pip requirements, pinned to versions that install here
            (extra pins work around upstream incompatibilities).
        python: ``None`` for the interpreter running the benchmark, an executable
            path, or ``pyenv:VERSION`` for ``$(pyenv prefix VERSION)/bin/python``.
        probe: an import statement that proves the install works.
        preinstall: requirements installed in a pip run of their own before
            ``requirements`` (``torch==2.13.0``, so the resolver keeps the CPU
            wheel instead of pulling a CUDA build for a later dependency).
    """

    name: str
    requirements: tuple[str, ...]
    python: str | None = None
    probe: str = ""
    preinstall: tuple[str, ...] = ()


PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        Peer(
            "promptise",
            ("promptise==1.10.1",),
            probe="from promptise.runtime.conversation import ConversationBuffer",
        ),
        Peer(
            "langchain",
            ("langchain-core==1.7.2",),
            probe="from langchain_core.chat_history import InMemoryChatMessageHistory",
        ),
        Peer(
            "llamaindex",
            # ChatMemoryBuffer.to_string() raises PydanticSerializationError under
            # pydantic 2.14 ("'index_key' is expected to be an integer"); 2.11 works.
            ("llama-index-core==0.14.25", "pydantic==2.11.10"),
            probe="from llama_index.core.memory import ChatMemoryBuffer",
        ),
        Peer(
            "mem0",
            (
                "mem0ai==2.2.1",
                "faiss-cpu==1.15.1",
                "psycopg[binary]==3.3.9",
                "psycopg-pool==3.3.3",
                "sentence-transformers==6.2.0",
            ),
            probe="from mem0 import Memory; import faiss, psycopg_pool, sentence_transformers",
            preinstall=(TORCH_CPU,),
        ),
        Peer(
            "langgraph",
            (
                "langgraph==1.2.22",
                "langgraph-checkpoint-postgres==3.2.0",
                "psycopg[binary]==3.3.9",
                "sentence-transformers==6.2.0",
            ),
            probe="from langgraph.store.postgres import PostgresStore; import sentence_transformers",
            preinstall=(TORCH_CPU,),
        ),
        Peer(
            "llamaindex-vector",
            (
                "llama-index-core==0.14.25",
                "llama-index-embeddings-huggingface==0.8.0",
                "sentence-transformers==6.2.0",
            ),
            probe="from llama_index.embeddings.huggingface import HuggingFaceEmbedding",
            preinstall=(TORCH_CPU,),
        ),
        Peer("tinygent", ("tinygent==0.1.1019",), python=PY312, probe="import tinygent"),
        Peer("marsys", ("marsys==0.2.1",), python=PY312, probe="import marsys"),
    )
}


class PeerUnavailable(RuntimeError):
    """A peer could not be installed or started here; the message says why."""


class PeerError(RuntimeError):
    """A snippet run in a peer's virtualenv failed; the message has its stderr."""


def cache_root() -> Path:
    """Folder holding the peers' virtualenvs (``TIERMEM_BENCH_VENVS`` overrides it)."""
    override = os.environ.get("TIERMEM_BENCH_VENVS")
    return Path(override) if override else Path(tempfile.gettempdir()) / "tiermem-bench-venvs"


def resolve_python(spec: str | None) -> str:
    """Return the executable for a peer's ``python`` spec, or raise PeerUnavailable."""
    if spec is None:
        return sys.executable
    if not spec.startswith("pyenv:"):
        return spec
    version = spec.removeprefix("pyenv:")
    try:
        prefix = subprocess.run(
            ["pyenv", "prefix", version], capture_output=True, text=True, check=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise PeerUnavailable(f"Python {version} not found via pyenv: {exc}") from exc
    return str(Path(prefix) / "bin" / "python")


def _python_version(python: str) -> str:
    """``3.11.9``-style version of an interpreter (part of the cache key)."""
    try:
        out = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise PeerUnavailable(f"cannot run {python}: {exc}") from exc
    return out.stdout.strip()


def venv_dir(peer: Peer) -> Path:
    """Cache folder of a peer: name, Python version and a hash of its requirements."""
    python = resolve_python(peer.python)
    key = "\n".join((_python_version(python), *peer.preinstall, *peer.requirements))
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return cache_root() / f"{peer.name}-{digest}"


def _venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _tail(text: str, lines: int = 8) -> str:
    """Last meaningful lines of pip/python output (pip's index warnings dropped)."""
    kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING:")]
    return " | ".join(kept[-lines:])


def _run(cmd: Sequence[str], timeout: float, what: str) -> None:
    """Run an install step; raise PeerUnavailable with its output's tail on failure."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise PeerUnavailable(f"{what} timed out after {timeout:.0f} s") from exc
    except OSError as exc:
        raise PeerUnavailable(f"{what} could not start: {exc}") from exc
    if proc.returncode != 0:
        raise PeerUnavailable(f"{what} failed: {_tail(proc.stderr + proc.stdout)}")


def ensure_peer(name: str, *, timeout: float = 900.0, log: Any = None) -> Path:
    """Return the Python executable of ``name``'s virtualenv, installing it if needed.

    The install happens in a scratch folder renamed into place only once the peer
    imports, so an interrupted or failed install is never mistaken for a cached one.

    Raises:
        KeyError: ``name`` is not in :data:`PEERS`.
        PeerUnavailable: the interpreter, venv creation, pip or the import failed.
    """
    peer = PEERS[name]
    target = venv_dir(peer)
    if _venv_python(target).exists():
        return _venv_python(target)
    if log is not None:
        log(f"installing peer {name} ({', '.join(peer.requirements)}) into {target} ...")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-", dir=target.parent))
    try:
        _run([resolve_python(peer.python), "-m", "venv", str(scratch)], 120, "venv creation")
        py = str(_venv_python(scratch))
        if peer.preinstall:
            _run([py, "-m", "pip", "install", "-q", *peer.preinstall], timeout, "pip preinstall")
        _run([py, "-m", "pip", "install", "-q", *peer.requirements], timeout, "pip install")
        if peer.probe:
            _run([py, "-c", peer.probe], 120, f"import check ({peer.probe})")
        try:
            scratch.rename(target)
        except OSError:  # another process finished the same install first
            if not _venv_python(target).exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _venv_python(target)


def run_python(
    python: str | os.PathLike[str],
    code: str,
    args: Any = None,
    *,
    timeout: float = 600.0,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
) -> Any:
    """Run ``code`` under ``python`` and return what it passed to ``emit``.

    The snippet sees ``ARGS`` (``args`` round-tripped through JSON) and a function
    ``emit(obj)``; the last emitted object is returned.

    Raises:
        PeerError: the process failed, timed out or emitted nothing.
    """
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    full_env.pop("PYTHONPATH", None)
    if pythonpath:
        full_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    full_env.update(env or {})
    try:
        proc = subprocess.run(
            [str(python), "-c", _PRELUDE + code],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerError(f"snippet timed out after {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise PeerError(f"snippet exited {proc.returncode}: {_tail(proc.stderr, 15)}")
    results = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_MARKER)]
    if not results:
        raise PeerError(f"snippet emitted no result; stderr: {_tail(proc.stderr, 15)}")
    return json.loads(results[-1].removeprefix(RESULT_MARKER))


def run_in_peer(name: str, code: str, args: Any = None, *, timeout: float = 600.0) -> Any:
    """Run ``code`` in ``name``'s virtualenv (installed on first use); see :func:`run_python`.

    Raises:
        PeerUnavailable: the peer cannot be installed here.
        PeerError: the snippet failed.
    """
    return run_python(ensure_peer(name), code, args, timeout=timeout)


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install peers into their cached virtualenvs")
    install.add_argument("names", nargs="*", help=f"default: all of {', '.join(PEERS)}")
    sub.add_parser("list", help="show each peer's requirements and cache state")
    opts = parser.parse_args(argv)
    names = (opts.names if opts.command == "install" else []) or list(PEERS)
    failed = 0
    for name in names:
        if name not in PEERS:
            parser.error(f"unknown peer {name!r}; known: {', '.join(PEERS)}")
        peer = PEERS[name]
        try:
            path = venv_dir(peer)
            if opts.command == "install":
                ensure_peer(name, log=print)
            state = "installed" if _venv_python(path).exists() else "not installed"
            print(f"{name:11} {' '.join(peer.requirements):45} {state}: {path}")
        except PeerUnavailable as exc:
            failed += 1
            print(f"{name:11} {' '.join(peer.requirements):45} unavailable: {exc}")
    return 1 if failed and opts.command == "install" else 0


if __name__ == "__main__":
    sys.exit(_main())
