"""HLIR: the graph of primitive ops that every model is lowered to.

Sixteen primitive ops, plus ``Input``, ``Constant`` and ``Output``:

=========  ==================================================
unary      Log2 Exp2 Sin Sqrt Recip
binary     Add Mul Mod LessThan
other      SumReduce MaxReduce Iota Gather Scatter ScatterAdd Cast
=========  ==================================================

A ``Node`` reads each of its sources through a ``ShapeTracker`` (views never copy data)
and produces one contiguous tensor of ``shape`` and ``dtype``. Nodes are appended in
creation order, which is a topological order. Semantics, as the reference runtime runs
them: ``Mod`` is C's truncated remainder (``fmod``), ``LessThan`` yields bool, ``Iota``
evaluates an index expression in ``z`` over ``0..n-1`` as i32, ``Gather(indexes, data)``
reads ``data`` at logical flat positions, ``Scatter(dest, indexes, src)`` copies ``dest``
and writes ``src`` at logical flat positions, ``ScatterAdd`` adds them there instead (repeated
positions add up: the gradient of a gather), ``Cast`` converts (a cast to the same dtype
is a plain strided copy, which is how views are made contiguous).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.arguments import fail, integer
from ..core.dtypes import DType, from_numpy
from ..core.errors import DTypeError, LuminalError, ShapeError
from ..core.ops import BINARY_OPS, REDUCE_OPS, UNARY_OPS, Op
from ..core.shape_tracker import ShapeTracker, format_shape
from ..core.stage import MAX_DRAWN_NODES, Stage
from ..core.symbolic import Expr, ExprLike, as_expr
from .opaque import OpaqueCall
from .tensor import GraphTensor

if TYPE_CHECKING:
    from ..draw import Picture


@dataclass(eq=False)
class Node:
    """One op in the graph.

    ``arg`` is op-specific: the name of an Input or Output, the value of a Constant (a
    number or an ``Expr``), the reduced axis of a reduction, ``(expr, length)`` of an Iota,
    the target dtype of a Cast. ``origin`` says which high-level op or model line made it.
    """

    id: int
    op: Op
    sources: tuple[tuple[Node, ShapeTracker], ...]
    shape: tuple[Expr, ...]
    dtype: DType
    arg: Any = None
    origin: str | None = None

    @property
    def label(self) -> str:
        if self.op in (Op.INPUT, Op.OUTPUT, Op.CONSTANT):
            return f"{self.op.value} {self.arg}"
        if self.op in REDUCE_OPS:
            return f"{self.op.value} axis={self.arg}"
        if self.op == Op.IOTA:
            return f"Iota {self.arg[0]} n={self.arg[1]}"
        if self.op == Op.CAST:
            return f"Cast {self.arg.value}"
        if self.op == Op.OPAQUE:
            return f"Opaque {self.arg.name}"
        return self.op.value

    def __repr__(self) -> str:
        return f"<Node h{self.id} {self.label} {format_shape(self.shape)} {self.dtype.value}>"


def _check_name(where: str, name: str) -> None:
    if not isinstance(name, str) or not name:
        fail(where, "name", name, "a non-empty str")


@dataclass(frozen=True)
class InputSpec:
    """A graph input: a user input, or a weight whose value the graph holds."""

    name: str
    node: Node
    is_weight: bool


class Graph:
    """A graph under construction: create inputs with ``tensor``, mark results with ``.output()``."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.inputs: dict[str, InputSpec] = {}
        self.outputs: dict[str, Node] = {}
        self.weights: dict[str, np.ndarray] = {}
        # a torch program's shapes: whether torch gave it symbolic sizes (the summary then says where each symbolic
        # dimension comes from), its size arguments (a name and the variable it binds, or the number it must be) and
        # the sizes torch was asked to keep dynamic but specialised ("x[1]": 4), which the summary lists
        self.dynamic = False
        self.size_inputs: dict[str, Expr] = {}
        self.specialised: dict[str, int] = {}
        self._origin: list[str] = []
        self._constants: dict[tuple, Node] = {}

    # ---- building -----------------------------------------------------------------------
    def tensor(self, shape: Sequence[ExprLike | str] | ExprLike | str, name: str,
               dtype: DType = DType.F32) -> GraphTensor:
        """A named input of ``shape`` (sizes: ints >= 0 or names of symbolic dimensions; one size alone is a
        1-d shape) and ``dtype``."""
        if isinstance(shape, (int, np.integer, str, Expr)) and not isinstance(shape, bool):
            shape = (shape,)
        elif not isinstance(shape, Sequence):
            fail("Graph.tensor", "shape", shape, "a tuple of sizes (ints >= 0 or dimension names), e.g. (2, 'seq')")
        for size in shape:
            if isinstance(size, bool) or not isinstance(size, (int, np.integer, str, Expr)) or \
                    (isinstance(size, (int, np.integer)) and size < 0) or size == "":
                fail("Graph.tensor", "shape", shape, "a tuple of sizes, each an int >= 0 or a dimension name")
        return self._input(shape, name, dtype, is_weight=False)

    def weight(self, name: str, value: np.ndarray) -> GraphTensor:
        """A named input whose value the graph keeps (a parameter or a buffer)."""
        value = np.ascontiguousarray(value).reshape(np.shape(value))  # ascontiguousarray makes 0-d arrays 1-d
        try:
            dtype = from_numpy(value.dtype)
        except TypeError:
            raise DTypeError(f"weight {name!r}: numpy dtype {value.dtype} has no luminal_lab dtype (the dtypes are "
                             f"{', '.join(d.value for d in DType)})") from None
        tensor = self._input(value.shape, name, dtype, is_weight=True)
        self.weights[name] = value
        return tensor

    def _input(self, shape, name: str, dtype: DType, is_weight: bool) -> GraphTensor:
        _check_name("Graph.weight" if is_weight else "Graph.tensor", name)
        if not isinstance(dtype, DType):
            raise DTypeError(f"input {name!r}: dtype must be an ll dtype such as ll.f32, got {dtype!r}")
        if name in self.inputs:
            raise LuminalError(f"the graph already has an input named {name!r}")
        dims = tuple(as_expr(d) for d in shape)
        node = self._add(Op.INPUT, (), dims, dtype, name)
        self.inputs[name] = InputSpec(name, node, is_weight)
        return GraphTensor(self, node, ShapeTracker.contiguous(dims))

    def constant(self, value: float | int | bool | Expr, dtype: DType = DType.F32) -> GraphTensor:
        """A scalar constant (shape ``()``); an ``Expr`` value is evaluated when the graph runs. An int value of an int
        dtype wraps into its range, as torch converts a Python scalar (``-1`` as u8 is 255)."""
        if not isinstance(value, (int, float, bool, np.number, np.bool_, Expr)):
            fail("Graph.constant", "value", value, "a number, a bool or an Expr")
        if not isinstance(dtype, DType):
            fail("Graph.constant", "dtype", dtype, "an ll dtype such as ll.f32")
        if dtype.is_int and isinstance(value, int):
            value = dtype.wrap(value)
        key = (repr(value), dtype)  # repr keeps -0.0 apart from 0.0 and True apart from 1
        if key not in self._constants:
            self._constants[key] = self._add(Op.CONSTANT, (), (), dtype, value)
        return GraphTensor(self, self._constants[key], ShapeTracker.contiguous(()))

    def arange(self, n: ExprLike, start: int = 0, step: int = 1, dtype: DType = DType.I32) -> GraphTensor:
        """``start, start+step, ...`` (n values) as an Iota."""
        if isinstance(n, bool) or (isinstance(n, (int, np.integer)) and n < 0):
            fail("Graph.arange", "n", n, "a count: an int >= 0, a dimension name or an Expr")
        return self.iota(Expr.z() * step + start, n).cast(dtype)

    def iota(self, expr: Expr, n: ExprLike) -> GraphTensor:
        """The i32 tensor ``[expr(z) for z in range(n)]``."""
        n = as_expr(n)
        node = self._add(Op.IOTA, (), (n,), DType.I32, (expr, n))
        return GraphTensor(self, node, ShapeTracker.contiguous((n,)))

    @contextlib.contextmanager
    def origin(self, label: str) -> Iterator[None]:
        """Nodes created inside are tagged with ``label`` (outermost label wins)."""
        self._origin.append(label)
        try:
            yield
        finally:
            self._origin.pop()

    def _add(self, op: Op, sources, shape: tuple[Expr, ...], dtype: DType, arg=None) -> Node:
        node = Node(len(self.nodes), op, tuple(sources), tuple(shape), dtype, arg,
                    self._origin[0] if self._origin else None)
        self.nodes.append(node)
        return node

    def add_op(self, op: Op, sources: Sequence[GraphTensor], arg=None) -> Node:
        """Append a primitive op after checking operand shapes and dtypes."""
        srcs = [(t.node, t.tracker) for t in sources]
        shape, dtype = _infer(op, sources, arg)
        return self._add(op, srcs, shape, dtype, arg)

    def opaque(self, call: OpaqueCall, operands: Sequence[GraphTensor], shape: Sequence[ExprLike],
               dtype: DType) -> GraphTensor:
        """A torch op run as it is on ``operands`` (``luminal_lab.hlir.opaque``), giving one tensor of ``shape`` and
        ``dtype``."""
        dims = tuple(as_expr(d) for d in shape)
        node = self._add(Op.OPAQUE, [(t.node, t.tracker) for t in operands], dims, dtype, call)
        return GraphTensor(self, node, ShapeTracker.contiguous(dims))

    def mark_output(self, tensor: GraphTensor, name: str) -> Node:
        _check_name("GraphTensor.output", name)
        if name in self.outputs:
            raise LuminalError(f"the graph already has an output named {name!r}")
        tensor = tensor.contiguous()
        node = self._add(Op.OUTPUT, [(tensor.node, tensor.tracker)], tensor.shape, tensor.dtype, name)
        self.outputs[name] = node
        return node

    # ---- looking at it ------------------------------------------------------------------
    @property
    def hlir(self) -> HLIRStage:
        """The HLIR stage object (summary, picture, JSON) of this graph."""
        return HLIRStage(self)

    def op_counts(self) -> Counter:
        return Counter(n.op.value for n in self.nodes)

    def live_nodes(self) -> list[Node]:
        """Nodes that some output depends on, in topological order."""
        live = set()
        stack = list(self.outputs.values())
        while stack:
            node = stack.pop()
            if node.id in live:
                continue
            live.add(node.id)
            stack.extend(src for src, _ in node.sources)
        return [n for n in self.nodes if n.id in live]

    def __repr__(self) -> str:
        return f"<ll.Graph {len(self.nodes)} nodes, inputs {list(self.inputs)}, outputs {list(self.outputs)}>"


