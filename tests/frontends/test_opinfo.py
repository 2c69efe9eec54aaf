"""PyTorch's own OpInfo samples (float32, CPU) through the PyTorch frontend, compared with eager torch.

Every op_db entry that supports float32 gets its first small sample translated (many samples share one export,
see ``tests.helpers.opinfo.run_batch``) and run on the reference runtime; a representative subset also runs
through the compiled kernels. Any mismatch beyond the OpInfo's float32 tolerances, any crash and any error other
than an ``UnsupportedOpError`` naming the untranslated op fails. ``make test`` translates every third op
(``tests.helpers.sweeps``), ``make test-all`` all of them; ``scripts/opinfo_sweep.py`` runs three samples of every op
and counts the classes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

import luminal_lab as ll
from tests.helpers.opinfo import Entry, Outcome, cached_decompositions, first_entries, float32_ops, op_name, run_batch
from tests.helpers.sweeps import sliced

EVERY_OP = float32_ops()
OPS = sliced(EVERY_OP)
BATCH = 40
CHUNKS = [OPS[i:i + BATCH] for i in range(0, len(OPS), BATCH)]
FAILURES = ("wrong", "crash", "named")
# a cross-section of the decompositions for the compiled path (each compiles its own e-graph and kernels, about
# ten seconds): rounding through Mod, atan's polynomial and quadrant selection, a scatter through several index
# tensors, a strided diagonal view, the casts to u8, i8 and i16
COMPILED = ("floor", "atan2", "index_put", "diagonal", "byte", "char", "short")


@pytest.fixture(scope="module", autouse=True)
def fast_export() -> Iterator[None]:
    with cached_decompositions():
        yield


def _run(ops, compiled: bool = False) -> dict[str, Outcome]:
    entries, outcomes = first_entries(ops, Entry.of)
    return outcomes | run_batch(entries, compiled)


def _failures(outcomes: dict[str, Outcome]) -> str:
    return "\n".join(f"{name}: {o.kind}: {o.detail}" for name, o in outcomes.items() if o.kind in FAILURES)


@pytest.mark.parametrize("chunk", range(len(CHUNKS)), ids=[op_name(c[0]) for c in CHUNKS])
def test_opinfo_samples_match_torch_or_are_refused(chunk: int) -> None:
    outcomes = _run(CHUNKS[chunk])
    assert not _failures(outcomes), _failures(outcomes)
    refused = [o for o in outcomes.values() if o.kind == "refused"]
    assert all(o.detail.startswith("unsupported op ") for o in refused)


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_kernels_match_torch_on_opinfo_samples(name: str) -> None:
    outcomes = _run([op for op in EVERY_OP if op_name(op) == name], compiled=True)
    assert outcomes == {name: Outcome("pass")}


# ---- the cases the issue named, with torch as the reference ---------------------------------------------------
CASES = {
    "sum over dim 0 of a 0-dim tensor": (lambda x: x.sum(0), ()),
    "amax over dim -1 of a 0-dim tensor": (lambda x: x.amax(-1, keepdim=True), ()),
    "logsumexp of a 0-dim tensor": (lambda x: torch.logsumexp(x, 0), ()),
    "flip of a zero-size tensor": (lambda x: x.flip(0, 1), (0, 3)),
    "var of a zero-size tensor": (lambda x: x.var(0), (0, 3)),
    "std of a zero-size tensor": (lambda x: x.std(), (0,)),
    "index_select of a 0-dim tensor": (lambda x: x.index_select(0, torch.tensor([0])), ()),
    "unbind of a 1-d tensor": (lambda x: x.unbind(0), (3,)),
    "take with negative indices": (lambda x: x.take(torch.tensor([-1, 0, -7, 4])), (3, 3)),
    "index with two index tensors": (lambda x: x[:, torch.tensor([0, -1]), torch.tensor([[1], [2]])], (2, 3, 4)),
}


@pytest.mark.parametrize("name", CASES)
def test_named_cases_behave_as_torch(name: str) -> None:
    fn, shape = CASES[name]
    x = torch.randn(shape)
    comp = ll.compile(fn, (x,))
    torch.testing.assert_close(comp.run_reference(x), fn(x), equal_nan=True)
