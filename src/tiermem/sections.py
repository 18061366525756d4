"""The base of every configuration section: a strict pydantic model (unknown keys are
errors, assignments are validated) where a section written with no keys under it means
all defaults. A leaf, so a tier's own settings (the planner's,
:mod:`tiermem.planner.settings`) live with the tier and :mod:`tiermem.config.model` imports them.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator


class KeyProblem(ValueError):
    """Raised by a validator about one key of its section (``key`` is relative to it)."""

    def __init__(self, key: str, problem: str, hint: str = "") -> None:
        super().__init__(problem)
        self.key, self.problem, self.hint = key, problem, hint


class Section(BaseModel):
    """Base of every section: unknown keys are errors, assignments are validated, and a
    section written with no keys under it (``synopsis:`` alone) means all defaults."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {
            key: _empty_value(cls, key) if value is None else value for key, value in data.items()
        }


def unwrap(annotation: Any) -> Any:
    """The model class inside ``X | None`` or ``list[X]``, else the annotation itself."""
    if get_origin(annotation) in (Union, types.UnionType, list):
        for arg in get_args(annotation):
            inner = unwrap(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return annotation


def _empty_value(model: type[BaseModel], key: str) -> Any:
    """What a key written with no value means: {} for a section, [] for a list, else None."""
    field = model.model_fields.get(key)
    if field is None:
        return None
    if get_origin(field.annotation) is list:
        return []
    inner = unwrap(field.annotation)
    return {} if isinstance(inner, type) and issubclass(inner, BaseModel) else None