def _infer(op: Op, sources: Sequence[GraphTensor], arg) -> tuple[tuple[Expr, ...], DType]:
    """Output shape and dtype of a primitive op; raises ShapeError / DTypeError on bad operands."""
    dtypes = [t.dtype for t in sources]
    if op in UNARY_OPS:
        if not dtypes[0].is_float:
            raise DTypeError(f"{op.value} needs a float operand, got {dtypes[0].value}")
        return sources[0].shape, dtypes[0]
    if op in BINARY_OPS:
        a, b = sources
        if a.shape != b.shape:
            raise ShapeError(f"{op.value}: operand shapes {format_shape(a.shape)} and {format_shape(b.shape)} differ")
        if a.dtype != b.dtype:
            raise DTypeError(f"{op.value}: operand dtypes {a.dtype.value} and {b.dtype.value} differ")
        return a.shape, DType.BOOL if op == Op.LESS_THAN else a.dtype
    if op in REDUCE_OPS:
        (x,) = sources
        if x.dtype == DType.BOOL:
            raise DTypeError(f"{op.value} needs a numeric operand, got bool")
        if not 0 <= arg < len(x.shape):
            raise ShapeError(f"{op.value}: axis {arg} is out of range for shape {format_shape(x.shape)}")
        return x.shape[:arg] + x.shape[arg + 1:], x.dtype
    if op == Op.GATHER:
        indexes, data = sources
        if not indexes.dtype.is_int:
            raise DTypeError(f"Gather indexes must be ints, got {indexes.dtype.value}")
        return indexes.shape, data.dtype
    if op in (Op.SCATTER, Op.SCATTER_ADD):
        dest, indexes, src = sources
        if not indexes.dtype.is_int:
            raise DTypeError(f"{op.value} indexes must be ints, got {indexes.dtype.value}")
        if indexes.shape != src.shape:
            raise ShapeError(
                f"{op.value}: indexes {format_shape(indexes.shape)} and values {format_shape(src.shape)} differ")
        if src.dtype != dest.dtype:
            raise DTypeError(f"{op.value}: values are {src.dtype.value} but the destination is {dest.dtype.value}")
        return dest.shape, dest.dtype
    if op == Op.CAST:
        return sources[0].shape, arg
    raise ValueError(f"{op.value} is not built through add_op")


