"""Unrolling: the LLIR of a rolled graph (``luminal_lab.hlir.rolling``) with its layer's kernels run for every copy.

A genome of a rolled graph picks kernels for one copy of the layer. ``unroll`` repeats them: a kernel *varies by
copy* when it reads, directly or through other kernels, a carried ``LoopIn`` marker or one of the layer's
parameters; every such kernel is made once per copy, copy ``c`` reading copy ``c``'s parameters and, where copy 0
reads a carried ``LoopIn``, the value copy ``c - 1`` gives its ``LoopOut`` (copy 0 reads what the ``LoopIn`` reads).
An output the layer gives per copy (``Rolling.output_copies``) is made once per copy too, each the program's output
of that copy.
A kernel of the layer that varies by nothing (a mask built from an Iota, a table from shared inputs) is made once
and read by every copy. The loop markers themselves are dropped (each is a contiguous copy of its source, so a
reader reads the source through its own view), and so are the rolled graph's extra outputs that kept them.

A copy's kernels take its sizes where dynamo named them apart from copy 0's (``Rolling.renames``), and a kernel sized
by such a size varies by copy.

Kernels come out in a topological order: those before the layer and those it reads, then copy 0, copy 1, ..., then
those after the layer. Each kernel of a copy has ``copy`` set (``Kernel.copy``); its e-class and HLIR nodes are
copy 0's, the rolled graph's.

``runs`` says how often each kernel of the rolled LLIR runs once unrolled (``copies``, 1 or 0), so that the time of
the rolled LLIR, which runs one copy with its markers, scales to the unrolled program's without running it.
"""

from __future__ import annotations

import dataclasses

from ..core.errors import LuminalError
from ..core.shape_tracker import ShapeTracker
from ..hlir.rolling import Rolling
from .llir import LLIR, Kernel


def unroll(llir: LLIR, rolling: Rolling) -> LLIR:
    """``llir``, a genome's kernels for the rolled graph, with its layer's kernels repeated for every copy."""
    return _Unroll(llir, rolling).run()


def runs(llir: LLIR, rolling: Rolling) -> dict[int, int]:
    """Kernel id of ``llir`` (a genome's kernels for the rolled graph) -> how many times it runs once unrolled:
    ``rolling.copies`` for a kernel that varies by copy, 0 for a loop marker or an extra output, else 1."""
    plan = _Unroll(llir, rolling)
    return {k.id: 0 if plan.skipped(k) else rolling.copies if k.id in plan.varies else 1 for k in llir.kernels}


def _identity(view: ShapeTracker) -> bool:
    """Whether ``view`` reads its buffer as it lies (a size-1 dimension may have any stride)."""
    plain = ShapeTracker.contiguous(view.dims)
    return not view.is_masked and all(d == 1 or s == p for d, s, p in zip(view.dims, view.strides, plain.strides))


class _Unroll:
    def __init__(self, llir: LLIR, rolling: Rolling):
        self.llir, self.rolling = llir, rolling
        kernels = llir.kernels
        marker_of = {}  # kernel id -> the rolled id of the loop marker it computes
        for k in kernels:
            marks = rolling.markers.intersection(k.hlir)
            if marks:
                if len(marks) > 1 or k.op != "Cast" or len(k.sources) != 1 or not _identity(k.sources[0][1]):
                    raise LuminalError(f"unroll: the loop markers {sorted(marks)} became {k!r}, not one contiguous "
                                       "copy each")
                marker_of[k.id] = min(marks)
        self.marker_of = marker_of
        kernel_of = {mark: kid for kid, mark in marker_of.items()}
        # a carried LoopIn kernel -> the LoopOut kernel whose value later copies read instead
        self.carry = {kid: kernel_of.get(rolling.loop_in[mark]) for kid, mark in marker_of.items()
                      if rolling.loop_in.get(mark) is not None}
        if None in self.carry.values():
            raise LuminalError("unroll: a carried value's LoopOut has no kernel in this LLIR")
        self.loop_out = {kid for kid, mark in marker_of.items() if mark in rolling.loop_out}
        # (rolled output index, copy or None) -> the program's output index
        self.program_output = {at: i for i, at in enumerate(rolling.output_copies)}
        per_copy = {index for index, copy in rolling.output_copies if copy is not None}
        params = rolling.params
        varies, after = set(), set()
        for k in kernels:  # kernels come in a topological order
            reads = [s for s, _ in k.sources]
            if k.id in self.carry or (k.op == "Input" and k.arg in params) or (k.op == "Output" and k.arg in per_copy) \
                    or any(s in varies and s not in self.loop_out for s in reads) or \
                    (k.id not in marker_of and rolling.sized_by_copy((k.shape, k.sources, k.arg))):
                varies.add(k.id)
            elif any(s in self.loop_out or s in after for s in reads):
                after.add(k.id)
        self.varies, self.after = varies, after

    def skipped(self, k: Kernel) -> bool:
        """Whether ``k`` is left out of the unrolled LLIR: a loop marker, or one of the rolled graph's extra outputs."""
        return k.id in self.marker_of or (k.op == "Output" and k.arg >= self.rolling.outputs)

    def run(self) -> LLIR:
        llir, rolling = self.llir, self.rolling
        out: list[Kernel] = []
        new_id: list[dict[int, int]] = [{} for _ in range(rolling.copies)]  # per copy: kernel id -> its new id
        shared: dict[int, int] = {}  # kernels made once: id -> new id

        def resolve(kid: int, copy: int) -> int:
            while kid in self.marker_of:  # a marker stands for its source
                if kid in self.carry and copy > 0:
                    kid, copy = self.carry[kid], copy - 1
                else:
                    kid = llir.kernels[kid].sources[0][0]
            return new_id[copy][kid] if kid in self.varies else shared[kid]

        def emit(k: Kernel, copy: int | None, sources_copy: int) -> int:
            sources = tuple((resolve(s, sources_copy), rolling.renamed(tracker, copy)) for s, tracker in k.sources)
            arg = rolling.renamed(k.arg, copy)
            if k.op == "Input" and k.arg in rolling.params:
                arg = rolling.params[k.arg][copy]
            elif k.op == "Output":
                arg = self.program_output[k.arg, copy]
            out.append(dataclasses.replace(k, id=len(out), sources=sources, shape=rolling.renamed(k.shape, copy),
                                           arg=arg, copy=copy))
            return len(out) - 1

        kernels = [k for k in llir.kernels if not self.skipped(k)]
        for k in kernels:
            if k.id not in self.varies and k.id not in self.after:
                shared[k.id] = emit(k, None, 0)
        for copy in range(rolling.copies):
            for k in kernels:
                if k.id in self.varies:
                    new_id[copy][k.id] = emit(k, copy, copy)
        for k in kernels:
            if k.id in self.after:
                shared[k.id] = emit(k, None, rolling.copies - 1)
        outputs = [shared[llir.outputs[index]] if copy is None else new_id[copy][llir.outputs[index]]
                   for index, copy in rolling.output_copies]
        return LLIR(out, outputs, llir.genome_hash)
