"""torch programs on int8, uint8 and int16 through ``ll.compile``, equal to eager torch in dtype and value: on the
reference runtime, and on the CPU kernels of the smallest genome and of the most-fused one.

Each program compiles once; hypothesis draws its inputs, the ints over their whole range (so arithmetic wraps, as
torch's does per op). Floats cast to a narrow int stay where torch defines the result (in the target's range).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import luminal_lab as ll
from luminal_lab.compiler.compiled import Compiled
from luminal_lab.llir.genome import Genome

U8, I8, I16 = torch.uint8, torch.int8, torch.int16


@dataclass(frozen=True)
class Input:
    """An input of a program: its dtype, shape and the values hypothesis draws for it (ints over the whole range
    unless bounded, without 0 when ``nonzero``; floats strictly inside their bounds)."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    low: float | None = None
    high: float | None = None
    nonzero: bool = False

    def strategy(self) -> st.SearchStrategy[torch.Tensor]:
        if self.dtype.is_floating_point:
            values = st.floats(self.low, self.high, exclude_min=True, exclude_max=True, width=32)
        else:
            info = torch.iinfo(self.dtype)
            values = st.integers(info.min if self.low is None else self.low,
                                 info.max if self.high is None else self.high)
            values = values.filter(bool) if self.nonzero else values
        numpy_dtype = torch.empty((), dtype=self.dtype).numpy().dtype
        return hnp.arrays(numpy_dtype, self.shape, elements=values).map(torch.from_numpy)


def ints(dtype: torch.dtype, *shape: int, low: int | None = None, high: int | None = None,
         nonzero: bool = False) -> Input:
    return Input(dtype, shape, low, high, nonzero)


def floats(low: float, high: float, *shape: int) -> Input:
    return Input(torch.float32, shape, low, high)


def casts(s, u):
    """Floats to the narrow ints and back, and between the ints (which wraps); ``s`` in i8's range, ``u`` in u8's."""
    return (s.char(), s.to(I8), s.short(), (s * 250).short(), u.byte(), u.to(U8), (s * 0.5).half().char(),
            (u * 100).to(torch.bfloat16).short(), (u * 0.5).half().byte(), s.char().float(), u.byte().double(),
            u.byte().short(), s.char().int(), s.short().long(), u.byte().half(), s.char().to(torch.bfloat16),
            (s > 0).byte(), u.byte().bool(), s.char().byte(), (s * 250).short().char(), u.byte().char(),
            s.char() * 3 + 5, u.byte() * u.byte() + 7)


def wraps(a, b, c, d, e):
    """Arithmetic that wraps in u8 (a, b), i8 (c, d) and i16 (e); mixed types promote as torch does."""
    return (a + b, a * b, a - b, -a, a * 3 + 200, a + 300, c + d, c * d, c - d, -c, c * 100 - 7, e * e, e + 30000,
            a + c, a * e, c - e, c.abs(), a.abs(), e.abs(), a * 1.5, c + 0.25, a + True, (a > b) + c)


def comparisons(a, b, c, d, e):
    return (a < b, a >= b, a == b, a != b, a > 100, c <= -5, a < c, e > a, c == d, a.float() < 0.5 * b,
            torch.maximum(a, b), torch.minimum(c, d), torch.minimum(a, c), torch.maximum(e, c), a.clamp(10, 200),
            c.clamp(min=-100), e.clamp(-1000, 1000))


def reductions(a, c, e):
    return (a.sum(), a.sum(1), c.sum(0), e.sum(), a.sum(1, dtype=U8), a.amax(1), a.amin(0), c.max(), c.min(),
            e.amax(), e.amin(1), *torch.max(a, 1), *torch.min(c, 0), a.argmax(1), c.argmin(), a.prod(1), c.cumsum(1),
            a.float().mean(), c.float().mean(1), (a > 128).sum(1), c.amin(1, keepdim=True))


def choices(a, b, c, e):
    return (torch.where(a > b, a, b), torch.where(c < 0, c, 0), torch.where(a > 128, a, c),
            torch.where(c > 0, e, a), torch.where(a > 50, 1.5, a), torch.where(c < 0, -c, c))


def indexing(image, rows, columns, gather, a, lut, table):
    """u8 data read at i64 indexes, and u8 values used as indexes (after ``long()``)."""
    return (image[rows], image[:, columns], image.index_select(0, columns), torch.gather(image, 1, gather),
            lut[a.long()], F.embedding(a.long() % 6, table), image[rows[:3], columns[:3]], table[(a % 6).long()])


def image_ops(image):
    """What a u8 image goes through: scaling, integer division, offsets, clamping, views, normalisation."""
    return ((image.float() * 0.5).byte(), image // 2, image % 16, (image.int() * 3 // 4).byte(),
            torch.div(image, 3, rounding_mode="floor"), image.float().mean((1, 2)), 255 - image,
            image.clamp(16, 235), (image.short() - 128).char(), image.flip(1), image.permute(1, 2, 0).reshape(-1),
            F.pad(image, (1, 1)), torch.cat([image, image[:1]], 0), image.float() / 255, image.max(0).values)


