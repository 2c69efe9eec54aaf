"""Opaque ops: a torch op with no translation, run through torch as it is (as inductor's fallback kernels run one).

An ``Opaque`` node reads its operands through their views, as any node does, and computes one contiguous tensor by
calling its ``OpaqueCall`` on them as torch tensors, on the device they are on. It is never rewritten, fused or
searched: the e-graph holds it as one kernel op, and every stage names it (``Opaque aten.foo.default``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.dtypes import DType
from ..core.errors import LuminalError


@dataclass(frozen=True, eq=False)
class OpaqueCall:
    """A torch op as a call: ``run`` takes the operands as torch tensors, in order, and returns one tensor; ``name``
    is the op's (``aten.foo.default``) and ``where`` the user's line that called it."""

    name: str
    run: Callable[[Sequence[Any]], Any]
    where: str = ""

    def __str__(self) -> str:
        return self.name


def on_arrays(call: OpaqueCall, arrays: Sequence[np.ndarray], shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """``call`` on numpy arrays (torch tensors over their memory), its result as numpy, checked to be the ``shape``
    and ``dtype`` the graph expects."""
    from ..core.arrays import to_numpy, to_torch  # numpy's bf16 (ml_dtypes) loads in half a second: when first run

    result = call.run([to_torch(array) for array in arrays])
    array = to_numpy(result)
    if array.shape != tuple(shape) or array.dtype != dtype.numpy:
        raise LuminalError(f"opaque {call.name}{f' (at {call.where})' if call.where else ''} returned "
                           f"{list(array.shape)} {array.dtype}, where the graph expects {list(shape)} {dtype.value}")
    return array
