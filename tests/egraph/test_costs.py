"""The work saturation does, guarded by counts instead of times: for a fixed set of programs, the e-nodes and
e-classes a saturated e-graph holds, the rule matches that made it, and whether the layers rolled (a rolled program
saturates one layer, however deep). ``saturation_counts.json`` records the figures; a count more than ``GROWTH``
times its figure fails, and so does one under half of it (record the better figure, so that the guard stays tight).
Update the figures in the commit that changes them: ``python -m tests.egraph.test_costs`` prints them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import luminal_lab as ll
from tests.helpers.causal_lms import gpt2, prompt
from tests.helpers.models import LlamaBlock, llama_inputs
from tests.helpers.real_models import bert_model

FIGURES = Path(__file__).with_name("saturation_counts.json")
GROWTH = 1.2


def _gpt2_with_its_cache() -> ll.Compiled:
    """GPT-2 (2 layers) with transformers' defaults, the cache on: the prefill program torch.compile makes."""
    model = gpt2()
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    with torch.no_grad():
        compiled(prompt())
    (program,) = ll.programs(compiled)
    return program


def _i0() -> ll.Compiled:
    g = ll.Graph()
    g.tensor((64,), "x").i0().output("y")
    return ll.compile(g)


PROGRAMS: dict[str, Callable[[], ll.Compiled]] = {
    "gpt2 with its cache": _gpt2_with_its_cache,
    "llama block": lambda: ll.compile(LlamaBlock().eval(), llama_inputs()),
    "bert layer": lambda: ll.compile(*bert_model()),
    "i0": _i0,
}


def counts(name: str) -> dict[str, int]:
    """The saturated e-graph's e-nodes and e-classes, its rule matches, and how many copies its layers rolled to."""
    comp = PROGRAMS[name]()
    comp.records = None  # saturated here, not read from an earlier process's e-graph
    egraph = comp.egraph
    if not egraph.history:  # (torch.compile's program saturated at its call)
        egraph.saturate()
    found = {"enodes": egraph.snapshot.n_enodes, "eclasses": egraph.snapshot.n_eclasses,
             "matches": sum(report.total_matches for report in egraph.history),
             "rolled": comp.rolling.copies if comp.rolling else 0}
    egraph.close()
    return found


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_saturation_does_no_more_work_than_recorded(name: str) -> None:
    torch._dynamo.reset()
    recorded, found = json.loads(FIGURES.read_text())[name], counts(name)
    assert found["rolled"] == recorded["rolled"], f"{name}: rolled to {found['rolled']}, recorded {recorded['rolled']}"
    for count in ("enodes", "eclasses", "matches"):
        assert found[count] <= recorded[count] * GROWTH, (
            f"{name}: {found[count]:,} {count}, more than {GROWTH}x the recorded {recorded[count]:,}")
        assert found[count] >= recorded[count] / 2, (
            f"{name}: {found[count]:,} {count}, under half the recorded {recorded[count]:,}: record the new figure")


if __name__ == "__main__":
    print(json.dumps({name: counts(name) for name in PROGRAMS}, indent=2))
