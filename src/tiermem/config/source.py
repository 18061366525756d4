"""Where a configuration comes from: a YAML file, YAML text or a dict, with ``${NAME}``,
``${NAME:-default}`` and ``${{ secrets.NAME }}`` replaced from the environment or a
secrets file (``KEY=VALUE`` lines or a YAML mapping)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tiermem.errors import ConfigError

SECRETS_FILE_ENV = "TIERMEM_SECRETS_FILE"

_REFERENCE = re.compile(
    r"\$\$(?=\{)"  # escaped: $${ is a literal ${
    r"|\$\{\{\s*secrets\.(?P<secret>[A-Za-z_][A-Za-z0-9_]*)\s*\}\}"
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
)
_DOTENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")


def read_source(source: object) -> dict[str, Any]:
    """The raw mapping from a path, YAML text or dict."""
    if source is None:
        return {}
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and _looks_like_path(source)
    ):
        path = Path(os.fspath(source)).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("path", f"cannot read {str(path)!r}: {exc.strerror}") from exc
        return _parse_yaml(text, str(path))
    if isinstance(source, str):
        return _parse_yaml(source, "YAML text")
    raise ConfigError(
        "source", f"expected a path, YAML text or a dict, got {type(source).__name__}"
    )


def _looks_like_path(text: str) -> bool:
    return Path(text).expanduser().is_file() or text.endswith((".yaml", ".yml", ".json"))


def _parse_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(
            "yaml", f"{where}{at}: {problem}", "quote values that contain ': ', '{' or '#'"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            "yaml", f"{where} is a {type(data).__name__}, not a mapping", "start with 'memory:'"
        )
    return data


def secrets_path(given: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    """The secrets file: ``given``, else ``$TIERMEM_SECRETS_FILE``, else None."""
    value = given if given is not None else env.get(SECRETS_FILE_ENV)
    return Path(value).expanduser() if value else None


def read_secrets_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines (``#`` comments, optional ``export`` and quotes) or a YAML mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            "secrets_file",
            f"cannot read {str(path)!r}: {exc.strerror}",
            f"fix secrets_file= or ${SECRETS_FILE_ENV}",
        ) from exc
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and all(_DOTENV_LINE.match(ln) for ln in lines):
        return {m[1]: _unquote(m[2].strip()) for m in map(_DOTENV_LINE.match, lines) if m}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if data is None and not lines:
        return {}
    if not isinstance(data, dict) or not all(
        isinstance(v, (str, int, float, bool)) for v in data.values()
    ):
        raise ConfigError(
            "secrets_file", f"{str(path)!r} is neither KEY=VALUE lines nor a flat YAML mapping"
        )
    return {str(k): str(v) for k, v in data.items()}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value.split(" #", 1)[0].rstrip()


class Resolver:
    """Replaces references in every string value; remembers which keys held secrets."""

    def __init__(self, env: Mapping[str, str], secrets_path: Path | None) -> None:
        self.env = env
        self.secrets = read_secrets_file(secrets_path) if secrets_path else {}
        self.secrets_path = secrets_path
        self.secret_paths: set[str] = set()
        self.used: set[str] = set()

    def interpolate(self, value: Any, loc: tuple[str | int, ...]) -> Any:
        if isinstance(value, dict):
            return {k: self.interpolate(v, (*loc, str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [self.interpolate(v, (*loc, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "$" in value:
            return _REFERENCE.sub(lambda m: self._replace(m, loc), value)
        return value

    def _replace(self, match: re.Match[str], loc: tuple[str | int, ...]) -> str:
        name = match["secret"] or match["name"]
        if name is None:
            return "$"  # the escape $${
        if match["secret"]:
            self.secret_paths.add(key_path(loc))
        found = self.env.get(name, self.secrets.get(name))
        if found is None and match["default"] is not None:
            return str(match["default"])
        if found is None:
            where = (
                f"the secrets file {str(self.secrets_path)!r}"
                if self.secrets_path
                else (f"a secrets file (secrets_file= or ${SECRETS_FILE_ENV})")
            )
            raise ConfigError(
                key_path(loc),
                f"needs {'the secret' if match['secret'] else 'the variable'} {name}, "
                "which is not set",
                f"export {name}=... or add {name}=... to {where}",
            )
        self.used.add(name)
        return found


def key_path(loc: tuple[str | int, ...]) -> str:
    """A key path as written: ``memory.persistent.provider``, ``llm.models[0].name``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
