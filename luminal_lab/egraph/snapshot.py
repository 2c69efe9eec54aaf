"""A read-only view of the e-graph at one moment: e-classes, e-nodes, parents, best terms.

Built from egglog's serialized JSON. HLIR provenance comes from the let names:
``$tN_`` is HLIR node N's e-class (``schema.let_name``), ``$root`` the root's. Primitive values
(i64, f64, String, bool) are not e-classes here: they become literal arguments of the e-node that holds them, so
``(MNum 3)`` is an e-node ``MNum`` with the literal ``3``. Rows of non-constructor
functions (``dtype``) are not e-nodes either; their values annotate the e-classes. Nor are the fused ops'
operand lists as fusion first builds them (``FusedOperands``) once its rules have written them out and subsumed
them: each is in the e-class of its written form, a bookkeeping term.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from ..core.errors import NoEClassError
from .schema import LET_NAME

WRITTEN_OUT = frozenset({"FusedOperands"})  # terms that rules write out in their e-class, then subsume
PRIMITIVE_SORTS = frozenset({"i64", "f64", "String", "bool", "Unit", "BigInt", "BigRat"})
GENOME_SORTS = frozenset({"IR", "IList"})
T = TypeVar("T")
# the program's functions and relations: they annotate e-classes, they are not e-nodes
PROGRAM_FUNCTIONS = frozenset({"dtype", "largest-plain", "plain-region", "largest-rows", "rows-region", "fused-origin",
                               "init-of", "last3", "row-shape", "on-rows", "contracts", "ew", "reads", "operand",
                               "red"})


@dataclass(frozen=True)
class ENode:
    """One e-node: its op, its child e-classes (and literal arguments), its e-class."""

    id: str
    op: str
    children: tuple[str, ...]
    literals: tuple[str, ...]
    eclass: str
    subsumed: bool

    @property
    def label(self) -> str:
        return " ".join((self.op, *self.literals))


@dataclass
class EClass:
    """An e-class: its sort, e-nodes, and (filled in by the snapshot) who uses it and where it came from."""

    id: str
    sort: str
    nodes: list[ENode] = field(default_factory=list)
    parents: list[ENode] = field(default_factory=list)
    hlir: list[int] = field(default_factory=list)  # built from these HLIR nodes, or (fused) mirrors them
    dtype: str | None = None
    best_term: str | None = None
    ops: list[str] = field(default_factory=list)  # its e-nodes' ops in the compiler's terms (``Snapshot.kind``)

    def __repr__(self) -> str:
        origin = f", HLIR {[f'h{h}' for h in self.hlir]}" if self.hlir else ""
        return f"<EClass {self.id} {self.sort}: {len(self.nodes)} e-nodes [{', '.join(self.ops)}]{origin}>"


class Snapshot:
    """The e-graph as serialized at one moment."""

    def __init__(self, serialized: str, functions: frozenset[str] = PROGRAM_FUNCTIONS):
        data = json.loads(serialized)
        raw = data["nodes"]
        class_data = data.get("class_data", {})
        sort_of = {cid: info.get("type", "") for cid, info in class_data.items()}
        literal_of = {nid: n["op"] for nid, n in raw.items() if sort_of.get(n["eclass"]) in PRIMITIVE_SORTS}
        self.classes: dict[str, EClass] = {}
        self.dtype_of: dict[str, str] = {}
        function_rows = []
        for nid, n in raw.items():
            if nid in literal_of:
                continue
            if n["op"] in functions:
                function_rows.append(n)
                continue
            if n["op"] in WRITTEN_OUT and n.get("subsumed"):
                continue
            children = tuple(raw[c]["eclass"] for c in n["children"] if c not in literal_of)
            literals = tuple(literal_of[c] for c in n["children"] if c in literal_of)
            node = ENode(nid, n["op"], children, literals, n["eclass"], bool(n.get("subsumed")))
            eclass = self.classes.setdefault(n["eclass"], EClass(n["eclass"], sort_of.get(n["eclass"], "")))
            eclass.nodes.append(node)
        origin_of: dict[str, str] = {}  # fused-origin(IR) rows: a fused op's e-class -> the kernel op's it mirrors
        self.fused_origins = origin_of
        self.contracts: dict[str, str] = {}  # contracts(IR) rows: an e-class with a matmul -> the product it replaces
        for row in function_rows:  # dtype(IR) rows: the value's e-class holds the DType constructor
            target = raw[row["children"][0]]["eclass"] if row["children"] else None
            if row["op"] == "fused-origin":
                origin_of[target] = row["eclass"]
            if row["op"] == "contracts":
                self.contracts[target] = row["eclass"]
            if row["op"] != "dtype":
                continue  # fusion's region bookkeeping annotates nothing
            value = self.classes.get(row["eclass"])
            if target in self.classes and value is not None and value.nodes:
                self.classes[target].dtype = value.nodes[0].op
        for eclass in self.classes.values():
            for node in eclass.nodes:
                for child in node.children:
                    if child in self.classes:
                        self.classes[child].parents.append(node)
        self.root: str | None = None
        self.hlir_eclass: dict[int, str] = {}  # HLIR node id -> the e-class it was built into
        for cid, info in class_data.items():  # $tN_ names HLIR node N's e-class, $root the root's
            for name in (info.get("let") or "").split(", "):
                let = LET_NAME.fullmatch(name)
                if name == "$root":
                    self.root = cid
                elif let and cid in self.classes:
                    self.classes[cid].hlir.append(int(let[1]))
                    self.hlir_eclass[int(let[1])] = cid
        for fused, origin in origin_of.items():  # a fused op comes from the HLIR nodes of the op it mirrors
            if fused in self.classes and origin in self.classes and not self.classes[fused].hlir:
                self.classes[fused].hlir = list(self.classes[origin].hlir)
        for eclass in self.classes.values():
            eclass.hlir.sort()
            eclass.ops = list(dict.fromkeys(self.kind(n) for n in eclass.nodes))

    # ---- in the compiler's terms --------------------------------------------------------
    def kind(self, node: ENode) -> str:
        """What ``node`` computes, as the compiler names it: an ``Op`` e-node by its OpKind e-class's constructors
        (``KernelMatmul``, ``FusedAdd``; several joined by `` | ``), any other by its own op (with its literals)."""
        if node.op == "Op" and node.children and node.children[0] in self.classes:
            kinds = self.classes[node.children[0]].nodes
            return " | ".join(dict.fromkeys(k.op for k in sorted(kinds, key=lambda k: k.subsumed))) or node.op
        return node.label

    def operands(self, node: ENode) -> list[str]:
        """The e-classes ``node`` reads: an ``Op`` e-node's sources (its IList's elements, in order), any other's
        child e-classes."""
        if node.op != "Op" or len(node.children) < 2:
            return list(node.children)
        sources, seen, cid = [], set(), node.children[1]
        while cid in self.classes and cid not in seen:
            seen.add(cid)
            cons = next((n for n in self.classes[cid].nodes if n.op == "ICons" and len(n.children) == 2), None)
            if cons is None:
                break
            sources.append(cons.children[0])
            cid = cons.children[1]
        return sources

    # ---- counts -------------------------------------------------------------------------
    @property
    def n_enodes(self) -> int:
        return sum(len(c.nodes) for c in self.classes.values())

    @property
    def n_eclasses(self) -> int:
        return len(self.classes)

    def node_ids(self) -> set[str]:
        return {n.id for c in self.classes.values() for n in c.nodes}

    def node_keys(self) -> dict[tuple, str]:
        """Each e-node's identity (op, literals, child e-classes) -> its e-class."""
        return {(n.op, n.literals, n.children): c.id for c in self.classes.values() for n in c.nodes}

    def eclass_of_hlir(self, node_id: int) -> str:
        """The e-class HLIR node ``node_id`` was built into (fused e-classes that mirror it are not it)."""
        if node_id not in self.hlir_eclass:
            known = f"h{min(self.hlir_eclass)}..h{max(self.hlir_eclass)}" if self.hlir_eclass else "none"
            raise NoEClassError(f"HLIR node {node_id!r} has no e-class: the graph's nodes with one are {known} "
                                "(a node no output reads has none)")
        return self.hlir_eclass[node_id]

    def check(self, cid: str, where: str) -> str:
        """``cid``, an e-class of this e-graph, else ``NoEClassError`` naming ``where``, the id and the ids there
        are."""
        if not isinstance(cid, str) or cid not in self.classes:
            example = self.root or next(iter(self.classes), "IR-0")
            hint = "" if isinstance(cid, str) else " (for an HLIR node, use eclass_of(node))"
            raise NoEClassError(f"{where}(cid={cid!r}): expected the id of one of this e-graph's {len(self.classes)} "
                                f"e-classes, a str such as {example!r}{hint}; ids change when e-classes merge")
        return cid

    # ---- best terms ---------------------------------------------------------------------
    @cached_property
    def _costs(self) -> dict[str, tuple[int, ENode]]:
        """Smallest term per e-class (term size) over non-subsumed e-nodes.

        Knuth's generalisation of Dijkstra: an e-node's cost is final once all its children's
        are, and costs only grow upwards, so e-classes are settled cheapest first.
        """
        nodes = ((n.eclass, n, set(n.children)) for c in self.classes.values() for n in c.nodes if not n.subsumed)
        return cheapest(nodes, lambda node, best: 1 + sum(best[c][0] for c in node.children))

    def best_term(self, cid: str, depth: int = 6) -> str:
        """The smallest term of an e-class as an s-expression (``...`` past ``depth`` levels)."""
        entry = self._costs.get(cid)
        if entry is None:
            return "<no finite term>"
        node = entry[1]
        if depth == 0:
            return "..."
        parts = [node.op, *node.literals, *(self.best_term(c, depth - 1) for c in node.children)]
        return parts[0] if len(parts) == 1 else f"({' '.join(parts)})"

    def eclass(self, cid: str, where: str = "EGraph.eclass") -> EClass:
        eclass = self.classes[self.check(cid, where)]
        eclass.best_term = self.best_term(cid)
        return eclass


