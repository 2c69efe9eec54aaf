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

Dynamo names the size of each layer's own inputs apart (``s84`` for one layer's cached keys, ``s87`` for the next's),
though they are equal at every call: copies whose ops are copy 0's with its symbolic sizes renamed roll too.
``Rolling.renames`` holds each copy's renaming, which every kernel made for that copy takes (``Rolling.renamed``), so
each copy computes with its own sizes. The renamed sizes may not shape what one copy carries to the next or to the ops
after the run.

A layer may also give outputs of its own, one set per copy (a causal LM's keys and values for its KV cache): where
every copy's value at one position is a program output, read through one view, the rolled graph keeps copy 0's
output only, and ``Rolling.output_copies`` says which copy's kernels give each of the program's outputs. Ops that
only outputs read (the contiguous copy an output of a permuted view takes) are looked at right after what they read,
so a layer's output copies count as the layer's ops wherever the graph put them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.ops import Op
from ..core.phases import phase
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr
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
    marks. The rolled graph's first ``outputs`` outputs are the program's; ``output_copies`` gives, for each of the
    full graph's outputs in order, the rolled output that computes it and the copy whose kernels do (None for an
    output the layer does not give per copy).
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
    output_copies: tuple[tuple[int, int | None], ...]
    renames: tuple[dict[str, str], ...]

    def renamed(self, value: Any, copy: int | None) -> Any:
        """``value`` (an expression, a view, a tuple of them, or anything else, left as it is) as copy ``copy`` has
        it: copy 0's symbolic sizes renamed to that copy's."""
        names = self.renames[copy] if copy is not None else {}
        return _renamed(value, functools.partial(_name_in, names)) if names else value

    def sized_by_copy(self, value: Any) -> bool:
        """Whether ``value`` (as ``renamed`` takes it) mentions a symbolic size that some copy renames."""
        moved = {name for names in self.renames for name in names}
        return bool(moved) and not moved.isdisjoint(_sizes(value))

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


@phase("rolling")
def roll(graph: Graph, min_ops: int = MIN_LAYER_OPS) -> Rolling | None:
    """The graph with its longest run of identical layers rolled, or None when it repeats no layer of at least
    ``min_ops`` ops at least twice."""
    order = _output_copies_sunk(graph.live_nodes())
    ops = [n for n in order if n.op not in (*_LEAVES, Op.OUTPUT)]
    for start, period, copies in _candidates(ops, min_ops):
        try:
            return _Roller(graph, order, ops[start:start + period * copies], period, copies).rolled()
        except _NotALoop:
            continue
    return None


def _output_copies_sunk(nodes: list[Node]) -> list[Node]:
    """``nodes`` (in id order, a topological order) with every op that only outputs read moved to right after the
    latest node it reads: still a topological order."""
    readers: dict[int, set[Op]] = {}
    for node in nodes:
        for src, _ in node.sources:
            readers.setdefault(src.id, set()).add(node.op)
    after: dict[int, list[Node]] = {}  # node id -> the ops placed right after it, in their order
    for node in nodes:
        if node.op not in (*_LEAVES, Op.OUTPUT) and node.sources and readers.get(node.id) == {Op.OUTPUT}:
            after.setdefault(max(src.id for src, _ in node.sources), []).append(node)
    moved = {n.id for followers in after.values() for n in followers}
    return [n for node in nodes if node.id not in moved for n in (node, *after.get(node.id, ()))]


def _renamed(value: Any, rename: Callable[[str], str]) -> Any:
    """``value`` (an expression, a view, or a tuple of them) with each symbolic size ``s`` renamed ``rename(s)``."""
    if isinstance(value, Expr):
        names = value.variables()
        return value.substitute(**{n: Expr.var(rename(n)) for n in names}) if names else value
    if isinstance(value, ShapeTracker):
        return ShapeTracker(*(_renamed(part, rename) for part in (value.dims, value.strides, value.masks)))
    if isinstance(value, tuple):
        return tuple(_renamed(item, rename) for item in value)
    return value


def _sizes(value: Any) -> set[str]:
    """The symbolic sizes ``value`` (as ``_renamed`` takes it) mentions."""
    if isinstance(value, Expr):
        return value.variables()
    if isinstance(value, ShapeTracker):
        return _sizes((value.dims, value.strides, value.masks))
    if isinstance(value, tuple):
        return set().union(*map(_sizes, value))
    return set()


def _key(node: Node, rename: Callable[[str], str] | None = None) -> tuple:
    """What two copies' ops must share: the op, its argument, shape and dtype, and each operand's view (and, for a
    constant, the constant itself), with the symbolic sizes renamed by ``rename`` where given."""
    reads = tuple((src.id if src.op == Op.CONSTANT else None, tracker) for src, tracker in node.sources)
    key = node.op, node.arg, node.shape, node.dtype, reads
    op, arg, shape, dtype, reads = _renamed(key, rename) if rename else key
    return op, repr(arg), shape, dtype, reads


def _name_in(names: dict[str, str], name: str) -> str:
    return names.get(name, name)


def _anonymous(name: str) -> str:
    """Every symbolic size as one: copies may differ by a renaming (``_Roller`` finds and checks it)."""
    return "_"


