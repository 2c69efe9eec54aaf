"""An op with no translation runs through torch as an opaque step of the program (``hlir.opaque``), as inductor's
fallback kernels run one: here a custom op registered with ``torch.library``, between layers the program computes.
It matches eager, is named in the HLIR's summary and in the HLIR and LLIR pictures, a warning names it once per
process, and ``options={"strict": True}`` refuses it instead."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import luminal_lab as ll

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
NAME = "luminal_lab_test.clipped_cube.default"


@torch.library.custom_op("luminal_lab_test::clipped_cube", mutates_args=())
def clipped_cube(x: torch.Tensor) -> torch.Tensor:
    return (x ** 3).clamp(-1, 1)


@clipped_cube.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(clipped_cube(self.first(x)).relu())


def _model() -> Model:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Model().eval()


def _opaque_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if NAME in str(w.message)]


def test_a_custom_op_runs_opaque_between_compiled_kernels() -> None:
    model, x = _model(), torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(model, backend="luminal_lab")(x)
        again = torch.compile(_model(), backend="luminal_lab")(x * 2)  # a second model: no second warning
    torch.testing.assert_close(got, model(x))
    torch.testing.assert_close(again, model(x * 2))
    (message,) = _opaque_warnings(caught)
    assert message.startswith(f"luminal_lab: {NAME} has no translation; it runs in torch as an opaque step")
    assert "test_opaque.py" in message
    assert not [w for w in caught if "runs in torch, not compiled" in str(w.message)]  # the graph compiled
    (program,) = ll.programs(model)
    assert f"run by torch: {NAME}" in program.hlir.summary()
    assert f"Opaque {NAME}" in program.hlir.to_svg()
    llir = program.llir()
    assert llir.op_counts()["Opaque"] == 1 and llir.op_counts()["Matmul"] == 2
    assert f"Opaque {NAME}" in llir.to_svg()
    (step,) = (k for k in program.cuda if "clipped_cube" in k.source)
    assert step.library == "torch"


def test_strict_refuses_an_op_with_no_translation() -> None:
    model, x = _model(), torch.randn(3, 8)
    with torch.no_grad(), pytest.raises(Exception, match=f"unsupported op {NAME}"):
        torch.compile(model, backend="luminal_lab", options={"strict": True})(x)
