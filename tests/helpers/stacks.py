"""Graphs of repeated residual blocks, for loop rolling's tests: a plain stack, one reading a shared computed value,
blocks reading two blocks back, two carried values, and blocks that each give outputs of their own (as a KV cache)."""

from __future__ import annotations

import numpy as np

import luminal_lab as ll
from luminal_lab.hlir.movement import concat

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


def appending(layers: int, read_last: bool = False) -> ll.Graph:
    """A stack whose every block appends a row to a cache of its own and gives it (a KV cache at decode): each cache
    has its own symbolic length (``p0``, ``p1``, ...), as dynamo names each layer's cache length apart. With
    ``read_last``, the last block's cache is also read after the stack."""
    rng = np.random.default_rng(5)
    g = ll.Graph()
    x = g.tensor((1, D), name="x")
    h = (x * 2.0).sin()
    for i in range(layers):
        past = g.tensor((f"p{i}", D), name=f"past{i}")
        cache = concat([past, (h.rms_norm() * 3.0).relu()], axis=0)
        cache.output(f"cache{i}")
        h = layer(g, h + cache.sum(0, keepdim=True), i, rng)
    (h.sum(-1) + 1.0).output("y")
    if read_last:
        (cache.sum(0) * 2.0).output("after")
    return g


def caching(layers: int) -> ll.Graph:
    """A stack whose every block also gives two outputs of its own, as a causal LM's keys and values for its cache: its
    input transposed (copied contiguous, as torch's outputs are, at the end of the graph) and its MLP's hidden values.
    The outputs come layer by layer, then the stack's own."""
    rng = np.random.default_rng(4)
    g = ll.Graph()
    x = g.tensor((4, D), name="x")
    h, given = (x * 2.0).sin(), []
    for i in range(layers):
        given.append((h.permute(1, 0), (h.rms_norm() * 3.0).relu()))
        h = layer(g, h, i, rng)
    for i, (keys, values) in enumerate(given):
        keys.contiguous().output(f"keys{i}")
        values.output(f"values{i}")
    (h.sum(-1) + 1.0).output("y")
    return g
