"""``ll.compile``: a compiled program, its stages, and the boundary it is called through.

The boundary is strict: every input's dtype must equal the graph's declared dtype (else
``DTypeBoundaryError``, before any work) and its shape must fit the declared shape, which
also binds the symbolic dimensions. Nothing is cast on the way in or out.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes as dt
from .errors import DTypeBoundaryError, LuminalError, NoDeviceError, ShapeError
from .genome import ChoiceSpace, Genome, extract
from .hlir import Graph
from .llir import LLIR
from .reference import ReferenceRuntime
from .regions import Regions
from .search import SearchResult, random_inputs, search
from .shape_tracker import format_shape

if TYPE_CHECKING:
    from .cpu_runtime import CPURuntime, Profile
    from .cuda_runtime import CUDARuntime
    from .cuda_stage import CudaStage
    from .provenance import Pipeline

    Runtime = CPURuntime | CUDARuntime

DEVICES = ("cpu", "cuda")


def check_device(device: str) -> None:
    """Raise unless ``device`` is one of ``DEVICES`` and usable here (``NoDeviceError`` names why not)."""
    if device not in DEVICES:
        raise ValueError(f"device {device!r} is not available; choose one of {DEVICES}")
    if device == "cuda":
        from .cuda_runtime import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            raise NoDeviceError(f"device='cuda' runs the generated CUDA C through numba-cuda, which needs a CUDA GPU: "
                                f"{reason} (the CPU runtime is device='cpu')")


def _new_runtime(llir: LLIR, device: str) -> Runtime:
    if device == "cuda":
        from .cuda_runtime import CUDARuntime

        return CUDARuntime(llir)
    from .cpu_runtime import CPURuntime  # numba loads on first use, not at import

    return CPURuntime(llir)


@dataclass
class Signature:
    """How a compiled program meets its caller.

    ``inputs`` are the user inputs in call order and ``outputs`` the values returned, in
    order; ``in_spec``/``out_spec`` are torch pytree specs when the program came from torch.
    ``mutated_inputs`` and ``mutated_weights`` map an output to the user input or weight it
    is written back to after each call (in-place mutations in the original program).
    """

    inputs: list[str]
    outputs: list[str]
    in_spec: Any = None
    out_spec: Any = None
    mutated_inputs: dict[str, str] = field(default_factory=dict)
    mutated_weights: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_graph(cls, graph: Graph) -> Signature:
        return cls([n for n, spec in graph.inputs.items() if not spec.is_weight], list(graph.outputs))


class Compiled:
    """A compiled program: its stage objects, genome search, and ``run``.

    ``run`` executes the current genome's kernels on the CPU runtime: the best genome of the
    last ``search``, else the smallest-term genome of the saturated e-graph.
    ``run_reference`` runs the HLIR on the reference runtime through the same boundary.
    """

    def __init__(self, graph: Graph, signature: Signature, module=None, example_inputs: Sequence | None = None,
                 fusion: bool = True):
        if not graph.outputs:
            raise LuminalError("the graph has no outputs: mark at least one with .output(name)")
        self.graph = graph
        self.fusion = fusion  # whether the e-graph offers fused regions (read when the e-graph is built)
        self.signature = signature
        self._module = module
        self._example_inputs = example_inputs
        self._reference = ReferenceRuntime(graph)
        self._space: ChoiceSpace | None = None
        self._genome: Genome | None = None
        self._llirs: dict[int, LLIR] = {}
        self._runtimes: dict[tuple[int, str], Runtime] = {}  # by (genome hash, device)
        self.last_search: SearchResult | None = None
        self._positional = signature.in_spec is None or signature.in_spec == _positional_spec(len(signature.inputs))

    @property
    def hlir(self):
        return self.graph.hlir

    @functools.cached_property
    def egraph(self):
        """The e-graph stage, built (and its egglog worker started) on first access."""
        from .egraph import EGraph

        egraph = EGraph(self.graph, fusion=self.fusion)
        egraph.compiled = self
        return egraph

    def __repr__(self) -> str:
        return f"<ll.Compiled {self.hlir}>"

    # ---- genomes ------------------------------------------------------------------------
    def choice_space(self) -> ChoiceSpace:
        """The genomes' choices in the e-graph as it is now (saturated first if never run)."""
        egraph = self.egraph
        if not egraph.history:
            egraph.saturate()
        if self._space is None or self._space.snapshot is not egraph.snapshot:
            self._space = ChoiceSpace(egraph.snapshot, self.graph)
            self._genome = None
            self._llirs.clear()
            self._runtimes.clear()
        return self._space

    def random_genome(self, seed: int = 0) -> Genome:
        return self.choice_space().random_genome(seed)

    @property
    def genome(self) -> Genome:
        """The genome ``run`` uses: the best found by ``search``, else the smallest-term one."""
        space = self.choice_space()
        if self._genome is None:
            self._genome = space.smallest_genome()
        return self._genome

    @genome.setter
    def genome(self, genome: Genome) -> None:
        """Make ``run``, ``llir()``, ``regions`` and ``cuda`` use ``genome`` (one of this e-graph's genomes)."""
        if genome.space is not self.choice_space():
            raise LuminalError("that genome belongs to another e-graph (or to this one before it last changed); "
                               "take one from comp.choice_space() or comp.random_genome()")
        extract(genome)  # a refused genome raises here, not at the next run
        self._genome = genome

    def llir(self, genome: Genome | None = None) -> LLIR:
        """The LLIR stage of ``genome`` (default: the current genome); shows times once profiled."""
        genome = genome or self.genome
        if genome.hash not in self._llirs:
            self._llirs[genome.hash] = extract(genome)
        return self._llirs[genome.hash]

    @property
    def regions(self) -> Regions:
        """The fused regions of the current genome's LLIR."""
        return Regions.of(self.llir())

    @property
    def cuda(self) -> CudaStage:
        """The generated CUDA C of the current genome's LLIR: per kernel source, launch config, compile status."""
        from .cuda_stage import CudaStage

        return CudaStage(self.llir())

    def _runtime(self, genome: Genome, device: str) -> Runtime:
        check_device(device)
        key = (genome.hash, device)
        if key not in self._runtimes:
            self._runtimes[key] = _new_runtime(self.llir(genome), device)
        return self._runtimes[key]

    # ---- running ------------------------------------------------------------------------
    def run(self, *inputs, device: str = "cpu", **named_inputs):
        """Run on torch tensors (or numpy arrays) and return torch tensors, in the program's order."""
        check_device(device)
        values = self._match_inputs(inputs, named_inputs)
        arrays, bindings = check_inputs(self.graph, values)
        outputs = self._runtime(self.genome, device).run(arrays, self.graph.weights, bindings)
        results = dict(zip(self.graph.outputs, outputs))
        self._write_back(values, results)
        return self._pack_outputs(results)

    __call__ = run

    def run_reference(self, *inputs, **named_inputs):
        """Run the HLIR on the reference runtime (the ground truth), through the same boundary."""
        values = self._match_inputs(inputs, named_inputs)
        arrays, bindings = check_inputs(self.graph, values)
        results = self._reference.run(arrays, bindings)
        self._write_back(values, results)
        return self._pack_outputs(results)

    def profile(self, genome: Genome | None = None, device: str = "cpu", inputs: Sequence | None = None,
                warmup: int = 2, trials: int = 10) -> Profile:
        """Median time per kernel and in total of ``genome`` (default: the current genome) on
        ``inputs`` (default: the example inputs, else seeded random ones); the LLIR keeps the times."""
        genome = genome or self.genome
        arrays, bindings = self._profiling_inputs(inputs)
        return self._runtime(genome, device).profile(arrays, self.graph.weights, bindings, warmup, trials)

    def search(self, generations: int = 5, generation_size: int = 30, mutations: int = 3, keep_best: int = 3,
               budget: float | None = None, seed: int = 0, device: str = "cpu", inputs: Sequence | None = None,
               trials: int = 10, cost=None, progress: bool = True, on_candidate=None, stop=None) -> SearchResult:
        """Measure genomes and keep the fastest: see ``luminal_lab.search``. ``budget`` is in seconds;
        ``on_candidate`` sees each candidate as it is measured, and setting the ``stop`` event ends early."""
        check_device(device)
        space = self.choice_space()
        arrays, bindings = self._profiling_inputs(inputs)
        reference = self._reference.run(arrays, bindings)
        expected = [reference[name] for name in self.graph.outputs]

        def run(llir: LLIR):
            runtime = _new_runtime(llir, device)
            outputs = runtime.run(arrays, self.graph.weights, bindings)
            profile = runtime.profile(arrays, self.graph.weights, bindings, warmup=2, trials=trials)
            self._runtimes[(llir.genome_hash, device)] = runtime
            self._llirs[llir.genome_hash] = llir
            return outputs, profile.total, dict(profile.kernels)

        result = search(space, run, expected, generations, generation_size, mutations, keep_best, budget, seed,
                        cost, progress, on_candidate, stop)
        self._genome = result.best.genome
        self.last_search = result
        return result

    # ---- the notebook workbench ---------------------------------------------------------
    def profiler(self, **settings):
        """A widget that launches genome profiling (``search``) and shows its progress live; ``settings``
        preset its controls (generations, generation_size, mutations, device)."""
        from .notebook.profiler import GenomeProfiler

        return GenomeProfiler(self, **settings)

    def pipeline(self, genome: Genome | None = None) -> Pipeline:
        """Every stage of ``genome`` (default: the current genome) as one output; the JupyterLab
        extension draws them side by side and follows provenance between them."""
        from .provenance import Pipeline, pipeline

        return Pipeline(pipeline(self, genome))

    def workbench(self):
        """One view of every stage; selecting a node in one highlights its counterparts in the others."""
        from .notebook.workbench import Workbench

        return Workbench(self)

    def report(self, path) -> Path:
        """Write one self-contained HTML file with every stage (opens without a kernel or network)."""
        from .report import write_report

        return write_report(self, path)

    def _profiling_inputs(self, inputs: Sequence | None) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        if inputs is None and self._example_inputs is not None:
            inputs = self._example_inputs
        if inputs is not None:
            return check_inputs(self.graph, self._match_inputs(tuple(inputs), {}))
        shapes = {}
        for name in self.signature.inputs:
            node = self.graph.inputs[name].node
            if any(not d.is_num for d in node.shape):
                raise LuminalError(f"input {name!r} has a symbolic shape; pass inputs= to profile or search")
            shapes[name] = (tuple(d.value for d in node.shape), node.dtype)
        return random_inputs(shapes), {}

    # ---- the boundary -------------------------------------------------------------------
    def _match_inputs(self, inputs: Sequence, named: Mapping[str, Any]) -> dict[str, Any]:
        names = self.signature.inputs
        if not named and len(inputs) == len(names) and self._positional:
            return dict(zip(names, inputs))  # the common call: tensors in order, no pytree work
        if self.signature.in_spec is not None:
            import torch.utils._pytree as pytree

            flat, spec = pytree.tree_flatten((tuple(inputs), dict(named)))
            if spec != self.signature.in_spec:
                raise LuminalError(f"the inputs are not structured as at compile time:\n  got {spec}\n"
                                   f"  expected {self.signature.in_spec}")
            flat = [v for v in flat if _is_array(v)]
        else:
            unknown = set(named) - set(names)
            if unknown:
                raise LuminalError(f"unknown input name(s) {sorted(unknown)}; the inputs are {names}")
            flat = list(inputs) + [named[n] for n in names[len(inputs):] if n in named]
        if len(flat) != len(names):
            raise LuminalError(f"expected {len(names)} input(s) {names}, got {len(flat)}")
        return dict(zip(names, flat))

    def _write_back(self, values: dict[str, Any], results: dict[str, np.ndarray]) -> None:
        for output, input_name in self.signature.mutated_inputs.items():
            target = values[input_name]
            if isinstance(target, np.ndarray):
                target[...] = results[output]
            else:
                target.copy_(to_torch(results[output]))
        for output, weight in self.signature.mutated_weights.items():
            self.graph.weights[weight] = results[output].copy()
            if self._module is not None:
                buffer = self._module.get_buffer(weight)
                buffer.copy_(to_torch(results[output]))

    def _pack_outputs(self, results: dict[str, np.ndarray]):
        tensors = [to_torch(results[name]) for name in self.signature.outputs]
        if self.signature.out_spec is not None:
            import torch.utils._pytree as pytree

            return pytree.tree_unflatten(tensors, self.signature.out_spec)
        return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _positional_spec(count: int):
    """The torch pytree spec of ``count`` positional tensors and no keywords."""
    import torch.utils._pytree as pytree

    return pytree.tree_flatten((tuple(range(count)), {}))[1]