def _candidates(ops: list[Node], min_ops: int) -> list[tuple[int, int, int]]:
    """``(start, period, copies)`` of the periodic stretches of the ops' keys, most ops covered first (then the
    shorter period): for each period the longest stretch where every op's key equals the key ``period`` ops on."""
    codes: dict[tuple, int] = {}
    symbolic = any(dim.variables() for n in ops for dim in n.shape)
    keys = np.array([codes.setdefault(_key(n, _anonymous if symbolic else None), len(codes)) for n in ops],
                    dtype=np.int64)
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

    def __init__(self, graph: Graph, order: list[Node], run: list[Node], period: int, copies: int):
        self.graph, self.order, self.period, self.copies = graph, order, period, copies
        self.run = run
        self.place = {n.id: divmod(i, period) for i, n in enumerate(run)}  # full id -> (copy, position)
        self.carried: dict[int, Node] = {}  # position carried to the next copy -> what copy 0 reads instead
        self.carry_reads: dict[tuple[int, int], int] = {}  # (position, operand) reading a carried value -> its position
        self.shared: dict[int, Node] = {}  # id -> a node outside the run that every copy reads
        self.params: dict[int, tuple[Node, ...]] = {}  # copy 0's parameter input id -> every copy's
        self.read_after: set[int] = set()  # positions of the last copy that nodes after the run read
        self.output_copy: dict[int, tuple[int, int]] = {}  # an output node the layer gives per copy -> (copy, k)
        self._classify_reads()
        self.renames = self._renames()
        self._check_outputs()
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
        shape = _renamed(first.shape, _anonymous)
        return (len({n.id for n in nodes}) == len(nodes)
                and all(n.op == Op.INPUT and _renamed(n.shape, _anonymous) == shape and n.dtype == first.dtype
                        and inputs[n.arg].is_weight == inputs[first.arg].is_weight for n in nodes))

    def _renames(self) -> tuple[dict[str, str], ...]:
        """Each copy's renaming of copy 0's symbolic sizes, read off its parameters' shapes (a size that is one
        symbol in both); every op of the copy must be copy 0's, renamed so. The renamed sizes may not shape a value
        carried to the next copy or read after the run."""
        renames: list[dict[str, str]] = [{} for _ in range(self.copies)]
        for nodes in self.params.values():
            for c, node in enumerate(nodes):
                for mine, theirs in zip(nodes[0].shape, node.shape):
                    if mine != theirs and mine.op == theirs.op == "var":
                        if renames[c].setdefault(mine.args[0], theirs.args[0]) != theirs.args[0]:
                            raise _NotALoop(f"copy {c} renames the size {mine} two ways")
        for c, names in enumerate(renames):
            rename = functools.partial(_name_in, names) if names else None
            for j in range(self.period):
                if _key(self.run[j], rename) != _key(self.run[c * self.period + j]):
                    raise _NotALoop(f"copy {c} does at position {j} what copy 0 does with other sizes")
        return tuple(renames)

    def _renaming(self, copy: int) -> Callable[[str], str] | None:
        return functools.partial(_name_in, self.renames[copy]) if self.renames[copy] else None

    def _check_outputs(self) -> None:
        """The outputs the layer gives per copy: copy 0's outputs read positions ``j`` through views ``t`` (its
        *pattern*, in output order); every copy before the last must read exactly that pattern, and the last copy's
        outputs read it in order too (its other outputs are reads after the run)."""
        read: dict[int, list[tuple[Node, tuple[int, object]]]] = {}  # copy -> its outputs, each with (j, t)
        for node in self.graph.outputs.values():
            src, tracker = node.sources[0]
            if src.id in self.place:
                c, j = self.place[src.id]
                read.setdefault(c, []).append((node, (j, tracker)))
        first = [at for _, at in read.get(0, ())]
        if not first:
            return
        for c in range(self.copies):
            rename = self._renaming(c)
            pattern = [(j, _renamed(tracker, rename) if rename else tracker) for j, tracker in first]
            if c < self.copies - 1 and [at for _, at in read.get(c, ())] != pattern:
                raise _NotALoop(f"copy {c}'s outputs are not copy 0's")
            k = 0
            for node, at in read.get(c, ()):
                if k < len(pattern) and at == pattern[k]:
                    self.output_copy[node.id] = (c, k)
                    k += 1
        if k < len(pattern):
            raise _NotALoop("the last copy does not give the outputs the others give")

    def _check_readers(self) -> None:
        """Only the run's last copy is read after the run (and the graph's outputs read nothing else of it, but for
        the outputs every copy gives); each copy's parameters are read by that copy alone."""
        owner = {p.id: c for nodes in self.params.values() for c, p in enumerate(nodes)}
        last = self.copies - 1
        for node in self.graph.live_nodes():
            if node.id in self.output_copy:
                continue
            place = self.place.get(node.id)
            for src, _ in node.sources:
                if src.id in owner and (place is None or place[0] != owner[src.id]):
                    raise _NotALoop(f"parameter {src.arg!r} is read outside its copy")
                if place is None and src.id in self.place:
                    c, j = self.place[src.id]
                    if c != last:
                        raise _NotALoop("a node after the run reads a copy before the last")
                    self.read_after.add(j)
        moved = {name for names in self.renames for name in names}
        for j in (*self.carried, *self.read_after):
            if moved & _sizes(self.run[j].shape):
                raise _NotALoop(f"position {j}, carried or read after the run, has a size that differs by copy")

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

        for node in self.order:
            if node.id in later_params or (node.id in self.place and self.place[node.id][0] > 0) or \
                    self.output_copy.get(node.id, (0,))[0] > 0:
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
        program_outputs = len(out.outputs)
        index = {name: i for i, name in enumerate(out.outputs)}
        given = {self.output_copy[n.id][1]: index[n.arg] for n in full.outputs.values()
                 if self.output_copy.get(n.id, (None,))[0] == 0}  # k -> copy 0's output k, in the rolled graph
        output_copies = tuple((given[self.output_copy[n.id][1]], self.output_copy[n.id][0]) if n.id in self.output_copy
                              else (index[n.arg], None) for n in full.outputs.values())
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
            outputs=program_outputs, output_copies=output_copies, renames=self.renames)

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
            elif position is None and src.id in self.place and node.id not in self.output_copy:
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
