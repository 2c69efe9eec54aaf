"""Random HLIR graphs for fuzzing, and ``check_genomes``, which runs random genomes of one against the reference at
each binding of its symbolic dimension (tests/runtime/test_fuzz.py runs 50 graphs, benchmarks/fuzz.py 1,000, each with
up to 10 genomes).

``graphs()`` draws a program of steps over a pool of tensors: elementwise chains (bounded unary ops, broadcast
binaries), row reductions (sum, max, softmax), contractions (``@`` against a new input, broadcast or batched, a
tensor against its transpose, two tensors of the pool), views (permute, slice, pad, flatten, expand), gathers (rows
taken by a range, reversed or not) and concats. About a third of the graphs give one axis of ``x0`` the symbolic
size ``s``, bound to three sizes in 1..6; a slice or a gather stays within the smallest. Each step is a line of
Python, run as drawn, so a failure prints the program that builds its graph (run it after ``import luminal_lab as
ll``).

Values stay finite: the unary ops used are bounded (sin, exp of a sine, sqrt of 1 + x^2, a reciprocal of 1 + x^2),
inputs are uniform in [-1, 1] and the axes a contraction sums are short, so any genome's kernels can be compared
with the reference. Graphs of an int dtype use no unary op and no softmax; their inputs span the whole
range of the type, so arithmetic wraps.
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import luminal_lab as ll
from luminal_lab.core.errors import Refused
from luminal_lab.egraph import EGraph
from luminal_lab.hlir.elementwise import broadcast_shapes
from luminal_lab.hlir.reference import ReferenceRuntime
from luminal_lab.llir.genome import ChoiceSpace, children, extract
from luminal_lab.runtime.cpu import CPURuntime
from luminal_lab.search.search import compare

UNARY = {
    "sin": "{t}.sin()",
    "exp_sin": "{t}.sin().exp()",
    "soft_sqrt": "({t} * {t} + 1).sqrt()",
    "soft_recip": "({t} * {t} + 1).reciprocal()",
    "times_one": "{t} * 1.0",
    "plus_zero": "{t} + 0.0",
    "relu": "{t}.relu()",
}

KINDS = ("unary", "binary", "reduce", "matmul", "view", "gather", "softmax", "concat")
INT_KINDS = ("binary", "reduce", "matmul", "view", "gather", "concat")
SIZES = range(1, 7)  # the sizes a symbolic dimension is bound to


@dataclass
class Case:
    """A fuzzed graph, the Python that builds it, and its inputs at each binding of its symbolic dimension (one
    binding, ``{}``, for a graph without one)."""

    graph: ll.Graph
    program: str
    runs: list[tuple[dict[str, int], dict[str, np.ndarray]]]


class _Program:
    """A graph built a line of Python at a time; each line names one tensor of the pool (inputs ``x0``, ``x1``, ...;
    the others ``t0``, ``t1``, ...). ``least`` binds ``s`` to its smallest size."""

    def __init__(self, dtype: ll.DType, least: dict[str, int]) -> None:
        self.graph = ll.Graph()
        self.scope: dict[str, object] = {"g": self.graph, "ll": ll, "dtype": dtype}
        self.lines = [f"g, dtype = ll.Graph(), ll.{dtype.value}"]
        self.pool: list[str] = []
        self.inputs = 0
        self.least = least

    def add(self, text: str) -> str:
        """Run ``text`` and name its tensor."""
        name = f"t{len(self.pool) - self.inputs}"
        self.scope[name] = eval(text, self.scope)  # the generator's own text
        self.lines.append(f"{name} = {text}")
        self.pool.append(name)
        return name

    def input(self, shape: str) -> str:
        """A new input of the shape ``shape`` (Python text) and the graph's dtype."""
        name = f"x{self.inputs}"
        self.scope[name] = eval(f'g.tensor({shape}, "{name}", dtype)', self.scope)
        self.lines.append(f'{name} = g.tensor({shape}, "{name}", dtype)')
        self.pool.append(name)
        self.inputs += 1
        return name

    def tensor(self, name: str) -> ll.GraphTensor:
        return self.scope[name]

    def output(self, tensor: str, name: str) -> None:
        self.tensor(tensor).output(name)
        self.lines.append(f'{tensor}.output("{name}")')

    def smallest(self, name: str, axis: int) -> int:
        """The size of ``axis`` of ``name`` at the smallest binding (every size grows with ``s``)."""
        return int(self.tensor(name).shape[axis].evaluate(self.least))


