"""The e-graph stage: HLIR as an egglog program in Luminal's schema, stepped under budgets."""

from . import view  # noqa: F401  (draws EGraph)
from .egraph import EGraph, Saturation, StepReport
from .ops import OpRegistry, OpSpec, Rule, default_registry
from .snapshot import EClass, ENode, Snapshot

__all__ = ["EClass", "EGraph", "ENode", "OpRegistry", "OpSpec", "Rule", "Saturation", "Snapshot", "StepReport",
           "default_registry"]
