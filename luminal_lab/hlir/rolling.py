"""Loop rolling: a run of identical layers in the HLIR, found and folded to one copy.

A model that repeats one block N times (the layers of a transformer) is the same work N times over. ``roll``
finds the longest run of structurally identical consecutive copies in a graph's node order. Copy ``c`` does at
each position what copy 0 does there, and reads at each operand, through the same view, one of:

- a node of its own copy, at the same position in every copy;
- a node of copy ``c - 1`` (a *carried* value, such as the residual stream), which copy 0 reads from one node
  before the run;
- one node outside the run, the same for every copy (*shared*: a mask, a rotary table);
- an input of its own (a *parameter*: the layer's weights), of one shape and dtype in every copy and read by no
  other copy.

The rolled graph keeps the nodes before the run, copy 0, and the nodes after the run. It marks every value entering
copy 0 from a computed node (``LoopIn``) and every value leaving it (``LoopOut``) with a loop marker: a ``Cast`` to
the same dtype, which no rule fuses or rewrites. So the e-graph never fuses across a layer's edge, and the kernels a
genome picks for copy 0 can be cut out at the markers and repeated for every copy (``luminal_lab.llir.unroll``).
What the copies after the first read from their predecessor is copy 0's ``LoopOut``; a ``LoopOut`` that nothing
after the run reads becomes an extra output of the rolled graph (after the program's own), so the e-graph keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.ops import Op
from ..core.shape_tracker import ShapeTracker
from .graph import Graph, HLIRStage, Node

MIN_LAYER_OPS = 16  # a run's copies hold at least this many ops each: smaller repeats are not worth a loop
MAX_TRIES = 24  # candidate runs checked, longest first, before giving up
_LEAVES = (Op.INPUT, Op.CONSTANT)


class _NotALoop(Exception):
    """A candidate run whose copies do not read alike."""


@dataclass
class Rolling:
    """A graph with its run of ``copies`` identical layers folded to one.

    ``graph`` is the rolled graph (its own node ids), ``full`` the graph it rolls. ``layer`` holds the rolled ids of
    copy 0's ops and ``nodes`` maps each to the full graph's ids of that op in every copy. ``params`` maps copy 0's
    parameter inputs to every copy's. ``loop_in`` maps each ``LoopIn`` marker to the ``LoopOut`` marker whose value
    later copies read instead (None for a shared value); ``loop_out`` maps each ``LoopOut`` to the copy 0 op it
    marks. The rolled graph's first ``outputs`` outputs are the program's.
    """

    graph: Graph
    full: Graph
    copies: int
    layer: frozenset[int]
    nodes: dict[int, tuple[int, ...]]
    params: dict[str, tuple[str, ...]]
    loop_in: dict[int, int | None]
    loop_out: dict[int, int]
    outputs: int

    @property
    def markers(self) -> frozenset[int]:
        """The rolled ids of every loop marker."""
        return frozenset(self.loop_in) | frozenset(self.loop_out)

    @property
    def hlir(self) -> HLIRStage:
        """The HLIR stage of the rolled graph, its layer (ops, parameters and loop markers) drawn as one box marked
        with the number of copies."""
        params = frozenset(self.graph.inputs[name].node.id for name in self.params)
        return HLIRStage(self.graph, layer=(self.layer | self.markers | params, self.copies))

    def __repr__(self) -> str:
        return (f"<ll.Rolling {self.copies} copies of {len(self.layer)} ops, {len(self.params)} parameters each; "
                f"{len(self.full.nodes)} nodes rolled to {len(self.graph.nodes)}>")


def roll(graph: Graph, min_ops: int = MIN_LAYER_OPS) -> Rolling | None:
    """The graph with its longest run of identical layers rolled, or None when it repeats no layer of at least
    ``min_ops`` ops at least twice."""
    ops = [n for n in graph.live_nodes() if n.op not in (*_LEAVES, Op.OUTPUT)]
    for start, period, copies in _candidates(ops, min_ops):
        try:
            return _Roller(graph, ops[start:start + period * copies], period, copies).rolled()
        except _NotALoop:
            continue
    return None


def _key(node: Node) -> tuple:
    """What two copies' ops must share: the op, its argument, shape and dtype, and each operand's view (and, for a
    constant, the constant itself)."""
    reads = tuple((src.id if src.op == Op.CONSTANT else None, tracker) for src, tracker in node.sources)
    return node.op, repr(node.arg), node.shape, node.dtype, reads


def _candidates(ops: list[Node], min_ops: int) -> list[tuple[int, int, int]]:
    """``(start, period, copies)`` of the periodic stretches of the ops' keys, most ops covered first (then the
    shorter period): for each period the longest stretch where every op's key equals the key ``period`` ops on."""
    codes: dict[tuple, int] = {}
    keys = np.array([codes.setdefault(_key(n), len(codes)) for n in ops], dtype=np.int64)
    found = []
    for period in range(min_ops, len(ops) // 2 + 1):
        same = np.concatenate(([0], (keys[:-period] == keys[period:]).astype(np.int8), [0]))
        edges = np.diff(same)
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        if not len(starts):
            continue
        best = int(np.argmax(ends - starts))
        copies = (int(ends[best] - starts[best]) + period) // period
        if copies >= 2:
            found.append((copies * period, -period, int(starts[best]), period, copies))
    found.sort(reverse=True)
    return [(start, period, copies) for _, _, start, period, copies in found[:MAX_TRIES]]


class _Roller:
    """Checks that a candidate run's copies read alike and builds the rolled graph."""

    def __init__(self, graph: Graph, run: list[Node], period: int, copies: int):
        self.graph, self.period, self.copies = graph, period, copies
        self.run = run
        self.place = {n.id: divmod(i, period) for i, n in enumerate(run)}  # full id -> (copy, position)
        self.carried: dict[int, Node] = {}  # position carried to the next copy -> what copy 0 reads instead
        self.carry_reads: dict[tuple[int, int], int] = {}  # (position, operand) reading a carried value -> its position
        self.shared: dict[int, Node] = {}  # id -> a node outside the run that every copy reads
        self.params: dict[int, tuple[Node, ...]] = {}  # copy 0's parameter input id -> every copy's
        self.read_after: set[int] = set()  # positions of the last copy that nodes after the run read
        self._classify_reads()
        self._check_readers()

    def _classify_reads(self) -> None:
        period, copies = self.period, self.copies
        for j in range(period):
            first = self.run[j]
            for s, (src, _) in enumerate(first.sources):
                reads = [self._read(c, self.run[c * period + j].sources[s][0]) for c in range(copies)]
                kinds = {r[0] for r in reads}
                if kinds == {"same"} and len(set(reads)) == 1:
                    continue
                if reads[0][0] == "outside" and set(reads[1:]) == {reads[1]} and reads[1][0] == "prev":
                    position = reads[1][1]
                    if src.id > self.run[0].id:
                        raise _NotALoop(f"copy 0's carried value h{src.id} is made after the run starts")
                    if self.carried.setdefault(position, src) is not src:
                        raise _NotALoop(f"copy 0 reads two nodes where later copies read position {position}")
                    self.carry_reads[j, s] = position
                    continue
                if kinds == {"outside"}:
                    nodes = tuple(self.graph.nodes[r[1]] for r in reads)
                    if len({n.id for n in nodes}) == 1:
                        self.shared[src.id] = src
                        continue
                    if self._parameters(nodes):
                        if self.params.setdefault(src.id, nodes) != nodes:
                            raise _NotALoop(f"parameter {src.arg!r} stands for two inputs in another copy")
                        continue
                raise _NotALoop(f"position {j}, operand {s} is read differently by the copies")

    def _read(self, copy: int, src: Node) -> tuple[str, int]:
        if src.id not in self.place:
            return "outside", src.id
        c, j = self.place[src.id]
        if c == copy:
            return "same", j
        if c == copy - 1:
            return "prev", j
        raise _NotALoop("a copy reads a copy other than its predecessor")

    def _parameters(self, nodes: tuple[Node, ...]) -> bool:
        first = nodes[0]
        inputs = self.graph.inputs
        return (len({n.id for n in nodes}) == len(nodes)
                and all(n.op == Op.INPUT and n.shape == first.shape and n.dtype == first.dtype
                        and inputs[n.arg].is_weight == inputs[first.arg].is_weight for n in nodes))

    def _check_readers(self) -> None:
        """Only the run's last copy is read after the run (and the graph's outputs read nothing else of it); each
        copy's parameters are read by that copy alone."""
        owner = {p.id: c for nodes in self.params.values() for c, p in enumerate(nodes)}
        last = self.copies - 1
        for node in self.graph.live_nodes():
            place = self.place.get(node.id)
            for src, _ in node.sources:
                if src.id in owner and (place is None or place[0] != owner[src.id]):
                    raise _NotALoop(f"parameter {src.arg!r} is read outside its copy")
                if place is None and src.id in self.place:
                    c, j = self.place[src.id]
                    if c != last:
                        raise _NotALoop("a node after the run reads a copy before the last")
                    self.read_after.add(j)

    # ---- the rolled graph ------------------------------------------------------------------
    def rolled(self) -> Rolling:
        full, period, copies = self.graph, self.period, self.copies
        first_id, last_id = self.run[0].id, self.run[period - 1].id  # copy 0's first and last ops
        later_params = {p.id for nodes in self.params.values() for p in nodes[1:]}
        out = Graph()
        out.dynamic, out.size_inputs, out.specialised = full.dynamic, dict(full.size_inputs), dict(full.specialised)
        new: dict[int, Node] = {}
        carried_in: dict[int, Node] = {}  # carried position -> its LoopIn marker
        shared_in: dict[int, Node] = {}  # full id of a shared computed node -> its LoopIn marker
        loop_out: dict[int, Node] = {}  # position -> its LoopOut marker
        label = f"layer ×{copies}"

        latest: dict[int, Node] = {}  # rolled id -> its last LoopIn marker

        def mark(node: Node, origin: str) -> Node:
            # a second marker of one node marks the first: two alike would be one e-class, one kernel
            source = latest.get(node.id, node)
            with out.origin(origin):
                latest[node.id] = out._add(Op.CAST, [(source, ShapeTracker.contiguous(node.shape))], node.shape,
                                           node.dtype, node.dtype)
            return latest[node.id]

        for node in full.live_nodes():
            if node.id in later_params or (node.id in self.place and self.place[node.id][0] > 0):
                continue
            if node.id == first_id:
                for position, init in sorted(self.carried.items()):
                    carried_in[position] = mark(new[init.id], f"LoopIn: carried into {label}")
                for src in self.shared.values():
                    if src.op not in _LEAVES:
                        shared_in[src.id] = mark(new[src.id], f"LoopIn: shared by {label}")
            new[node.id] = self._copy(out, node, new, carried_in, shared_in, loop_out)
            if node.id == last_id:
                for position in sorted(set(self.carried) | self.read_after):
                    loop_out[position] = mark(new[self.run[position].id], f"LoopOut: carried out of {label}")
        extra = sorted(set(self.carried) - self.read_after)
        for k, position in enumerate(extra):
            node = loop_out[position]
            out.outputs[f"{label} carry {k}"] = out._add(
                Op.OUTPUT, [(node, ShapeTracker.contiguous(node.shape))], node.shape, node.dtype, f"{label} carry {k}")
        layer = frozenset(new[n.id].id for n in self.run[:period])
        return Rolling(
            graph=out, full=full, copies=copies, layer=layer,
            nodes={new[n.id].id: tuple(self.run[c * period + j].id for c in range(copies))
                   for j, n in enumerate(self.run[:period])},
            params={nodes[0].arg: tuple(n.arg for n in nodes) for nodes in self.params.values()},
            loop_in={**{m.id: loop_out[position].id for position, m in carried_in.items()},
                     **{m.id: None for m in shared_in.values()}},
            loop_out={m.id: new[self.run[position].id].id for position, m in loop_out.items()},
            outputs=len(full.outputs))

    def _copy(self, out: Graph, node: Node, new: dict[int, Node], carried_in: dict[int, Node],
              shared_in: dict[int, Node], loop_out: dict[int, Node]) -> Node:
        """``node`` in the rolled graph: copy 0 reads carried and shared computed values through their ``LoopIn``,
        and nodes after the run read the last copy through copy 0's ``LoopOut``."""
        position = self.place[node.id][1] if node.id in self.place else None
        sources = []
        for s, (src, tracker) in enumerate(node.sources):
            if (position, s) in self.carry_reads:
                sources.append((carried_in[self.carry_reads[position, s]], tracker))
            elif position is not None and src.id in shared_in:
                sources.append((shared_in[src.id], tracker))
            elif position is None and src.id in self.place:
                sources.append((loop_out[self.place[src.id][1]], tracker))
            else:
                sources.append((new[src.id], tracker))
        copied = Node(len(out.nodes), node.op, tuple(sources), node.shape, node.dtype, node.arg, node.origin)
        out.nodes.append(copied)
        if node.op == Op.INPUT:
            spec = self.graph.inputs[node.arg]
            out.inputs[node.arg] = type(spec)(node.arg, copied, spec.is_weight)
            if spec.is_weight:
                out.weights[node.arg] = self.graph.weights[node.arg]
        elif node.op == Op.OUTPUT:
            out.outputs[node.arg] = copied
        return copied
