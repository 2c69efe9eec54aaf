"""The reference runtime: runs any HLIR graph with numpy, whole tensors at a time.

It is the ground truth every later stage is checked against. For each binding of the
symbolic dimensions it builds a plan once: every source read becomes either a strided
view (``as_strided``, when the tracker is linear and unmasked) or a precomputed index
array with a validity mask (padding reads 0). f16 and bf16 compute in f32 and round after
each op, as torch's CPU kernels do. A ``SumReduce`` whose only input is a ``Mul`` used
nowhere else is evaluated as one contraction (BLAS matmul) over the same operands: the
same sum of products, without materialising the broadcast product.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core.dtypes import convert
from ..core.errors import LuminalError
from ..core.ops import Op
from ..core.plans import PlanCache
from ..core.shape_tracker import ShapeTracker
from ..core.symbolic import Expr
from .contraction import contract
from .graph import Graph, Node
from .opaque import on_arrays

Reader = Callable[[np.ndarray], np.ndarray]
Step = Callable[[list], None]

_UNARY = {
    Op.LOG2: np.log2,
    Op.EXP2: np.exp2,
    Op.SIN: np.sin,
    Op.SQRT: np.sqrt,
    Op.RECIP: np.reciprocal,
}
_BINARY = {
    Op.ADD: np.add,
    Op.MUL: np.multiply,
    Op.MOD: np.fmod,
    Op.LESS_THAN: np.less,
}


class ReferenceRuntime:
    """Runs a graph on numpy arrays; ``run(inputs, bindings)`` returns ``{output name: array}``."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.plans: PlanCache[list[Step]] = PlanCache(lambda bindings: _Planner(graph, bindings).plan())

    def run(self, inputs: Mapping[str, np.ndarray], bindings: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
        plan = self.plans.plan(bindings)
        values: list = [None] * len(self.graph.nodes)
        for spec in self.graph.inputs.values():
            source = self.graph.weights[spec.name] if spec.is_weight else inputs[spec.name]
            values[spec.node.id] = _contiguous(source, dtype=spec.node.dtype.numpy)
        with np.errstate(all="ignore"):
            for step in plan:
                step(values)
        return {name: values[node.id] for name, node in self.graph.outputs.items()}


class _Planner:
    def __init__(self, graph: Graph, bindings: dict[str, int]):
        self.graph = graph
        self.bindings = bindings
        self.nodes = graph.live_nodes()
        self.consumers: dict[int, list[Node]] = defaultdict(list)
        for node in self.nodes:
            for src, _ in node.sources:
                self.consumers[src.id].append(node)

    def size(self, expr: Expr) -> int:
        return int(expr.evaluate(self.bindings))

    def plan(self) -> list[Step]:
        steps = []
        for node in self.nodes:
            if node.op == Op.INPUT or self._feeds_contraction_only(node):
                continue
            steps.append(self._step(node))
        return steps

    def _feeds_contraction_only(self, node: Node) -> bool:
        consumers = self.consumers[node.id]
        return (node.op == Op.MUL and len(consumers) == 1 and consumers[0].op == Op.SUM_REDUCE
                and consumers[0].sources[0][1] == ShapeTracker.contiguous(node.shape))

    def reader(self, source: Node, tracker: ShapeTracker) -> Reader:
        """A function from the source's (contiguous) buffer to the view the tracker describes."""
        dims = tuple(self.size(d) for d in tracker.dims)
        if 0 in dims:  # nothing to read (and no index expression: a zero-size axis has no coordinates)
            empty = np.zeros(dims, source.dtype.numpy)
            return lambda buf: empty
        if tracker.is_contiguous:  # possibly a prefix of the buffer (a slice from the start)
            count = int(np.prod(dims))
            return lambda buf: buf.reshape(-1)[:count].reshape(dims)
        linear = tracker.linear_strides()
        itemsize = source.dtype.numpy.itemsize
        if linear is not None:
            offset = sum(self.size(off) for _, off in linear)
            strides = tuple(self.size(step) * itemsize for step, _ in linear)
            return lambda buf: as_strided(buf.reshape(-1)[offset:], dims, strides, writeable=False)
        broadcast = [i for i, d in enumerate(dims)
                     if d > 1 and not tracker.strides[i].has_z and not tracker.masks[i].has_z]
        if broadcast:  # read the varying axes only, then broadcast (no index array over repeated data)
            compact = ShapeTracker(tuple(Expr.num(1) if i in broadcast else d for i, d in enumerate(tracker.dims)),
                                   tracker.strides, tracker.masks)
            read_compact = self.reader(source, compact)
            return lambda buf: np.broadcast_to(read_compact(buf), dims)
        count = int(np.prod(dims))
        z = np.arange(count, dtype=np.int64)
        index = np.broadcast_to(np.asarray(tracker.index_expr().evaluate(self.bindings, z), np.int64), (count,))
        valid = np.broadcast_to(np.asarray(tracker.valid_expr().evaluate(self.bindings, z)) != 0, (count,))
        if valid.all():
            return lambda buf: buf.reshape(-1)[index].reshape(dims)
        index = np.where(valid, index, 0)
        zero = np.zeros((), source.dtype.numpy)
        return lambda buf: np.where(valid, buf.reshape(-1)[index], zero).reshape(dims)

    def _readers(self, node: Node) -> list[tuple[int, Reader]]:
        return [(src.id, self.reader(src, tracker)) for src, tracker in node.sources]

    def _step(self, node: Node) -> Step:
        out_id, storage, compute = node.id, node.dtype.numpy, node.dtype.compute_numpy
        op = node.op
        if op == Op.CONSTANT:
            value = node.arg.evaluate(self.bindings) if isinstance(node.arg, Expr) else node.arg
            constant = np.asarray(value, dtype=storage)
            return lambda values: values.__setitem__(out_id, constant)
        if op == Op.IOTA:
            expr, length = node.arg
            n = self.size(length)
            iota = np.broadcast_to(expr.evaluate(self.bindings, np.arange(n, dtype=np.int64)), (n,)).astype(np.int32)
            return lambda values: values.__setitem__(out_id, iota)
        readers = self._readers(node)
        if op == Op.OPAQUE:
            shape, call = node.shape, node.arg

            def opaque(values):
                arrays = [read(values[source]) for source, read in readers]
                values[out_id] = on_arrays(call, arrays, tuple(self.size(d) for d in shape), node.dtype)
            return opaque
        if op == Op.SUM_REDUCE and self._feeds_contraction_only(node.sources[0][0]):
            product = node.sources[0][0]
            (a_id, read_a), (b_id, read_b) = self._readers(product)
            axis = node.arg

            def contraction(values):
                a = read_a(values[a_id]).astype(compute, copy=False)
                b = read_b(values[b_id]).astype(compute, copy=False)
                values[out_id] = contract(a, b, axis).astype(storage, copy=False)
            return contraction
        (x_id, read_x) = readers[0]
        if op in _UNARY:
            fn = _UNARY[op]
            return lambda values: values.__setitem__(
                out_id, fn(read_x(values[x_id]).astype(compute)).astype(storage, copy=False))
        if op in _BINARY:
            fn = _BINARY[op]
            (y_id, read_y) = readers[1]
            operand = node.sources[0][0].dtype.compute_numpy
            return lambda values: values.__setitem__(out_id, _contiguous(
                fn(read_x(values[x_id]).astype(operand), read_y(values[y_id]).astype(operand)), dtype=storage))
        if op in (Op.SUM_REDUCE, Op.MAX_REDUCE):
            axis = node.arg
            if op == Op.SUM_REDUCE:
                return lambda values: values.__setitem__(out_id, _contiguous(
                    np.sum(read_x(values[x_id]), axis=axis, dtype=compute), dtype=storage))
            return lambda values: values.__setitem__(out_id, _contiguous(
                np.max(read_x(values[x_id]), axis=axis), dtype=storage))
        if op == Op.CAST:
            source = node.sources[0][0].dtype
            return lambda values: values.__setitem__(out_id, _contiguous(
                convert(read_x(values[x_id]), source, node.dtype)))
        if op == Op.OUTPUT:
            # outputs are fresh arrays the caller owns, never views of inputs or constants
            return lambda values: values.__setitem__(out_id, np.array(read_x(values[x_id]), order="C"))
        if op == Op.GATHER:
            (data_id, read_data) = readers[1]

            def gather(values):
                data = read_data(values[data_id]).reshape(-1)
                values[out_id] = _contiguous(data[_checked(read_x(values[x_id]), data.size, node)])
            return gather
        if op in (Op.SCATTER, Op.SCATTER_ADD):
            (index_id, read_index), (src_id, read_src) = readers[1], readers[2]
            add = op == Op.SCATTER_ADD

            def scatter(values):
                out = np.array(read_x(values[x_id]), dtype=storage, order="C")
                flat = out.reshape(-1)
                index = _checked(read_index(values[index_id]), flat.size, node).reshape(-1)
                if add:
                    np.add.at(flat, index, read_src(values[src_id]).reshape(-1))
                else:
                    flat[index] = read_src(values[src_id]).reshape(-1)
                values[out_id] = out
            return scatter
        raise LuminalError(f"the reference runtime has no implementation of {op.value}")


def _contiguous(array, dtype=None) -> np.ndarray:
    """A C-ordered array (copied only when needed); unlike ``np.ascontiguousarray`` it keeps 0-d arrays 0-d."""
    return np.array(array, dtype=dtype, order="C", copy=None)


def _checked(index: np.ndarray, size: int, node: Node) -> np.ndarray:
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].reshape(-1)[0]
        where = f" (from {node.origin})" if node.origin else ""
        raise IndexError(f"{node.op.value} h{node.id}{where}: index {bad} is out of range for {size} elements")
    return index
