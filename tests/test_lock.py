"""The pinned development set: the README installs it, and it covers what `.[dev]` needs."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[1]
LOCK = ROOT / "requirements-dev.lock"


def _pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements-dev.lock: {line!r} is not an exact pin"
            pins[canonicalize_name(name)] = version
    return pins


def _dev_requirements() -> list[Requirement]:
    """Every requirement `.[dev]` pulls in, through the self-referencing extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras, seen, out = project["optional-dependencies"], set(), []
    todo = ["dev"]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in extras[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == "tiermem":
                todo.extend(req.extras)
            else:
                out.append(req)
    return out + [Requirement(t) for t in project["dependencies"]]


def test_readme_and_ci_install_the_lock() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"^pip install .*pytest$", readme, re.M)
    assert command and "-c requirements-dev.lock" in command.group(0)
    assert "requirements-dev.lock" in (ROOT / ".ci" / "lock").read_text()


def test_lock_pins_every_development_requirement_within_its_range() -> None:
    pins = _pins()
    for req in _dev_requirements():
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in .[dev] but not pinned in requirements-dev.lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} in the lock is outside pyproject.toml's {req.specifier}"
        )


def test_installed_development_set_is_the_locked_one() -> None:
    """CI runs on exactly the pinned versions (a drifted install shows up here), as pip
    reads a pin: ``==2.13.0`` is met by the local CPU build ``2.13.0+cpu``."""
    drift = []
    for name, version in _pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a platform-specific pin this machine does not need
        if not SpecifierSet(f"=={version}").contains(installed, prereleases=True):
            drift.append(f"{name}: installed {installed}, locked {version}")
    assert not drift, "reinstall with the README's second command:\n" + "\n".join(drift)
