"""PyTorch's OpInfo samples (float32, CPU) differentiated through ``torch.compile(backend="luminal_lab")``.

Every op_db entry that torch can differentiate gets its first small sample run through a compiled module (many
samples share one, see ``tests.helpers.opinfo.run_grad_batch``) whose forward and backward luminal_lab compiles;
``torch.autograd.grad`` of its outputs against seeded cotangents is compared with eager torch's. Any mismatch
beyond the OpInfo's float32 tolerances, any crash and any error other than an ``UnsupportedOpError`` naming the op
fails; at least 90 % of the ops whose forward the frontend translates must differentiate. The counts are printed
in pytest's summary. ``make test`` runs every third op (``tests.helpers.sweeps``), ``make test-all`` all of them.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.helpers.opinfo import (
    GradEntry,
    Outcome,
    cached_decompositions,
    differentiable_ops,
    first_entries,
    run_grad_batch,
)
from tests.helpers.sweeps import sliced

BATCH = 30
COVERAGE = 0.9


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every differentiable op's outcome, from its first small sample."""
    found: dict[str, Outcome] = {}
    ops = sliced(differentiable_ops())
    with cached_decompositions():
        for start in range(0, len(ops), BATCH):
            entries, refused = first_entries(ops[start:start + BATCH], GradEntry.of)
            found |= refused | run_grad_batch(entries)
    return found


def test_no_gradient_is_wrong_and_nothing_crashes(outcomes: dict[str, Outcome]) -> None:
    failures = [f"{name}: {o.kind}: {o.detail}" for name, o in outcomes.items() if o.kind in ("wrong", "crash",
                                                                                              "named")]
    assert not failures, "\n".join(failures)


def test_an_untranslated_backward_op_is_refused_by_name(outcomes: dict[str, Outcome]) -> None:
    refused = {name: o.detail for name, o in outcomes.items() if o.kind == "refused"}
    assert all(detail.startswith("unsupported op aten.") for detail in refused.values()), refused


def test_most_ops_the_forward_translates_differentiate(outcomes: dict[str, Outcome],
                                                       record_property: pytest.RecordProperty) -> None:
    counts = Counter(o.kind for o in outcomes.values())
    supported = sum(n for kind, n in counts.items() if kind not in ("forward", "torch"))
    share = counts["pass"] / supported
    record_property("summary", f"OpInfo gradients: {counts['pass']} of {supported} ops pass ({share:.1%}), "
                               f"{counts['refused']} refused in the backward; {counts['forward']} refused in the "
                               f"forward, {counts['torch']} torch cannot run or capture")
    assert share >= COVERAGE, sorted(name for name, o in outcomes.items() if o.kind == "refused")
