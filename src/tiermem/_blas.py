"""One BLAS thread for the small matrix products on the hot path.

A matrix-vector product is memory-bound, and waking BLAS threads on a busy machine costs
more (p95 8 ms for a 1.5k x 384 product on two loaded cores) than it saves (2.9 ms
single-threaded for 50k x 384).
"""

from __future__ import annotations

from typing import Any

from threadpoolctl import ThreadpoolController

_CONTROLLER = ThreadpoolController()


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS uses one thread."""
    return _CONTROLLER.limit(limits=1, user_api="blas")
