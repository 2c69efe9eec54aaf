"""A graph deeper than Python's recursion limit goes through every stage: the HLIR, saturation, extraction, the
CPU runtime against the reference, provenance, every stage's picture and the report."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import luminal_lab as ll
from luminal_lab.compiler.provenance import Provenance
from luminal_lab.core.stage import STAGE_MIME

DEPTH = 1200  # ops in one chain: each recursive step of a walk would take at least a frame per op


def test_a_chain_deeper_than_the_recursion_limit_goes_through_every_stage(tmp_path: Path) -> None:
    assert DEPTH > sys.getrecursionlimit() // 2
    g = ll.Graph()
    x = g.tensor((4, 8), name="x")
    y = x
    for i in range(DEPTH):
        y = (y * 0.999).sin() if i % 2 else y + 0.5
    y.output("y")
    comp = ll.compile(g, fusion=False, rolling=False)  # fused, a chain this long offers a region per pair of its ops;
    # rolled, it would be one copy of its repeating stretch
    assert comp.egraph.saturate().saturated
    llir = comp.llir()
    assert sum(k.op == "Sin" for k in llir.kernels) == DEPTH // 2
    inputs = torch.randn(4, 8)
    torch.testing.assert_close(comp.run(inputs), comp.run_reference(inputs), rtol=1e-5, atol=1e-5)
    provenance = Provenance(comp.stages())
    sin = next(k for k in llir.kernels if k.op == "Sin")
    assert provenance.counterparts("llir", f"k{sin.id}")["hlir"] == [f"h{h}" for h in sin.hlir]
    envelope = comp.pipeline()._repr_mimebundle_()[STAGE_MIME]
    assert [stage["stage"] for stage in envelope["stages"]] == ["hlir", "egraph", "llir", "regions", "cuda"]
    for stage in comp.stages().values():
        assert "image/svg+xml" in stage._repr_mimebundle_() or stage.name == "cuda"
    assert comp.report(tmp_path / "deep.html").stat().st_size > 0
