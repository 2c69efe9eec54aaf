"""Graphs of repeated residual blocks, for loop rolling's tests: a plain stack, one reading a shared computed value,
blocks reading two blocks back, and two carried values."""

from __future__ import annotations

import numpy as np

import luminal_lab as ll

D = 8


def layer(g: ll.Graph, h, i: int, rng: np.random.Generator, d: int = D, shared=None):
    """A residual block: RMSNorm, a ReLU MLP, the residual add (and a read of ``shared`` when given)."""
    w1 = g.weight(f"l{i}.w1", rng.standard_normal((d, 2 * d)).astype(np.float32))
    w2 = g.weight(f"l{i}.w2", rng.standard_normal((2 * d, d)).astype(np.float32))
    norm = g.weight(f"l{i}.norm", rng.standard_normal(d).astype(np.float32))
    out = h + (h.rms_norm(norm) @ w1).relu() @ w2 * 0.1
    return out * shared if shared is not None else out


def stack(layers: int, dims: list[int] | None = None, shared: bool = False) -> ll.Graph:
    """``x`` through an embedding-like prefix, ``layers`` residual blocks, and a suffix."""
    rng = np.random.default_rng(0)
    g = ll.Graph()
    x = g.tensor((4, D), name="x")
    h = (x * 2.0).sin()  # before the run
    gate = (x * 0.5).sigmoid() if shared else None  # a computed value every layer reads
    for i in range(layers):
        h = layer(g, h, i, rng, shared=gate)
    (h.sum(-1) + 1.0).output("y")  # after the run
    return g



def pairs() -> ll.Graph:
    """Layers that read two layers back: rolled as pairs carrying two values."""
    rng = np.random.default_rng(3)
    g = ll.Graph()
    hs = [g.tensor((4, D), name="x")]
    for i in range(6):
        hs.append(layer(g, hs[-1], i, rng) + hs[max(len(hs) - 2, 0)])
    hs[-1].output("y")
    return g


def running_total() -> ll.Graph:
    """Two carried values, one of them read by nothing after the run (kept by an extra output)."""
    rng = np.random.default_rng(1)
    g = ll.Graph()
    x = g.tensor((4, D), name="x")
    h, total = x, x.sum(-1)
    for i in range(4):
        h = layer(g, h, i, rng)
        total = total + h.sum(-1)
    total.output("total")
    return g