def _is_array(value) -> bool:
    import torch

    return isinstance(value, (np.ndarray, torch.Tensor))


def check_inputs(graph: Graph, values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Check dtypes and shapes of the user inputs, bind symbolic dimensions, convert to numpy."""
    import torch

    declared = {name: graph.inputs[name].node for name in values}
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            got = _torch_dtype_name(value.dtype)
            ok = got == declared[name].dtype.value
        elif isinstance(value, np.ndarray):
            got = str(value.dtype)
            ok = value.dtype == declared[name].dtype.numpy
        else:
            raise DTypeBoundaryError(
                f"input {name!r} must be a torch.Tensor or numpy array, got {type(value).__name__}")
        if not ok:
            raise DTypeBoundaryError(f"input {name!r} is {got} but the graph declares {declared[name].dtype.value}; "
                                     "nothing is cast implicitly, cast it before the call")
    bindings: dict[str, int] = {}
    for name, value in values.items():
        dims = declared[name].shape
        shape = tuple(value.shape)
        if len(shape) != len(dims):
            raise ShapeError(f"input {name!r} has shape {list(shape)} but the graph declares {format_shape(dims)}")
        for dim, size in zip(dims, shape):
            if dim.op == "var":
                bindings.setdefault(dim.args[0], size)
    for name, value in values.items():
        dims = declared[name].shape
        try:
            expected = [int(d.evaluate(bindings)) for d in dims]
        except KeyError as missing:
            raise ShapeError(f"input {name!r}: cannot bind {format_shape(dims)} from {list(value.shape)} "
                             f"({missing.args[0]})") from None
        if expected != list(value.shape):
            raise ShapeError(f"input {name!r} has shape {list(value.shape)} but the graph declares "
                             f"{format_shape(dims)} = {expected} with {bindings}")
    return {name: to_numpy(value) for name, value in values.items()}, bindings


def _torch_dtype_name(dtype) -> str:
    try:
        return dt.from_torch(dtype).value
    except TypeError:
        return str(dtype).replace("torch.", "")


def to_numpy(value) -> np.ndarray:
    """A numpy view of a CPU tensor (bf16 through ml_dtypes), or the array itself."""
    if isinstance(value, np.ndarray):
        return value
    import torch

    value = value.detach()
    if value.dtype == torch.bfloat16:
        return value.contiguous().view(torch.int16).numpy().view(dt.bf16.numpy)
    return value.numpy(force=True)


def to_torch(array: np.ndarray):
    """A torch tensor over ``array``'s data (bf16 through ml_dtypes)."""
    import torch

    array = np.array(array, order="C", copy=None)  # keeps 0-d arrays 0-d
    if array.dtype == dt.bf16.numpy:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def compile(program, example_inputs: Sequence | None = None, *, fusion: bool = True, **options) -> Compiled:
    """Compile an ``ll.Graph``, or a ``torch.nn.Module`` / function on ``example_inputs`` (via torch.export).

    ``fusion=False`` leaves the fusion rulesets out of the e-graph's schedule (no fused regions)."""
    if isinstance(program, Graph):
        if example_inputs is not None:
            raise LuminalError("a Graph declares its own inputs; pass no example inputs")
        if options:
            raise TypeError(f"unknown option(s) {sorted(options)} for a Graph")
        compiled = Compiled(program, Signature.of_graph(program))
    else:
        from .frontend_torch import compile_torch

        if example_inputs is None:
            raise LuminalError("compiling a torch module or function needs example_inputs")
        compiled = compile_torch(program, example_inputs, **options)
    compiled.fusion = fusion
    return compiled
