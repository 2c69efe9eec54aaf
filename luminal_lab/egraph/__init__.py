"""The e-graph stage: HLIR as an egglog program in Luminal's schema, stepped under budgets.

``schema`` (the sorts, and the HLIR emitted as terms), ``ops`` (the per-op registry: each op's
constructor, kernel lowering, dtype rule and rewrites, from which the rulesets are generated),
``fusion`` (the marker-based fusion rules), ``egraph`` (``EGraph``: the schedule, ``step``/``run``/
``saturate`` under budgets, user rules), ``worker`` (egglog in its own process), ``snapshot``
(e-classes and e-nodes read back) and ``view`` (how the stage draws itself).
"""

from .egraph import EGraph, Saturation, StepReport
from .ops import OpRegistry, OpSpec, Rule, default_registry
from .snapshot import EClass, ENode, Snapshot

__all__ = ["EClass", "EGraph", "ENode", "OpRegistry", "OpSpec", "Rule", "Saturation", "Snapshot", "StepReport",
           "default_registry"]
