"""Genomes: one chosen e-node per IR / IList e-class, and the LLIR a genome extracts.

The ``ChoiceSpace`` of a saturated e-graph lists, for every e-class of sort IR or IList,
its usable (not subsumed) e-nodes in a fixed order. A ``Genome`` picks one per e-class.
Its hash is the XOR of per-(e-class, e-node) hashes, so changing one pick updates it in
O(1). ``extract`` walks from the root through the picked e-nodes only and builds the LLIR,
or refuses the genome with a reason: a cycle, a dead end, or an op with no kernel form.

Everything else (shapes, strides, dtypes: Expression, EList, View, DType e-classes) is not
part of the genome: any representative will do, and the smallest term is used.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ..core.arguments import fail, integer
from ..core.dtypes import DType
from ..core.errors import LuminalError, NoEClassError, Refused
from ..core.ops import END_MARKERS, FUSED_OPS, GPU_KERNELS, IN_REGION, KERNELS, MARKERS, Group
from ..core.phases import phase
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import EGGLOG_EXPR_OPS, Expr
from ..core.tiling import MmaTiling, Tiling
from ..egraph.snapshot import GENOME_SORTS, ENode, Snapshot, cheapest
from ..hlir.graph import Graph
from .llir import LLIR, GatheredRead, Kernel
from .regions import find_regions

_DTYPES = {d.egglog: d for d in DType}
_FUSION = frozenset((*END_MARKERS, *IN_REGION))
_VIEWS = {op.name: tuple(f.name for f in op.fields if f.sort == "View") for op in KERNELS.values()}  # operands' views
_MATMUL_FIELDS = frozenset(f.name for f in KERNELS["Matmul"].kernel_fields)  # a tiling's numbers come after them


def _fields(kind: ENode) -> dict[str, str]:
    """A kernel op's or marker's fields by name: field -> e-class."""
    declared = MARKERS.get(kind.op) or KERNELS[kind.op.removeprefix("Kernel")].kernel_fields
    return {field.name: child for field, child in zip(declared, kind.children)}


def _node_hash(cid: str, node: ENode) -> int:
    key = f"{cid}|{node.op}|{'|'.join(node.literals)}|{'|'.join(node.children)}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


class ChoiceSpace:
    """The e-classes a genome picks in, their usable e-nodes, and how to read fields back."""

    def __init__(self, snapshot: Snapshot, graph: Graph):
        if snapshot.root is None:
            raise ValueError("the e-graph has no root e-class")
        self.snapshot = snapshot
        self.graph = graph
        self.classes = sorted(cid for cid, c in snapshot.classes.items() if c.sort in GENOME_SORTS)
        self.position = {cid: i for i, cid in enumerate(self.classes)}
        self.options = [sorted((n for n in snapshot.classes[cid].nodes if not n.subsumed), key=lambda n: n.id)
                        for cid in self.classes]
        self.hashes = [[_node_hash(cid, n) for n in options] for cid, options in zip(self.classes, self.options)]
        self.mutable = [i for i, options in enumerate(self.options) if len(options) > 1]
        self._mutable: dict[frozenset[str], list[int]] = {frozenset(): self.mutable}
        self._allowed: dict[tuple[int, frozenset[str]], list[int]] = {}

    def mutable_without(self, without: frozenset[str]) -> list[int]:
        """The e-classes (by position) with more than one pick that runs no kernel op in ``without``."""
        if without not in self._mutable:
            self._mutable[without] = [i for i in self.mutable if len(self.allowed(i, without)) > 1]
        return self._mutable[without]

    # ---- genomes --------------------------------------------------------------------------
    def genome(self, picks: list[int]) -> Genome:
        value = 0
        for i, pick in enumerate(picks):
            if self.options[i]:
                value ^= self.hashes[i][pick]
        return Genome(self, list(picks), value)

    def random_genome(self, seed: int, without: Iterable[str] = ()) -> Genome:
        """A random genome that extracts and picks no kernel op in ``without``: random weights on the e-nodes of
        e-classes with a choice (the rest weigh nothing, so a big alternative such as a fused region is not
        penalised for its size), then the cheapest pick per e-class."""
        rng = random.Random(seed)
        weights = {n.id: rng.random() + 0.01 if len(options) > 1 else 0.0 for options in self.options for n in options}
        return self.genome(self._cheapest(weights, rng, frozenset(without)))

    @phase("extraction")
    def smallest_genome(self, without: Iterable[str] = ()) -> Genome:
        """The genome of the smallest terms (every e-node weighs 1) that picks no kernel op in ``without``
        (LLIR op names, e.g. ``("Matmul",)`` for every contraction as a product and a sum). Like every default
        genome it runs each contraction through the library (no ``GPU_KERNELS``)."""
        return self.genome(self._cheapest({}, random.Random(0), frozenset((*without, *GPU_KERNELS))))

    @phase("extraction")
    def fused_genome(self, without: Iterable[str] = ()) -> Genome:
        """The genome that fuses most, picking no kernel op in ``without``: each kernel that computes weighs one (a
        region's end for its region), while inputs, constants, the other markers, fused ops and operand lists weigh
        nothing, so each e-class takes the fewest kernels (one region over two that split it, whatever constants either
        reads). A matmul (a contraction of rows by columns) is the exception: a region that computes it as row sums
        of products weighs more than any number of kernels, so it stays a matmul (the search may still try such a
        region)."""
        weightless = {*IN_REGION, "KernelInput", "KernelConstant"}
        weights = {n.id: 0.0 for options in self.options for n in options if n.op in ("ICons", "INil")
                   or (n.op == "Op" and getattr(self.kernel_of(n), "op", "") in weightless)}
        snapshot = self.snapshot  # a matmul stays one: a region computing it as row sums of products weighs more
        for cid, origin in snapshot.fused_origins.items():
            if cid in self.position and any(getattr(self.kernel_of(n), "op", "") == "KernelMatmulTiled"
                                            for n in snapshot.classes[origin].nodes if n.op == "Op"):
                weights.update({n.id: float(len(self.classes)) for n in self.options[self.position[cid]]})
        # a region that cannot run as one kernel (``Refused`` "broken region") is left out and the next best taken
        for _ in range(len(self.classes) + 1):
            genome = self.genome(self._cheapest(weights, random.Random(0), frozenset((*without, *GPU_KERNELS))))
            try:
                extract(genome)
            except Refused as refused:
                if refused.eclass is None:
                    return genome
                weights[genome.pick(refused.eclass).id] = math.inf
                continue
            return genome
        raise Refused("broken region", "every region the e-graph offers is broken")

    def unfused_genome(self) -> Genome:
        """The smallest genome without fused regions (no ``FusionEnd`` picked)."""
        return self.smallest_genome(without=_FUSION)

    def warp_per_row(self, genome: Genome) -> Genome:
        """``genome`` with each row region it picks run a warp per row: each ``FusionEnd`` picked where the same
        region's ``FusionEndWarp`` twin is an option picks the twin instead."""
        def end(node: ENode) -> str | None:
            return getattr(self.kernel_of(node), "op", None) if node.op == "Op" else None

        picks = list(genome.picks)
        for i, options in enumerate(self.options):
            if options and end(node := options[picks[i]]) == "FusionEnd":
                picks[i] = next((k for k, n in enumerate(options)
                                 if end(n) == "FusionEndWarp" and n.children[1] == node.children[1]), picks[i])
        return self.genome(picks)

    def alternatives(self, genome: Genome, cid: str) -> list[Genome]:
        """``genome`` with e-class ``cid`` picking each of its e-nodes in turn (one genome per e-node, the rest
        unchanged): for example every implementation of one contraction."""
        if genome.space is not self:
            fail("ChoiceSpace.alternatives", "genome", genome, "a genome of this choice space")
        if cid not in self.position:
            raise NoEClassError(f"ChoiceSpace.alternatives(cid={cid!r}): expected one of the {len(self.classes)} "
                                "e-classes a genome picks in (IR or IList), such as " + repr(self.snapshot.root))
        i = self.position[cid]
        return [self.genome([pick if j == i else old for j, old in enumerate(genome.picks)])
                for pick in range(len(self.options[i]))]

    def _skipped(self, node: ENode, without: frozenset[str]) -> bool:
        """Whether an Op e-node runs no kernel, or one of the ``without`` ops."""
        if node.op != "Op":
            return False
        kind = self.kernel_of(node)
        return kind is None or kind.op.removeprefix("Kernel") in without

    def allowed(self, i: int, without: frozenset[str]) -> list[int]:
        """The picks of e-class ``i`` (by position) that run no kernel op in ``without``."""
        if not without:
            return list(range(len(self.options[i])))
        if (i, without) not in self._allowed:  # asked on every mutation: kept
            self._allowed[(i, without)] = [k for k, node in enumerate(self.options[i]) if node.op != "Op" or getattr(
                self.kernel_of(node), "op", "").removeprefix("Kernel") not in without]
        return self._allowed[(i, without)]

    def _cheapest(self, weights: dict[str, float], rng: random.Random,
                  without: frozenset[str] = frozenset()) -> list[int]:
        """Knuth's extraction over IR/IList e-classes with kernel-backed e-nodes only (none running an op in
        ``without``), so the picks reachable from the root form no cycle; unreached e-classes pick at random."""
        def cost(pick: tuple[int, ENode], best: dict[str, tuple[float, tuple[int, ENode]]]) -> float:
            node = pick[1]
            return weights.get(node.id, 1.0) + sum(best[c][0] for c in set(node.children) if c in best)

        nodes = ((self.classes[i], (k, node), {c for c in node.children if c in self.position})
                 for i, options in enumerate(self.options) for k, node in enumerate(options)
                 if not self._skipped(node, without))
        best = cheapest(nodes, cost)
        return [best[cid][1][0] if cid in best else rng.randrange(max(len(self.options[i]), 1))
                for i, cid in enumerate(self.classes)]

    # ---- reading e-classes outside the genome ----------------------------------------------
    def kernel_of(self, op_node: ENode) -> ENode | None:
        """The e-node in an Op e-node's OpKind e-class that a kernel runs (``Kernel*``, a fusion
        marker or a fused op), if any."""
        kinds = self.snapshot.classes[op_node.children[0]].nodes
        return next((n for n in sorted(kinds, key=lambda n: n.id) if n.op.startswith("Kernel") or n.op in _FUSION),
                    None)

    @cached_property
    def _representatives(self) -> dict[str, ENode]:
        return {cid: node for cid, (_, node) in self.snapshot._costs.items()}

    def expr(self, cid: str) -> Expr:
        node = self._representatives[cid]
        if node.op == "MNum":
            return Expr.num(int(node.literals[0]))
        if node.op == "MVar":
            return Expr.var(json.loads(node.literals[0]))
        if node.op == "MIter":
            return Expr.z()
        if node.op in EGGLOG_EXPR_OPS:
            return EGGLOG_EXPR_OPS[node.op].build(*(self.expr(c) for c in node.children))
        raise ValueError(f"{cid} ({node.op}) is not an integer expression")

    def value(self, cid: str) -> float | int | Expr:
        """A Constant's value: a float (``MFloat``), else an integer expression."""
        node = self._representatives[cid]
        if node.op == "MFloat":
            return float(node.literals[0])
        expr = self.expr(cid)
        return expr.value if expr.is_num else expr

    def elist(self, cid: str) -> tuple[Expr, ...]:
        items = []
        node = self._representatives[cid]
        while node.op == "ECons":
            items.append(self.expr(node.children[0]))
            node = self._representatives[node.children[1]]
        return tuple(items)

    def view(self, cid: str, dims: tuple[Expr, ...]) -> ShapeTracker:
        node = self._representatives[cid]
        strides = self.elist(node.children[0])
        masks = self.elist(node.children[1]) if node.op == "Masked" else (Expr.num(1),) * len(dims)
        return ShapeTracker(dims, strides, masks)

    def dtype(self, cid: str) -> DType:
        return _DTYPES[self._representatives[cid].op]


@dataclass
class Genome:
    """One pick per IR / IList e-class; ``hash`` is the XOR of the picks' hashes."""

    space: ChoiceSpace
    picks: list[int]
    hash: int
    mutations: list[tuple[str, int, int]] = field(default_factory=list)  # (e-class, old pick, new pick)

    @property
    def choices(self) -> dict[str, str]:
        """E-class id -> the id of the e-node picked there."""
        return {cid: self.space.options[i][k].id for i, (cid, k) in enumerate(zip(self.space.classes, self.picks))
                if self.space.options[i]}

    def pick(self, cid: str) -> ENode:
        i = self.space.position[cid]
        if not self.space.options[i]:
            raise Refused("dead end", f"{cid} has no usable e-node")
        return self.space.options[i][self.picks[i]]

    def mutate(self, n: int, rng: random.Random, without: frozenset[str] = frozenset()) -> Genome:
        """A copy with ``n`` random e-classes (of those with a choice) picking another e-node, none that runs a
        kernel op in ``without``."""
        integer("Genome.mutate", "n", n, minimum=0)
        if not isinstance(rng, random.Random):
            fail("Genome.mutate", "rng", rng, "a random.Random, e.g. random.Random(0)")
        space, picks, value = self.space, list(self.picks), self.hash
        mutable = space.mutable_without(without)
        mutations = []
        for i in rng.sample(mutable, min(n, len(mutable))):
            old = picks[i]
            new = rng.choice([k for k in space.allowed(i, without) if k != old])
            value ^= space.hashes[i][old] ^ space.hashes[i][new]
            picks[i] = new
            mutations.append((space.classes[i], old, new))
        return Genome(space, picks, value, mutations)

    def __repr__(self) -> str:
        return f"<Genome {self.hash:016x}, {len(self.picks)} e-classes>"


def children(parent: Genome, count: int, mutations: int, rng: random.Random, seen: set[int],
             without: frozenset[str] = frozenset()) -> list[Genome]:
    """Up to ``count`` new genomes, each 1..``mutations`` reassignments from ``parent`` (none to a kernel op in
    ``without``), none whose hash is in ``seen`` (which is updated); at most ``100 * count`` attempts."""
    out = []
    for _ in range(100 * count):
        if len(out) == count or not parent.space.mutable_without(without):
            break
        child = parent.mutate(rng.randint(1, max(mutations, 1)), rng, without)
        if child.hash not in seen:
            seen.add(child.hash)
            out.append(child)
    return out


# ---- extraction ------------------------------------------------------------------------------
def _reads_allowed(reader: str, source: str) -> bool:
    """Whether an e-node of op ``reader`` (``KernelAdd``, ``FusedSin``, ...) may read a kernel of op ``source``:
    values inside a region are read only by fused ops and the region's end, all others only outside ones."""
    if reader == "FusionStart":
        return source not in IN_REGION
    if reader in FUSED_OPS or reader in END_MARKERS:
        return source in IN_REGION
    return source not in IN_REGION


@phase("extraction")
def extract(genome: Genome) -> LLIR:
    """The LLIR of a genome, walking from the root through its picks; raises ``Refused``."""
    return _Extraction(genome).run()


class _Extraction:
    """One walk from the root through a genome's picks, depth-first with an explicit stack (a graph of any depth
    extracts), building each e-class's kernel once its operands have theirs."""

    def __init__(self, genome: Genome):
        self.genome = genome
        self.space = genome.space
        self.kernels: list[Kernel] = []
        self.of_class: dict[str, int | None] = {}  # e-class -> its kernel id (None for an OutputJoin)
        self.outputs: dict[int, int] = {}

    def run(self) -> LLIR:
        self.visit(self.space.snapshot.root)
        llir = LLIR(self.kernels, [self.outputs[i] for i in sorted(self.outputs)], self.genome.hash)
        by_id = {k.id: k for k in self.kernels}
        for region in find_regions(llir):  # a region that cannot run as one kernel is refused before anything builds
            try:
                region.body(llir, by_id)
            except LuminalError as error:
                eclass = self.kernels[region.end].eclass
                raise Refused("broken region", f"{eclass}: {error}", eclass) from None
        return llir

    def visit(self, root: str) -> None:
        """Build the kernels of ``root`` and of everything it reads, operands first (kernel ids follow that
        order); a pick that reads itself again on the way down is a cycle."""
        path, on_path = [root], {root}
        pending = [iter(self.operands(root))]
        while path:
            child = next((c for c in pending[-1] if c not in self.of_class), None)
            if child is None:
                cid = path.pop()
                pending.pop()
                on_path.discard(cid)
                self.finish(cid)
                continue
            if child in on_path:
                loop = path[path.index(child):] + [child]
                raise Refused("cycle", " -> ".join(loop))
            path.append(child)
            on_path.add(child)
            pending.append(iter(self.operands(child)))

    def operands(self, cid: str) -> list[str]:
        """The IR e-classes the pick of ``cid`` reads."""
        node = self.genome.pick(cid)
        if node.op == "OutputJoin":
            return list(node.children)
        if node.op == "Output":
            return [node.children[0]]
        if node.op == "Op":
            return self.inputs(node.children[1])
        return []

    def finish(self, cid: str) -> None:
        """Build the kernel of ``cid``, whose operands are built."""
        kernel = self.build(cid, self.genome.pick(cid))
        self.of_class[cid] = None if kernel is None else kernel.id
        if kernel is not None:
            self.kernels.append(kernel)

    def inputs(self, cid: str) -> list[str]:
        """The IR e-classes of an IList e-class, through the genome's IList picks."""
        classes, seen = [], set()
        while True:
            if cid in seen:
                raise Refused("cycle", f"the operand list {cid} contains itself")
            seen.add(cid)
            node = self.genome.pick(cid)
            if node.op == "INil":
                return classes
            classes.append(node.children[0])
            cid = node.children[1]

    def check_region_reads(self, reader: str, sources: list[int], cid: str) -> None:
        for source in sources:
            op = self.kernels[source].op
            if not _reads_allowed(reader, op):
                raise Refused("broken region", f"{cid}: {reader} reads a {op}")

    def build(self, cid: str, node: ENode) -> Kernel | None:
        space = self.space
        hlir = tuple(space.snapshot.classes[cid].hlir)
        if node.op == "OutputJoin":
            return None
        if node.op == "Input":
            hlir_node = space.graph.nodes[int(node.literals[0])]
            return Kernel(len(self.kernels), "Input", (), hlir_node.shape, space.dtype(node.children[0]),
                          hlir_node.arg, cid, hlir)
        if node.op == "Output":
            source = self.of_class[node.children[0]]
            if source is None:
                raise Refused("dead end", f"{cid}: an output reads an OutputJoin")
            index = int(node.literals[0])
            self.outputs[index] = len(self.kernels)  # ids follow completion order: sources come first
            # an output may read its producer's buffer under another shape (a reshape view)
            shape = list(space.graph.outputs.values())[index].shape
            return Kernel(len(self.kernels), "Output", ((source, ShapeTracker.contiguous(shape)),), shape,
                          self.kernels[source].dtype, index, cid, hlir)
        if node.op != "Op":
            raise Refused("dead end", f"{cid} picks {node.op}, which computes nothing")
        kind = space.kernel_of(node)
        if kind is None:
            ops = sorted({n.op for n in space.snapshot.classes[node.children[0]].nodes})
            raise Refused("missing kernel op", f"{cid} picks {'/'.join(ops)}, which has no kernel form")
        sources = [self.of_class[c] for c in self.inputs(node.children[1])]
        return self.kernel(len(self.kernels), kind, sources, cid, hlir)

    def kernel(self, kernel_id: int, kind: ENode, sources: list[int | None], cid: str, hlir: tuple) -> Kernel:
        space, f = self.space, _fields(kind)
        if any(s is None for s in sources):
            raise Refused("dead end", f"{cid}: an operand is an OutputJoin")
        self.check_region_reads(kind.op, sources, cid)
        if kind.op in _FUSION:
            shape = space.elist(f["shape"])
            dtype = space.dtype(f["dtype"])
            if kind.op == "FusionStart":
                return Kernel(kernel_id, kind.op, ((sources[0], space.view(f["view"], shape)),), shape, dtype, None,
                              cid, hlir)
            # values inside a region are read in their own layout, a reduction's with its extent appended
            read = (*shape, space.expr(f["extent"])) if "extent" in f else shape
            inside = ShapeTracker.contiguous(read)
            op, arg = ("FusionEnd", "warp") if kind.op == "FusionEndWarp" else (kind.op, None)
            return Kernel(kernel_id, op, tuple((s, inside) for s in sources), shape, dtype, arg, cid, hlir)
        op = kind.op.removeprefix("Kernel")
        group, dtype = KERNELS[op].group, space.dtype(f["dtype"])
        if group in (Group.UNARY, Group.BINARY, Group.TERNARY, Group.CAST):
            shape = space.elist(f["shape"])
            views = tuple(space.view(f[name], shape) for name in _VIEWS[op])
            arg = dtype if group == Group.CAST else None
            return Kernel(kernel_id, op, tuple(zip(sources, views)), shape, dtype, arg, cid, hlir)
        if group == Group.CONTRACT:
            shape = space.elist(f["shape"])
            product = shape + (space.expr(f["extent"]),)
            views = (space.view(f["a"], product), space.view(f["b"], product))
            contracted = space.snapshot.contracts.get(cid)  # the product's HLIR nodes are computed here too
            if contracted is not None:
                hlir = tuple(sorted({*hlir, *space.snapshot.classes[contracted].hlir}))
            numbers = tuple(space.expr(c).value for name, c in f.items() if name not in _MATMUL_FIELDS)
            tiling = {"MatmulTiled": Tiling, "MatmulTensorCore": MmaTiling}[op](*numbers) if numbers else None
            return Kernel(kernel_id, op, tuple(zip(sources, views)), shape, dtype, tiling, cid, hlir)
        if group == Group.GATHERED:  # a contraction with its b read through the gather it replaces
            product = (*space.elist(f["shape"]), space.expr(f["extent"]))
            index_shape, data_shape = space.elist(f["index_shape"]), space.elist(f["data_shape"])
            views = (space.view(f["a"], product), space.view(f["rows"], index_shape),
                     space.view(f["data"], data_shape))
            read = GatheredRead(space.view(f["b"], product), space.expr(f["within"]), space.expr(f["scale"]))
            contracted = space.snapshot.contracts.get(cid)
            if contracted is not None:
                hlir = tuple(sorted({*hlir, *space.snapshot.classes[contracted].hlir}))
            return Kernel(kernel_id, op, tuple(zip(sources, views)), product[:-1], dtype, read, cid, hlir)
        if group == Group.REDUCE:
            shape = space.elist(f["shape"])
            kept = space.view(f["kept"], shape)
            source = ShapeTracker(shape + (space.expr(f["extent"]),), kept.strides + (space.expr(f["stride"]),),
                                  kept.masks + (space.expr(f["mask"]),))
            return Kernel(kernel_id, op, ((sources[0], source),), shape, dtype, None, cid, hlir)
        if group == Group.OPAQUE:  # the HLIR node's call, reading its operands through the node's own views
            node = space.graph.nodes[space.expr(f["node"]).value]
            views = tuple(tracker for _, tracker in node.sources)
            return Kernel(kernel_id, op, tuple(zip(sources, views)), space.elist(f["shape"]), dtype, node.arg, cid,
                          hlir)
        if op == "Iota":
            length = space.expr(f["length"])
            return Kernel(kernel_id, op, (), (length,), dtype, (space.expr(f["expr"]), length), cid, hlir)
        if op == "Constant":
            value = space.value(f["value"])
            return Kernel(kernel_id, op, (), (), dtype, bool(value) if dtype == DType.BOOL else value, cid, hlir)
        if op == "Gather":
            index_shape, data_shape = space.elist(f["index_shape"]), space.elist(f["data_shape"])
            views = (space.view(f["index"], index_shape), space.view(f["data"], data_shape))
            return Kernel(kernel_id, op, tuple(zip(sources, views)), index_shape, dtype, None, cid, hlir)
        if op in ("Scatter", "ScatterAdd"):
            dest_shape, index_shape = space.elist(f["dest_shape"]), space.elist(f["index_shape"])
            views = (space.view(f["dest"], dest_shape), space.view(f["index"], index_shape),
                     space.view(f["source"], index_shape))
            return Kernel(kernel_id, op, tuple(zip(sources, views)), dest_shape, dtype, None, cid, hlir)
        raise Refused("missing kernel op", f"{cid}: no extraction for {kind.op}")
