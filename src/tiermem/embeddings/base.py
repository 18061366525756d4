"""The Embedder protocol every embedding provider implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dimension)`` float32 array of L2-normalized rows.

    ``model_id`` names the model (``"local/all-MiniLM-L6-v2"``) so stores can tell
    vectors of different models apart; ``dimension`` is the width of each row.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    async def aembed(self, texts: Sequence[str]) -> np.ndarray: ...
