"""Python's arithmetic on sizes in the graphs dynamo and AOTAutograd hand over (``frontends/translate.py``,
``SCALAR_OPS``): a size stays an expression of the symbolic sizes, a float made of sizes (``n / m``) is computed where
the program runs, so one dynamic program serves every size, in the forward and in the backward graph; and a model
trained after another of the same ``forward`` (dynamo then makes its sizes dynamic at once) trains like eager."""

from __future__ import annotations

import copy
import importlib
import math
import operator

import pytest
import torch
from torch import nn

import luminal_lab as ll

translation = importlib.import_module("luminal_lab.frontends.translate")
OPTIONS = {"generations": 0, "cache_dir": False}
ASKED = {operator.truediv, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg, operator.pow,
         torch.sym_float, math.trunc, torch.sym_max, torch.sym_min}  # torch.sym_int is exported as math.trunc


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture
def translated(monkeypatch: pytest.MonkeyPatch) -> list[set]:
    """The targets of each graph the translation is given, in order."""
    seen, check = [], translation._check_supported

    def recorded(graph: torch.fx.Graph, opaque: bool = False) -> None:
        seen.append({n.target for n in graph.nodes if n.op == "call_function"})
        check(graph, opaque)

    monkeypatch.setattr(translation, "_check_supported", recorded)
    return seen


def of_sizes(x: torch.Tensor) -> torch.Tensor:
    n, m = x.shape[0], x.shape[1]
    ratio = n / m
    whole = (n - 1) * 2 + n // 2 + n % 3 - m
    square = torch.sym_float(n) ** 2
    truncated = torch.sym_int(ratio * 3.5)
    spread = torch.sym_max(n, m) - torch.sym_min(n, m)
    return x * ratio + x * (whole + truncated + spread) / square + (ratio - 0.5) / (square + 1.0) - (-n)


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "forward and backward"])
def test_each_op_on_sizes_is_translated_and_one_program_serves_every_size(grad: bool, translated: list) -> None:
    compiled = torch.compile(of_sizes, backend="luminal_lab", dynamic=True, options=OPTIONS)
    for shape in ((6, 4), (9, 4), (12, 5)):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0]), requires_grad=grad)
        torch.testing.assert_close(compiled(x), of_sizes(x), atol=1e-5, rtol=1e-5)
        if grad:
            (got,) = torch.autograd.grad(compiled(x).sum(), x)
            (expected,) = torch.autograd.grad(of_sizes(x).sum(), x)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    programs = ll.programs(compiled)
    assert len(programs) == (2 if grad else 1) and all(p.graph.dynamic for p in programs)  # forward, backward
    assert ASKED <= translated[0]
    if grad:  # the backward's gradient of x * ratio computes the ratio again, from the sizes
        assert len(translated) == 2 and operator.truediv in translated[1]


def test_a_cnn_trained_after_an_mlp_of_the_same_forward_trains_like_eager() -> None:
    """nn.Sequential's one forward: dynamo compiles the CNN's graph with dynamic sizes at once, whose forward computes
    the batch norm's n / (n - 1) from its sizes and whose max pooling then compiles per shape."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(8 * 4 * 4, 4))
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(8, 16, generator=generator), torch.randn(4, 3, 8, 8, generator=generator)
    for model, x in zip((mlp, cnn), inputs, strict=True):
        twin = copy.deepcopy(model)
        compiled = torch.compile(model, backend="luminal_lab", options=OPTIONS)
        ours, theirs = torch.optim.SGD(model.parameters(), lr=0.01), torch.optim.SGD(twin.parameters(), lr=0.01)
        for _ in range(3):
            for net, optimizer in ((compiled, ours), (twin, theirs)):
                net(x).square().mean().backward()
                optimizer.step()
                optimizer.zero_grad()
        for got, expected in zip(model.state_dict().values(), twin.state_dict().values(), strict=True):
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