def division(a, b, c, d, e):
    """``b`` and ``d`` are never 0 (torch raises on an integer division by zero)."""
    return (c // d, torch.div(c, d, rounding_mode="trunc"), c % d, torch.fmod(c, d), torch.remainder(c, -3),
            a // b, a % b, a / b, e // 300, e % 7, torch.div(e, d, rounding_mode="trunc"), c / d)


def _pairs() -> tuple:
    return (ints(U8, 4, 6), ints(U8, 4, 6), ints(I8, 4, 6), ints(I8, 4, 6), ints(I16, 4, 6))


PROGRAMS: dict[str, tuple[Callable, tuple[Input, ...]]] = {
    "casts": (casts, (floats(-128.0, 128.0, 3, 5), floats(0.0, 256.0, 3, 5))),
    "wraps": (wraps, _pairs()),
    "comparisons": (comparisons, _pairs()),
    "reductions": (reductions, (ints(U8, 4, 6), ints(I8, 4, 6), ints(I16, 4, 6))),
    "choices": (choices, (ints(U8, 4, 6), ints(U8, 4, 6), ints(I8, 4, 6), ints(I16, 4, 6))),
    "indexing": (indexing, (ints(U8, 6, 5), ints(torch.int64, 4, low=-6, high=5), ints(torch.int64, 4, low=0, high=4),
                            ints(torch.int64, 6, 3, low=0, high=4), ints(U8, 2, 3), floats(-1.0, 1.0, 256),
                            floats(-1.0, 1.0, 6, 3))),
    "image_ops": (image_ops, (ints(U8, 3, 4, 5),)),
    "division": (division, (ints(U8, 4, 6), ints(U8, 4, 6, nonzero=True), ints(I8, 4, 6),
                            ints(I8, 4, 6, nonzero=True), ints(I16, 4, 6))),
}


def compiled(name: str) -> tuple[Compiled, tuple[Genome, Genome]]:
    """``name``'s program compiled on example inputs, with its smallest and most-fused genomes (LLIRs extracted, the
    e-graph closed)."""
    fn, inputs = PROGRAMS[name]
    comp = ll.compile(fn, tuple(torch.ones(spec.shape, dtype=spec.dtype) for spec in inputs))
    genomes = (comp.genome, comp.choice_space().fused_genome())
    for genome in genomes:
        comp.llir(genome)
    comp.egraph.close()
    return comp, genomes


def _assert_matches(got, expected, what: str) -> None:
    """Every output of torch's dtype: ints and bools equal, floats (a mean, a division) within an ulp or two."""
    got, expected = tuple(got), tuple(expected)
    assert len(got) == len(expected), what
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.dtype == e.dtype, f"{what}, output {i}: {g.dtype}, torch has {e.dtype}"
        tolerance = 2e-7 if e.dtype == torch.float32 else 0
        torch.testing.assert_close(g, e, rtol=tolerance, atol=tolerance, equal_nan=True,
                                   msg=lambda m, i=i: f"{what}, output {i}: {m}")


@pytest.mark.parametrize("name", PROGRAMS)
def test_programs_match_eager_torch(name: str) -> None:
    fn, specs = PROGRAMS[name]
    comp, genomes = compiled(name)
    assert any(k.op == "FusionEnd" for k in comp.llir(genomes[1]).kernels), "the most-fused genome fuses nothing"

    @settings(max_examples=12, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.tuples(*(spec.strategy() for spec in specs)))
    def check(inputs: tuple[torch.Tensor, ...]) -> None:
        expected = fn(*(x.clone() for x in inputs))
        _assert_matches(comp.run_reference(*inputs), expected, "reference")
        for genome, kind in zip(genomes, ("smallest", "most-fused"), strict=True):
            comp.genome = genome
            _assert_matches(comp(*inputs), expected, f"{kind} genome")

    check()


def test_a_uint8_index_is_refused_as_a_mask() -> None:
    """torch reads a u8 index tensor as a boolean mask (deprecated), not as positions: refused, not misread."""
    def put(x, mask):
        return torch.ops.aten.index_put.default(x, [mask], torch.tensor(7.0))

    x, mask = torch.arange(5.0), torch.tensor([1, 0, 1, 0, 1], dtype=U8)
    with pytest.raises(ll.UnsupportedOpError, match="uint8"):
        ll.compile(put, (x, mask))


def test_narrow_ints_cross_the_boundary() -> None:
    """A u8 input and output keep their dtype; another int dtype at call time is refused."""
    image = torch.arange(24, dtype=U8).reshape(2, 12) * 11
    comp = ll.compile(lambda x: x + 1, (image,))
    assert comp.signature.inputs and comp.graph.inputs[comp.signature.inputs[0]].node.dtype == ll.u8
    assert torch.equal(comp(image), image + 1)
    with pytest.raises(ll.DTypeBoundaryError, match="i8"):
        comp(image.char())
