"""Random HLIR graphs for fuzzing: elementwise chains, broadcasts, reductions, views, gathers; and
``check_genomes``, which runs random genomes of one against the reference (tests/runtime/test_fuzz.py
runs a bounded number, benchmarks/fuzz.py thousands).

Values stay finite: the unary ops used are bounded (sin, exp of a sine, sqrt of 1 + x^2,
a reciprocal of 1 + x^2), so any genome's kernels can be compared with the reference. Graphs of an int
dtype use no unary op and no softmax; their inputs span the whole range of the type, so arithmetic wraps.
"""

from __future__ import annotations

import random

import numpy as np
from hypothesis import strategies as st

import luminal_lab as ll
from luminal_lab.core.errors import Refused
from luminal_lab.egraph import EGraph
from luminal_lab.hlir.reference import ReferenceRuntime
from luminal_lab.llir.genome import ChoiceSpace, children, extract
from luminal_lab.runtime.cpu import CPURuntime
from luminal_lab.search.search import compare

UNARY = {
    "sin": lambda t: t.sin(),
    "exp_sin": lambda t: t.sin().exp(),
    "soft_sqrt": lambda t: (t * t + 1).sqrt(),
    "soft_recip": lambda t: (t * t + 1).reciprocal(),
    "times_one": lambda t: t * 1.0,
    "plus_zero": lambda t: t + 0.0,
    "relu": lambda t: t.relu(),
}


KINDS = ("unary", "binary", "reduce", "view", "gather", "softmax", "concat")
INT_KINDS = ("binary", "reduce", "view", "gather", "concat")


@st.composite
def graphs(draw, max_ops: int = 8, dtype: ll.DType = ll.f32) -> tuple[ll.Graph, dict[str, np.ndarray]]:
    """A random graph with one or two outputs, and seeded inputs of ``dtype`` for it."""
    g = ll.Graph()
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    pool = [g.tensor(shape, "x0", dtype)]
    if draw(st.booleans()):
        pool.append(g.tensor(shape[-1:], "x1", dtype))  # broadcasts against x0
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(KINDS if dtype.is_float else INT_KINDS))
        t = draw(st.sampled_from(pool))
        if kind == "unary":
            pool.append(UNARY[draw(st.sampled_from(sorted(UNARY)))](t))
        elif kind == "binary":
            other = draw(st.sampled_from(pool))
            try:
                op = draw(st.sampled_from(["add", "mul", "max", "sub"]))
                pool.append({"add": t + other, "mul": t * other, "sub": t - other}[op] if op != "max"
                            else ll.maximum(t, other))
            except ll.ShapeError:
                continue
        elif kind == "reduce" and t.ndim >= 1:
            axis = draw(st.integers(0, t.ndim - 1))
            keep = draw(st.booleans())
            pool.append(t.sum(axis, keepdim=keep) if draw(st.booleans()) else t.max(axis, keepdim=keep))
        elif kind == "view" and t.ndim >= 1:
            choice = draw(st.sampled_from(["permute", "slice", "pad", "flatten", "expand"]))
            if choice == "permute":
                pool.append(t.permute(draw(st.permutations(range(t.ndim)))) * 1.0)
            elif choice == "slice":
                size = t.shape[-1].value
                start = draw(st.integers(0, size - 1))
                pool.append(t.slice(-1, start, draw(st.integers(start + 1, size))))
            elif choice == "pad":
                pool.append(t.pad([(0, 0)] * (t.ndim - 1) + [(draw(st.integers(0, 2)), draw(st.integers(0, 2)))]))
            elif choice == "flatten":
                pool.append(t.flatten())
            else:
                pool.append(t.unsqueeze(0).expand(2, *t.shape))
        elif kind == "gather" and t.ndim >= 1:
            size = t.shape[0].value
            start = draw(st.integers(0, size - 1))
            rows = g.arange(draw(st.integers(1, size - start)), start=start)
            pool.append(t.take(rows, axis=0))
        elif kind == "softmax" and t.ndim >= 1:
            pool.append(t.softmax(-1))
        elif kind == "concat" and t.ndim >= 1:
            pool.append(ll.concat([t, t.sin() if dtype.is_float else t * 3], axis=t.ndim - 1))
    pool[-1].output("out")
    if len(pool) > 3 and draw(st.booleans()):
        pool[len(pool) // 2].output("mid")
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    inputs = {name: _values(rng, [d.value for d in spec.node.shape], dtype) for name, spec in g.inputs.items()}
    return g, inputs


def _values(rng: np.random.Generator, shape: list[int], dtype: ll.DType) -> np.ndarray:
    """Uniform in [-1, 1] for a float, over the whole range of an int type."""
    if dtype.is_float:
        return rng.uniform(-1, 1, shape).astype(dtype.numpy)
    return rng.integers(dtype.lowest, dtype.highest, shape, endpoint=True).astype(dtype.numpy)


GENOMES_PER_GRAPH = 6


def check_genomes(graph, inputs, genomes: int = GENOMES_PER_GRAPH, seed: int = 0) -> dict[str, int]:
    """Run ``genomes`` random genomes (and mutants of them) of ``graph``; count outcomes.
    Raises AssertionError on any viable genome that disagrees with the reference."""
    reference = ReferenceRuntime(graph).run(inputs)
    expected = [reference[name] for name in graph.outputs]
    egraph = EGraph(graph)
    counts = {"ok": 0, "refused": 0}
    try:
        egraph.saturate()
        space = ChoiceSpace(egraph.snapshot, graph)
        rng = random.Random(seed)
        tried = [space.random_genome(rng.randrange(2**32)) for _ in range(genomes // 2)]
        seen = {g.hash for g in tried}
        for parent in list(tried):
            tried.extend(children(parent, 1, 3, rng, seen))
        for genome in tried[:genomes]:
            try:
                llir = extract(genome)
            except Refused:
                counts["refused"] += 1
                continue
            outputs = CPURuntime(llir).run(inputs, graph.weights, {})
            outcome, reason = compare(outputs, expected)
            assert outcome == "ok", f"genome {genome.hash:016x}: {reason}\n{llir.kernels}"
            counts["ok"] += 1
    finally:
        egraph.close()
    return counts
