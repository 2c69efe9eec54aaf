"""The training path's tracing, for the torch.compile backend (``compiler.dynamo``): a graph's forward and backward
through AOTAutograd (``through_aot``), and concrete stand-ins for the backward's inputs, which it is compiled on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ..frontends.export import aot_decompositions


def is_concrete(value: Any) -> bool:
    """Whether ``value`` is a real value, not one of dynamo's fake tensors."""
    if isinstance(value, torch.Tensor):
        return not isinstance(value, FakeTensor)
    return isinstance(value, (int, float, bool)) or value is None


def through_aot(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], fw_compiler: Callable[..., Any],
                bw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """``gm``'s forward and backward as the training path traces them, handed to the two compilers (the backward's
    at once, not on the first ``backward()``): AOTAutograd with ``aot_decompositions`` and the min-cut partitioner,
    attention as its math (matmuls, softmax), whose backward is those ops' own: the CPU flash kernel's backward is
    one fused op with no translation."""
    from torch._functorch import config as functorch_config
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with functorch_config.patch(force_non_lazy_backward_lowering=True), sdpa_kernel([SDPBackend.MATH]):
        return aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                                     decompositions=aot_decompositions(),
                                     partition_fn=min_cut_rematerialization_partition)


def same_shapes(given: Sequence[Any], traced: Sequence[Any]) -> bool:
    """Whether ``given`` are concrete values of the ``traced`` inputs, one for one (AOTAutograd may drop or merge
    some)."""
    return len(given) == len(traced) and all(
        is_concrete(g) and (not isinstance(t, torch.Tensor) or (
            isinstance(g, torch.Tensor) and tuple(g.shape) == hints(t.shape) and g.dtype == t.dtype))
        for g, t in zip(given, traced, strict=True))


def hints(sizes: Sequence[Any]) -> tuple[int, ...]:
    """Sizes as numbers, a symbolic one as its example value, without the guard that ``int()`` would add."""
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    return tuple(optimization_hint(size) for size in sizes)


def stand_ins(inputs: Sequence[Any]) -> list[Any]:
    """Concrete values of the shapes and dtypes of (fake) ``inputs``: seeded normal floats, zeros of other dtypes
    (valid indices, false masks); a size as its value."""
    generator = torch.Generator().manual_seed(0)

    def stand_in(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return hints([value])[0] if isinstance(value, torch.SymInt) else value
        shape = hints(value.shape)
        if value.dtype.is_floating_point:
            return torch.randn(shape, generator=generator).to(value.dtype)
        return torch.zeros(shape, dtype=value.dtype)

    return [stand_in(value) for value in inputs]
