"""Translations kept on disk (``frontends/kept.py``): the torch.compile backend compiling a graph it translated before
(in this process or an earlier one) reads the HLIR back instead of exporting again, with the weights and buffers of
the model it is called with; an entry that does not read back is discarded; the key tells apart what the translation
reads."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import luminal_lab as ll
from luminal_lab.compiler import dynamo
from luminal_lab.egraph.schema import emit
from luminal_lab.frontends import kept
from tests.helpers.models import Shifted

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list:
    """The backend's exports, one entry each."""
    made, export = [], dynamo.export_core_aten

    def counted(*args, **kwargs):
        made.append(args[0])
        return export(*args, **kwargs)

    monkeypatch.setattr(dynamo, "export_core_aten", counted)
    return made


def compiled(model, directory) -> torch.nn.Module:
    return torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": directory})


def entries(directory: Path) -> list[Path]:
    return sorted((directory / "translations").glob("*.json"))


X = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))


def test_a_second_compile_of_the_graph_reads_its_translation_with_its_own_weights(tmp_path: Path,
                                                                                   exports: list) -> None:
    first_model, second_model = Shifted(seed=0), Shifted(seed=1)  # one graph, other parameters and buffers
    first_twin, second_twin = copy.deepcopy(first_model), copy.deepcopy(second_model)
    with torch.no_grad():
        torch.testing.assert_close(compiled(first_model, tmp_path)(X), first_twin(X), atol=1e-5, rtol=1e-5)
        assert len(exports) == 1 and len(entries(tmp_path)) == 1
        torch._dynamo.reset()
        second = compiled(second_model, tmp_path)
        for _ in range(2):
            torch.testing.assert_close(second(X), second_twin(X), atol=1e-5, rtol=1e-5)
    assert len(exports) == 1 and len(entries(tmp_path)) == 1  # read back, not exported again
    torch.testing.assert_close(second_model.calls, second_twin.calls)  # the buffer mutated in place, written back
    (first,), (read,) = ll.programs(first_model), ll.programs(second_model)
    assert emit(read.graph) == emit(first.graph)
    assert read.signature.mutated_inputs == first.signature.mutated_inputs != {}
    assert (read.signature.inputs, read.signature.outputs) == (first.signature.inputs, first.signature.outputs)
    (shift,) = [value for name, value in read.graph.weights.items() if "shift" in name]
    torch.testing.assert_close(torch.from_numpy(shift), second_model.shift)


def with_constant(x: torch.Tensor) -> torch.Tensor:
    return (x * torch.tensor([1.0, -2.0, 3.0, 0.5])).sum(-1)


def test_a_constant_torch_lifted_out_is_kept_in_the_entry(tmp_path: Path, exports: list) -> None:
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(compiled(with_constant, tmp_path)(x), with_constant(x))
    (entry,) = entries(tmp_path)
    lifted = json.loads(entry.read_text())["lifted"]
    assert [value[:2] for value in lifted.values()] == [["f32", [4]]]
    torch._dynamo.reset()
    torch.testing.assert_close(compiled(with_constant, tmp_path)(x), with_constant(x))
    assert len(exports) == 1


def test_a_program_holding_more_lifted_bytes_than_an_entry_takes_is_not_kept(tmp_path: Path, exports: list,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kept, "MAX_HELD_BYTES", 8)  # the constant's 16 bytes are more
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    for _ in range(2):
        torch._dynamo.reset()
        torch.testing.assert_close(compiled(with_constant, tmp_path)(x), with_constant(x))
    assert len(exports) == 2 and entries(tmp_path) == []


def test_an_entry_that_does_not_read_back_is_discarded_and_written_again(tmp_path: Path, exports: list) -> None:
    with torch.no_grad():
        compiled(Shifted(), tmp_path)(X)
        (entry,) = entries(tmp_path)
        good = json.loads(entry.read_text())
        for damaged in ("{", json.dumps({**good, "format": 0}), json.dumps({**good, "graph": {"format": 1}})):
            entry.write_text(damaged)
            torch._dynamo.reset()
            torch.testing.assert_close(compiled(Shifted(), tmp_path)(X), Shifted()(X), atol=1e-5, rtol=1e-5)
            assert json.loads(entry.read_text()) == good
    assert len(exports) == 4


def test_no_directory_keeps_nothing(tmp_path: Path, exports: list) -> None:
    with torch.no_grad():
        for _ in range(2):
            torch._dynamo.reset()
            compiled(Shifted(), False)(X)
    assert len(exports) == 2 and not list(tmp_path.iterdir())


class Held(torch.nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.register_buffer("scale", torch.full((4,), scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def test_the_key_tells_apart_what_the_translation_reads() -> None:
    gm = torch.fx.symbolic_trace(Held(2.0))  # the buffer is read as an attribute of the graph (get_attr)
    x = torch.randn(2, 4)
    base = kept.key(gm, [x], ["context"])
    assert base == kept.key(gm, [torch.randn(2, 4)], ["context"])  # the arguments' values are not read
    assert kept.key(torch.fx.symbolic_trace(Held(2.0)), [x], ["context"]) == base
    others = [kept.key(torch.fx.symbolic_trace(Held(3.0)), [x], ["context"]),  # what it holds
              kept.key(gm, [x.double()], ["context"]), kept.key(gm, [x.t().contiguous().t()], ["context"]),
              kept.key(gm, [torch.randn(3, 4)], ["context"]), kept.key(gm, [x.requires_grad_()], ["context"]),
              kept.key(gm, [x], ["other"])]
    assert len({base, *others}) == 1 + len(others)
    assert kept.key(torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 4))), [x], []) is None  # a submodule


SCRIPT = """
import torch, luminal_lab as ll
from luminal_lab.core import phases

def gelu_mlp(x, w):
    return torch.nn.functional.gelu(x @ w).softmax(-1)

x, w = torch.randn(4, 16), torch.randn(16, 8)
compiled = torch.compile(gelu_mlp, backend="luminal_lab", options={"generations": 0})
torch.testing.assert_close(compiled(x, w), gelu_mlp(x, w), atol=1e-5, rtol=1e-5)
print("exported" if "export" in phases.totals() else "read")
"""


def test_a_fresh_process_reads_the_translation_an_earlier_one_kept(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LUMINAL_LAB_GENOME_CACHE": str(tmp_path / "cache")}
    said = []
    for _ in range(2):
        run = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        said.append(run.stdout.split()[-1])
    assert said == ["exported", "read"]
    assert len(entries(tmp_path / "cache")) == 1