def _fits(a: ll.GraphTensor, b: ll.GraphTensor) -> bool:
    """Whether ``a`` and ``b`` broadcast together."""
    try:
        broadcast_shapes(a.shape, b.shape)
    except ll.ShapeError:
        return False
    return True


def _contracts(a: ll.GraphTensor, b: ll.GraphTensor) -> bool:
    """Whether ``a @ b`` fits: ``a``'s last axis is ``b``'s second to last, and the batch axes broadcast."""
    if a.ndim < 1 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        return False
    try:
        broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ll.ShapeError:
        return False
    return True


@st.composite
def graphs(draw, max_ops: int = 8, dtype: ll.DType = ll.f32) -> Case:
    """A random graph with one or two outputs, with seeded inputs of ``dtype`` at each binding of ``s``."""
    rank = draw(st.integers(1, 3))
    dims: list[int | str] = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    bindings: list[dict[str, int]] = [{}]
    if draw(st.booleans()):
        dims[draw(st.integers(0, rank - 1))] = "s"
        bindings = [{"s": size} for size in sorted(draw(st.sets(st.sampled_from(SIZES), min_size=3, max_size=3)))]
    p = _Program(dtype, bindings[0])
    p.input(repr(tuple(dims)))
    if draw(st.booleans()):
        p.input("x0.shape[-1:]")  # broadcasts against x0
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(KINDS if dtype.is_float else INT_KINDS))
        t = draw(st.sampled_from(p.pool))
        tensor = p.tensor(t)
        if kind == "unary":
            p.add(UNARY[draw(st.sampled_from(sorted(UNARY)))].format(t=t))
        elif kind == "binary":
            other = draw(st.sampled_from([o for o in p.pool if _fits(tensor, p.tensor(o))]))
            op = draw(st.sampled_from(["+", "*", "-", "max"]))
            p.add(f"ll.maximum({t}, {other})" if op == "max" else f"{t} {op} {other}")
        elif kind == "reduce" and tensor.ndim >= 1:
            axis, keep = draw(st.integers(0, tensor.ndim - 1)), draw(st.booleans())
            p.add(f"{t}.{draw(st.sampled_from(['sum', 'max']))}({axis}, keepdim={keep})")
        elif kind == "matmul" and tensor.ndim >= 1:
            _contraction(draw, p, t)
        elif kind == "view" and tensor.ndim >= 1:
            _view(draw, p, t)
        elif kind == "gather" and tensor.ndim >= 1:
            size = p.smallest(t, 0)
            start = draw(st.integers(0, size - 1))
            if tensor.shape[0].is_num and draw(st.booleans()):
                rows = f"g.arange({size - start}, start={size - 1}, step=-1)"  # reversed, down to start
            elif tensor.shape[0].is_num:
                rows = f"g.arange({draw(st.integers(1, size - start))}, start={start})"
            else:
                rows = f"g.arange({t}.shape[0] - {start}, start={start})"  # a symbolic count
            p.add(f"{t}.take({rows}, axis=0)")
        elif kind == "softmax" and tensor.ndim >= 1:
            p.add(f"{t}.softmax(-1)")
        elif kind == "concat" and tensor.ndim >= 1:
            other = f"{t}.sin()" if dtype.is_float else f"{t} * 3"
            p.add(f"ll.concat([{t}, {other}], axis={tensor.ndim - 1})")
    p.output(p.pool[-1], "out")
    if len(p.pool) > 3 and draw(st.booleans()):
        p.output(p.pool[len(p.pool) // 2], "mid")
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    runs = [(b, {name: _values(rng, [int(d.evaluate(b)) for d in spec.node.shape], dtype)
                 for name, spec in p.graph.inputs.items()}) for b in bindings]
    return Case(p.graph, "\n".join(p.lines), runs)


def _contraction(draw, p: _Program, t: str) -> None:
    """``t @ w`` for a new input ``w`` (broadcast over ``t``'s batch axes, or batched as they are), ``t`` against
    its transpose, or ``t`` against a tensor of the pool that fits."""
    tensor = p.tensor(t)
    partners = [o for o in p.pool if _contracts(tensor, p.tensor(o))]
    variant = draw(st.sampled_from(["input", "batched", "transpose", "pool"]))
    if variant == "transpose" and tensor.ndim >= 2:
        p.add(f"{t} @ {t}.transpose(-1, -2)")
    elif variant == "pool" and partners:
        p.add(f"{t} @ {draw(st.sampled_from(partners))}")
    else:
        batch = f"*{t}.shape[:-2], " if variant == "batched" and tensor.ndim >= 3 else ""
        w = p.input(f"({batch}{t}.shape[-1], {draw(st.integers(1, 4))})")
        p.add(f"{t} @ {w}")


def _view(draw, p: _Program, t: str) -> None:
    """A permute (made contiguous by ``* 1.0``), a slice of the last axis, a pad of it, a flatten or an expand."""
    tensor = p.tensor(t)
    choice = draw(st.sampled_from(["permute", "slice", "pad", "flatten", "expand"]))
    if choice == "permute":
        p.add(f"{t}.permute({tuple(draw(st.permutations(range(tensor.ndim))))}) * 1.0")
    elif choice == "slice":
        size = p.smallest(t, -1)
        start = draw(st.integers(0, size - 1))
        stop = None if not tensor.shape[-1].is_num and draw(st.booleans()) else draw(st.integers(start + 1, size))
        p.add(f"{t}.slice(-1, {start}, {stop})")
    elif choice == "pad":
        widths = [(0, 0)] * (tensor.ndim - 1) + [(draw(st.integers(0, 2)), draw(st.integers(0, 2)))]
        p.add(f"{t}.pad({widths})")
    elif choice == "flatten":
        p.add(f"{t}.flatten()")
    else:
        p.add(f"{t}.unsqueeze(0).expand(2, *{t}.shape)")


def _values(rng: np.random.Generator, shape: list[int], dtype: ll.DType) -> np.ndarray:
    """Uniform in [-1, 1] for a float, over the whole range of an int type."""
    if dtype.is_float:
        return rng.uniform(-1, 1, shape).astype(dtype.numpy)
    return rng.integers(dtype.lowest, dtype.highest, shape, endpoint=True).astype(dtype.numpy)


GENOMES_PER_GRAPH = 6


@dataclass
class Tally:
    """What ``check_genomes`` saw. A run is one genome at one binding, compared with the reference; a crash is an
    exception other than ``Refused`` (building the e-graph, extracting, compiling or running); each mismatch and
    crash is described in ``failures`` (the program, the binding, the genome and the reason)."""

    genomes: int = 0
    runs: int = 0
    refused: int = 0
    mismatches: int = 0
    crashes: int = 0
    failures: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for name in ("genomes", "runs", "refused", "mismatches", "crashes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures.extend(other.failures)


def check_genomes(case: Case, genomes: int = GENOMES_PER_GRAPH, seed: int = 0) -> Tally:
    """Run ``genomes`` random genomes (and mutants of them) of ``case``'s graph at each of its bindings, each against
    the reference runtime; count what happened."""
    tally = Tally()

    def crash(where: str) -> None:
        tally.crashes += 1
        tally.failures.append(f"crash {where}, check_genomes seed={seed}:\n{traceback.format_exc(limit=-4)}"
                              f"{case.program}")

    egraph = EGraph(case.graph)
    try:
        expected = [[ReferenceRuntime(case.graph).run(inputs, b)[name] for name in case.graph.outputs]
                    for b, inputs in case.runs]
        egraph.saturate()
        space = ChoiceSpace(egraph.snapshot, case.graph)
        rng = random.Random(seed)
        tried = [space.random_genome(rng.randrange(2**32)) for _ in range(genomes // 2)]
        seen = {g.hash for g in tried}
        for parent in list(tried):
            tried.extend(children(parent, 1, 3, rng, seen))
        for index, genome in enumerate(tried[:genomes]):
            tally.genomes += 1
            where = f"genome {index} ({genome.hash:016x})"
            try:
                runtime = CPURuntime(extract(genome))
            except Refused:
                tally.refused += 1
                continue
            except Exception:  # counted and described, not raised
                crash(where)
                continue
            for (bindings, inputs), want in zip(case.runs, expected):
                tally.runs += 1
                try:
                    outcome, reason = compare(runtime.run(inputs, case.graph.weights, bindings), want)
                except Exception:
                    crash(f"{where} at {bindings}")
                    continue
                if outcome != "ok":
                    tally.mismatches += 1
                    tally.failures.append(f"mismatch {where} at {bindings}, check_genomes seed={seed}: {reason}\n"
                                          f"{case.program}\n{runtime.llir.kernels}")
    except Exception:  # the reference, the e-graph or the genomes failed
        crash("before the genomes ran")
    finally:
        egraph.close()
    return tally