class HLIRStage(Stage):
    """The HLIR of a ``Graph`` as a notebook object (summary, SVG picture, JSON; drawn by ``luminal_lab.hlir.view``).

    Shows the nodes some output depends on, or every node with ``include_dead=True``. The
    node list is taken when the stage is made; build a new stage after changing the graph.
    Above ``max_drawn`` nodes the picture is condensed.
    """

    name = "hlir"
    view_module = "luminal_lab.hlir.view"

    def __init__(self, graph: Graph, include_dead: bool = False, max_drawn: int = MAX_DRAWN_NODES,
                 layer: tuple[frozenset[int], int] | None = None) -> None:
        self.graph = graph
        self.layer = layer  # a rolled graph's layer: its node ids (loop markers included) and its number of copies
        self.include_dead = include_dead
        self.max_drawn = max_drawn
        live = graph.live_nodes()
        self.live_ids = {n.id for n in live}
        self.nodes: list[Node] = list(graph.nodes) if include_dead else live
        self.n_dead = len(graph.nodes) - len(live)
        self.inputs = list(graph.inputs.values())
        self.outputs = dict(graph.outputs)
        self._svg: str | None = None
        self._svg_done = False

    def kind(self, node: Node) -> str:
        """input, weight, constant, output or op."""
        if node.op == Op.INPUT:
            return "weight" if self.graph.inputs[node.arg].is_weight else "input"
        if node.op == Op.CONSTANT:
            return "constant"
        if node.op == Op.OUTPUT:
            return "output"
        return "op"

    @property
    def condensed(self) -> bool:
        """Whether the picture shows boxes of nodes rather than every node."""
        return len(self.nodes) > self.max_drawn

    def picture(self, around: str | None = None, depth: int = 2) -> Picture:
        """The picture (shows itself in a notebook); with ``around`` (a node id such as ``"h12"``), only the nodes
        within ``depth`` reads of it, drawn node by node at any graph size. See ``luminal_lab.hlir.view``."""
        integer("HLIRStage.picture", "depth", depth, minimum=0)
        return self._view().picture(self, around, depth)

    def to_svg(self) -> str | None:
        """The picture as SVG (rendered once, then cached); ``None`` when Graphviz cannot draw it."""
        if not self._svg_done:
            self._svg = super().to_svg()
            self._svg_done = True
        return self._svg


