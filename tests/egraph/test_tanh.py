"""``tanh`` as a kernel op: the e-graph recognises the tensor API's decomposition (``2 * sigmoid(2x) - 1``) and offers
one ``Tanh`` kernel beside it, which runs like torch's on the CPU (alone and fused) and compiles for CUDA with NVRTC."""

from __future__ import annotations

import math

import pytest
import torch

import luminal_lab as ll
from luminal_lab.codegen.cuda import llir_sources
from luminal_lab.codegen.ptx import compile_ptx
from luminal_lab.core.ops import IN_REGION
from luminal_lab.llir.regions import find_regions

SPECIAL = [math.inf, -math.inf, math.nan, -0.0, 0.0, 1e-8, -20.0, 20.0, 3.5, -0.75]


def _tanh_graph(dtype=ll.f32) -> ll.Graph:
    g = ll.Graph()
    g.tensor((4, 10), name="x", dtype=dtype).tanh().output("y")
    return g


def _gelu_tanh_graph() -> ll.Graph:
    """GELU's tanh form: elementwise ops around a tanh, one region when fused."""
    g = ll.Graph()
    x = g.tensor((4, 10), name="x")
    (0.5 * x * (1 + (0.7978845608 * (x + 0.044715 * x * x * x)).tanh())).output("y")
    return g


def _x(dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn(4, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    x[0] = torch.tensor(SPECIAL, dtype=torch.float64)
    return x.to(dtype)


def _computing(llir) -> list[str]:
    return [k.op for k in llir.kernels if k.op not in ("Input", "Constant", "Output", *IN_REGION)]


@pytest.mark.parametrize(("dtype", "torch_dtype", "tolerance"), [(ll.f32, torch.float32, 2e-7),
                                                                 (ll.f64, torch.float64, 1e-15)])
def test_tanh_runs_as_one_kernel_like_torch(dtype, torch_dtype, tolerance) -> None:
    comp = ll.compile(_tanh_graph(dtype))
    comp.genome = comp.choice_space().smallest_genome()
    assert _computing(comp.llir()) == ["Tanh"]
    x = _x(torch_dtype)
    torch.testing.assert_close(comp.run(x=x), torch.tanh(x), rtol=tolerance, atol=tolerance, equal_nan=True)


def test_the_decomposition_stays_a_choice_and_agrees() -> None:
    comp = ll.compile(_tanh_graph())
    comp.genome = comp.choice_space().smallest_genome(without=("Tanh",))
    assert "Tanh" not in _computing(comp.llir()) and "Recip" in _computing(comp.llir())
    x = _x(torch.float32)
    x[0] = torch.linspace(-20, 20, 10)  # finite values: the decomposition's exp2 overflows to inf/inf at -inf
    torch.testing.assert_close(comp.run(x=x), torch.tanh(x), rtol=1e-6, atol=1e-6)


def test_tanh_fuses_with_its_neighbours() -> None:
    comp = ll.compile(_gelu_tanh_graph())
    comp.genome = comp.choice_space().fused_genome()
    llir = comp.llir()
    (region,) = find_regions(llir)
    assert "Tanh" in region.op_names(llir)
    x = _x(torch.float32)
    expected = torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(comp.run(x=x), expected, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("fused", [False, True], ids=["kernel", "region"])
def test_tanh_kernels_compile_with_nvrtc(fused: bool) -> None:
    comp = ll.compile(_gelu_tanh_graph() if fused else _tanh_graph())
    space = comp.choice_space()
    comp.genome = space.fused_genome() if fused else space.smallest_genome()
    sources = [k for k in llir_sources(comp.llir()) if "tanhf(" in k.source]
    assert sources and all(f".entry {k.name}" in compile_ptx(k.source) for k in sources)


def test_gpt2s_gelu_fuses_around_its_tanh() -> None:
    """GPT-2's GELU (transformers' defaults, the cache on): its MLP's region holds the exact ``Tanh``, not its
    decomposition. Regions of one size at the tanh's e-class tie; the one whose last op reads fewest operands grows
    on, whatever order egglog applies matches in."""
    from tests.helpers.causal_lms import gpt2, prompt

    torch._dynamo.reset()
    compiled = torch.compile(gpt2(), backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    with torch.no_grad():
        compiled(prompt())
    (comp,) = ll.programs(compiled)
    llir = comp.llir()
    ops = [region.op_names(llir) for region in find_regions(llir)]
    assert sum("Tanh" in names for names in ops) == 2, ops  # one GELU per layer of the two