def cheapest(nodes: Iterable[tuple[str, T, Collection[str]]],
             cost: Callable[[T, dict[str, tuple[Any, T]]], Any]) -> dict[str, tuple[Any, T]]:
    """Knuth's generalisation of Dijkstra over e-nodes given as ``(e-class, e-node, the child e-classes it waits
    for)``: an e-node's cost (``cost(e-node, best so far)``, once all the e-classes it waits for are settled) is final,
    and costs only grow upwards, so e-classes are settled cheapest first (ties in the order given). Returns each
    settled e-class's cost and the e-node that gives it."""
    best: dict[str, tuple[Any, T]] = {}
    waiting: dict[int, int] = {}
    users: dict[str, list[tuple[int, str, T]]] = defaultdict(list)
    ready: list[tuple[Any, int, str, T]] = []
    order = itertools.count()
    for k, (cid, node, deps) in enumerate(nodes):
        if not deps:
            heapq.heappush(ready, (cost(node, best), next(order), cid, node))
            continue
        waiting[k] = len(deps)
        for dep in deps:
            users[dep].append((k, cid, node))
    while ready:
        total, _, cid, node = heapq.heappop(ready)
        if cid in best:
            continue
        best[cid] = (total, node)
        for k, user_cid, user in users[cid]:
            waiting[k] -= 1
            if waiting[k] == 0:
                heapq.heappush(ready, (cost(user, best), next(order), user_cid, user))
    return best


def count(serialized: str, functions: frozenset[str] = PROGRAM_FUNCTIONS) -> tuple[int, int]:
    """(e-classes, e-nodes) of a serialized e-graph, counted as ``Snapshot`` counts them."""
    snapshot = Snapshot(serialized, functions)
    return snapshot.n_eclasses, snapshot.n_enodes