@dataclass
class Signature:
    """How a compiled program meets its caller.

    ``inputs`` are the user inputs in call order and ``outputs`` the values returned, in
    order; ``in_spec``/``out_spec`` are torch pytree specs when the program came from torch.
    ``mutated_inputs`` and ``mutated_weights`` map an output to the user input or weight it
    is written back to after each call (in-place mutations in the original program).
    ``constants`` maps a position among the returned values to a size returned there as a number: a
    Python number, or an expression of the symbolic dimensions evaluated at the call's binding (a size a
    torch program computes, such as a cache's length).
    ``sizes`` maps the inputs that are integers, not tensors (a torch program's symbolic size
    arguments), to the expression each gives: a variable it binds, or a number it must equal.
    """

    inputs: list[str]
    outputs: list[str]
    in_spec: Any = None
    out_spec: Any = None
    mutated_inputs: dict[str, str] = field(default_factory=dict)
    mutated_weights: dict[str, str] = field(default_factory=dict)
    constants: dict[int, Any] = field(default_factory=dict)
    sizes: dict[str, Expr] = field(default_factory=dict)

    @classmethod
    def of_graph(cls, graph: Graph) -> Signature:
        return cls([n for n, spec in graph.inputs.items() if not spec.is_weight], list(graph.outputs))
