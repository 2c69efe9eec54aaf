"""The stable ids that name a node in every stage's JSON, in its SVG and in provenance links.

``h12`` an HLIR node, ``k5`` an LLIR kernel, ``r0`` the first fused region of an LLIR (in the order of
``luminal_lab.llir.regions.find_regions``), ``cu7`` the CUDA kernel that writes LLIR kernel 7. E-graph
ids are egglog's own (``IR-40`` an e-class, ``function-12-Op`` an e-node). The JupyterLab extension
reads these ids as they are.
"""

from __future__ import annotations

from typing import Protocol


class _Numbered(Protocol):
    id: int


class _Writer(Protocol):
    writes: int


def hlir_id(node: _Numbered | int) -> str:
    """The stable id of an HLIR node in JSON, SVG and provenance links: ``"h{id}"``."""
    return f"h{node if isinstance(node, int) else node.id}"


def kernel_id(kernel: _Numbered | int) -> str:
    """The stable id of an LLIR kernel in JSON, SVG and provenance links: ``"k{id}"``."""
    return f"k{kernel if isinstance(kernel, int) else kernel.id}"


def region_id(index: int) -> str:
    """The stable id of the ``index``-th fused region: ``"r{index}"``."""
    return f"r{index}"


def cuda_kernel_id(kernel: _Writer | int) -> str:
    """The stable id of a CUDA kernel: ``"cu{id of the LLIR kernel it writes}"``."""
    return f"cu{kernel if isinstance(kernel, int) else kernel.writes}"
