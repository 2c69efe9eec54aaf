"""``ll.compile``: a compiled program, its stages, its genomes, and running it.

``Compiled`` holds a graph and what was made of it: the e-graph (built on first use), the
genome space of the saturated e-graph, the LLIR of each genome, a runtime per genome and
device, and the result of the last search. It is called through its ``Boundary``
(``luminal_lab.compiler.boundary``); ``run`` uses the current genome, ``run_reference`` the
reference runtime.
"""

from __future__ import annotations

import functools
import math
import platform
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codegen.cuda_stage import CudaStage
from ..core.arguments import fail, flag, function, integer, one_of, seconds
from ..core.arrays import to_torch
from ..core.errors import ArgumentError, LuminalError, MemoryBudgetError, Refused
from ..core.phases import phase
from ..core.stage import Stage
from ..core.version import __version__
from ..egraph import EGraph
from ..hlir.graph import Graph, HLIRStage, Signature
from ..hlir.reference import ReferenceRuntime
from ..hlir.rolling import Rolling, roll
from ..llir.genome import ChoiceSpace, Genome, extract
from ..llir.llir import LLIR
from ..llir.regions import Regions
from ..llir.unroll import runs, unroll
from ..runtime import DEVICES, Profile, Runtime, check_device, foreign_kernels, new_runtime
from ..runtime.base import MEMORY_FRACTION, format_bytes, host_memory_available
from ..search.records import RecordsTable, TuningRecords, program_key
from ..search.runners import Job, Runner, default_runner
from ..search.search import Measurement, SearchResult, compare, random_inputs, search
from .background import SearchState
from .boundary import MEMO, Boundary, signature_key
from .provenance import Pipeline
from .ready import Ready

if TYPE_CHECKING:
    from ..frontends.translate import TorchProgram
    from ..runtime.native import Hot


class Compiled:
    """A compiled program: its stage objects, genome search, and ``run``.

    ``run`` executes the current genome's kernels on the CPU runtime: the best genome of the
    last ``search``, else the smallest-term genome of the saturated e-graph.
    ``run_reference`` runs the HLIR on the reference runtime through the same boundary.
    """

    def __init__(self, graph: Graph, signature: Signature, module=None, example_inputs: Sequence | None = None,
                 fusion: bool = True, rolling: bool = True, example_kwargs: Mapping[str, Any] | None = None):
        if not graph.outputs:
            raise LuminalError("the graph has no outputs: mark at least one with .output(name)")
        self.graph = graph
        self.fusion = fusion  # whether the e-graph offers fused regions (read when the e-graph is built)
        # the graph's repeated layers rolled to one copy, which the e-graph and genomes then work on
        self.rolling: Rolling | None = roll(graph) if rolling else None
        self.signature = signature
        self.boundary = Boundary(graph, signature, module)
        self._example_inputs = example_inputs
        self._example_kwargs = dict(example_kwargs or {})
        self._reference = ReferenceRuntime(graph)
        self._space: ChoiceSpace | None = None
        self._genome: Genome | None = None
        self._llirs: dict[int, LLIR] = {}
        self._runtimes: dict[tuple[int, str], Runtime] = {}  # by (genome hash, device)
        self._ready: dict[tuple, Ready | None] = {}  # by input signature: run's ready CPU calls (None: run once)
        self._hot: Hot | None = None  # the current CPU runtime's plans run natively once hot (a dynamic program's)
        # by input signature of torch tensors: a dynamic program's signatures whose plan's native function ``_hot``
        # built, each's ready call and its generated call of that function (``Ready.natively``)
        self._natively: dict[tuple, tuple[Ready, Callable[[Sequence], object]]] = {}
        # whether a run binds no symbolic dimension, as ready calls need: a generation's programs bind a new length
        # with every call, and so neither look for one nor make one
        self._fixed = not signature.sizes and not any(dim.variables() for spec in graph.inputs.values()
                                                      for dim in spec.node.shape)
        self.last_search: SearchResult | None = None
        self.search_state: SearchState | None = None  # the search going on behind its calls, if one was started
        self.records: TuningRecords | None = TuningRecords()  # where its searches are recorded (None: nowhere)
        self.records_key: str | None = None  # the key of its last recorded search or choice (``records_key_on``)

    @classmethod
    def of_torch(cls, program: TorchProgram, fusion: bool = True, rolling: bool = True) -> Compiled:
        """The compiled form of a translated torch program (``luminal_lab.frontends``)."""
        return cls(program.graph, program.signature, program.module, program.example_inputs, fusion, rolling,
                   program.example_kwargs)

    @property
    def compiled_graph(self) -> Graph:
        """The graph the e-graph is built from: the rolled graph when layers were rolled, else the program's."""
        return self.rolling.graph if self.rolling else self.graph

    @property
    def hlir(self) -> HLIRStage:
        """The HLIR stage of the graph the e-graph is built from (a rolled layer drawn as one box, ×copies)."""
        return self.rolling.hlir if self.rolling else self.graph.hlir

    @functools.cached_property
    def egraph(self) -> EGraph:
        """The e-graph stage, built (and its egglog worker started) on first access."""
        # the e-graph asks for the program's genome through a weak reference: no cycle keeps a dropped program (and its
        # e-graph's worker, which then goes back to the pool) alive until the cyclic collector runs
        return EGraph(self.compiled_graph, fusion=self.fusion, layer=self.hlir.layer,
                      genome=functools.partial(_current_genome, weakref.ref(self)))

    def __repr__(self) -> str:
        return f"<ll.Compiled {self.hlir}>"

    # ---- genomes ------------------------------------------------------------------------
    def choice_space(self) -> ChoiceSpace:
        """The genomes' choices in the e-graph as it is now (saturated first if never run)."""
        egraph = self.egraph
        if not egraph.history:  # saturated here, or as an earlier process kept it beside the tuning records
            egraph.saturate_kept(self.records.directory if self.records is not None else None)
        if self._space is None or self._space.snapshot is not egraph.snapshot:
            with phase("extraction"):
                self._space = ChoiceSpace(egraph.snapshot, self.compiled_graph)
            self._genome = None
            self._llirs.clear()
            self._runtimes.clear()
        return self._space

    def random_genome(self, seed: int = 0) -> Genome:
        """A random genome of this program that extracts (see ``ChoiceSpace.random_genome``)."""
        return self.choice_space().random_genome(integer("Compiled.random_genome", "seed", seed))

    def _owned(self, genome: Genome | None, where: str) -> Genome:
        """``genome`` (None: the current one), checked to be a genome of this program's e-graph as it is now."""
        if genome is None:
            return self.genome
        if not isinstance(genome, Genome):
            fail(where, "genome", genome, "a Genome of this program (comp.genome, comp.random_genome(seed), "
                 "comp.choice_space().fused_genome(), a search's candidates) or None")
        if genome.space is not self.choice_space():
            whose = ("this program's e-graph before it last changed" if genome.space.graph is self.compiled_graph
                     else "another program")
            fail(where, "genome", genome, f"a genome of this program's e-graph as it is now, but it belongs to {whose}"
                 "; take one from comp.random_genome(seed), comp.choice_space() or comp.search()")
        return genome

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
        if genome is None:
            fail("Compiled.genome", "genome", genome, "a Genome of this program (None is not one: the default is "
                 "comp.choice_space().smallest_genome())")
        genome = self._owned(genome, "Compiled.genome")
        self._extract(genome)  # a refused genome raises here, not at the next run
        self._genome = genome

    def llir(self, genome: Genome | None = None) -> LLIR:
        """The LLIR stage of ``genome`` (default: the current genome); shows times once profiled."""
        genome = self._owned(genome, "Compiled.llir")
        if genome.hash not in self._llirs:
            self._llirs[genome.hash] = self._extract(genome)
        return self._llirs[genome.hash]

    def _extract(self, genome: Genome) -> LLIR:
        """The program's LLIR of ``genome``: ``_lower``'s, unrolled when layers were rolled."""
        llir = self._lower(genome)
        return unroll(llir, self.rolling) if self.rolling else llir

    def _lower(self, genome: Genome) -> LLIR:
        """``extract``: the LLIR of the compiled graph (one copy of a rolled layer), its refusal saying so when
        saturation stopped early (ops may then lack kernel forms)."""
        try:
            return extract(genome)
        except Refused as refused:
            if not self.egraph.status.startswith("stopped"):
                raise
            raise Refused(refused.kind, f"{refused.detail}; the e-graph's saturation {self.egraph.status}") from None

    @property
    def regions(self) -> Regions:
        """The fused regions of the current genome's LLIR."""
        return Regions.of(self.llir())

    @property
    def cuda(self) -> CudaStage:
        """The generated CUDA C of the current genome's LLIR: per kernel source, launch config, compile status."""
        return CudaStage(self.llir())

    def _runtime(self, genome: Genome, device: str) -> Runtime:
        key = (genome.hash, device)
        if key not in self._runtimes:
            self._runtimes[key] = new_runtime(self.llir(genome), device)
        return self._runtimes[key]

    # ---- running ------------------------------------------------------------------------
    def prepare(self, *inputs, device: str = "cpu", **named_inputs) -> None:
        """Build the current genome's plan for the sizes of these inputs (checked as ``run`` checks them), its kernels
        compiled, ahead of the first run."""
        check_device(device, "Compiled.prepare")
        bindings = self.boundary.bind(self.boundary.match(inputs, named_inputs))
        self._runtime(self.genome, device).prepare(self.graph.weights, bindings)

    def run(self, *inputs, device: str = "cpu", **named_inputs):
        """Run on torch tensors (or numpy arrays) and return torch tensors, in the program's order. On
        ``device="cuda"`` the call is device-resident: CUDA tensors in (CPU ones copied once), CUDA tensors out,
        ordered on torch's current stream."""
        key = signature_key(inputs) if device == "cpu" and not named_inputs else None
        if key is not None:
            if self._fixed:
                ready = self._ready.get(key)
                if ready is not None and ready.current():
                    result = ready(inputs)
                    if result is not None:
                        return result
            else:
                natively = self._natively.get(key)
                if natively is not None:
                    result = natively[1](inputs)
                    if result is not None:
                        return result
        boundary = self.boundary
        values = boundary.match(inputs, named_inputs)
        if device == "cpu":
            arrays, bindings = boundary.check(values)
            runtime = self._runtime(self.genome, device)
            if self._fixed:
                outputs = runtime.run(arrays, self.graph.weights, bindings, checked=True)
            else:
                if self._hot is None or self._hot.runtime is not runtime:
                    from ..runtime.native import Hot  # numba's linker and the CPU runtime, imported when first needed

                    self._hot = Hot(runtime)
                outputs = self._hot.run(arrays, self.graph.weights, bindings)
                if key is not None:
                    self._take_natively(key, runtime, inputs, bindings)
            if self._fixed and key is not None and len(self._ready) < MEMO:  # made at a signature's second run
                self._ready[key] = Ready.of(self, runtime, inputs) if key in self._ready else None
        else:
            check_device(device, "Compiled.run")
            bindings = boundary.bind(values)
            tensors = {name: (to_torch(value) if isinstance(value, np.ndarray) else value).to("cuda")
                       for name, value in boundary.tensors(values).items()}
            outputs = self._runtime(self.genome, device).run_device(tensors, self.graph.weights, bindings)
        if boundary.mutates:
            boundary.write_back(values, dict(zip(self.graph.outputs, outputs)))
        return boundary.pack(outputs, bindings)

    __call__ = run

    def _take_natively(self, key: tuple, runtime: Runtime, inputs: Sequence, bindings: dict[str, int]) -> None:
        """Once the native function of the plan of ``bindings`` is built, keep the generated call of it for this
        signature of torch tensors (``Ready.natively``), which ``run`` then takes first."""
        held = self._natively.get(key)
        if held[0].current() if held is not None else len(self._natively) >= MEMO:
            return
        native = self._hot.native(bindings) if self._hot is not None else None
        ready = Ready.of(self, runtime, inputs, bindings) if native is not None else None
        if ready is not None and ready.to_numpy is not None:  # torch tensors (numpy arrays take the plan's call)
            self._natively[key] = (ready, ready.natively(native))

    def ready(self, *inputs) -> Ready | None:
        """The ready call of the signature of ``inputs`` (dtypes, shapes, size arguments) on the CPU, made by a second
        ``run`` of it: None before that, or where ``run`` keeps none (a program whose inputs have symbolic dimensions,
        one that mutates its inputs, inputs that mix torch tensors and numpy arrays), or once the genome, e-graph or
        runtime it was made for changed."""
        key = signature_key(inputs)
        ready = self._ready.get(key) if key is not None else None
        return ready if ready is not None and ready.current() else None

    def run_reference(self, *inputs, **named_inputs):
        """Run the HLIR on the reference runtime (the ground truth), through the same boundary."""
        values = self.boundary.match(inputs, named_inputs)
        arrays, bindings = self.boundary.check(values)
        results = self._reference.run(arrays, bindings)
        self.boundary.write_back(values, results)
        return self.boundary.pack([results[name] for name in self.graph.outputs], bindings)

    def profile(self, genome: Genome | None = None, device: str = "cpu", inputs: Sequence | None = None,
                warmup: int = 2, trials: int = 10, back_to_back: bool = False) -> Profile:
        """Median time per kernel and in total of ``genome`` (default: the current genome) on
        ``inputs`` (default: the example inputs, else seeded random ones), and with ``back_to_back`` the time per run
        of ``trials`` runs launched one after another; ``llir(genome)`` then shows the times."""
        genome = self._owned(genome, "Compiled.profile")
        check_device(device, "Compiled.profile")
        warmup = integer("Compiled.profile", "warmup", warmup, minimum=0)
        trials = integer("Compiled.profile", "trials", trials, minimum=1)
        arrays, bindings = self._profiling_inputs(inputs, "Compiled.profile")
        profile = self._runtime(genome, device).profile(arrays, self.graph.weights, bindings, warmup, trials,
                                                        back_to_back=back_to_back)
        self._llirs[genome.hash] = self.llir(genome).timed(profile.kernels)
        return profile

    @phase("search")
    def search(self, generations: int = 5, generation_size: int = 30, mutations: int = 3, keep_best: int = 3,
               budget: float | None = None, seed: int = 0, device: str = "cpu", inputs: Sequence | None = None,
               trials: int = 10, cost=None, progress: bool = True, on_candidate=None, stop=None,
               memory_budget: int | None = None, runner: Runner | None = None, resume: bool = True,
               measure_again: bool = False) -> SearchResult:
        """Measure genomes and keep the fastest: see ``luminal_lab.search``. ``budget`` is in seconds;
        ``on_candidate`` sees each candidate as it is measured, and setting the ``stop`` event ends early. A genome
        whose buffers exceed ``memory_budget`` bytes (default: half the device's free memory) is refused unrun.
        ``runner`` builds and measures the candidates (``search.runners``; default: this process's idle default
        ``LocalRunner``, so searches in turn share its measuring process).

        Every measured candidate joins the program's tuning records (``tuning_records``). With ``resume`` the search
        starts from them: the ``keep_best`` fastest recorded on this machine are measured again, and no other genome
        measured here before is measured again unless ``measure_again``.

        With rolled layers a candidate runs the rolled graph (one copy of the layer), is checked against that graph's
        reference, and its time counts the layer's kernels once per copy; the best is then run unrolled once and
        checked against the program's reference (see ``_check_unrolled``), so search time does not grow with depth."""
        where = "Compiled.search"
        check_device(device, where)
        generations = integer(where, "generations", generations, minimum=0)
        generation_size = integer(where, "generation_size", generation_size, minimum=1)
        mutations = integer(where, "mutations", mutations, minimum=1)
        keep_best = integer(where, "keep_best", keep_best, minimum=1)
        budget = seconds(where, "budget", budget, optional=True)
        seed = integer(where, "seed", seed)
        trials = integer(where, "trials", trials, minimum=1)
        resume, measure_again = flag(where, "resume", resume), flag(where, "measure_again", measure_again)
        if memory_budget is not None:
            memory_budget = integer(where, "memory_budget", memory_budget, minimum=1)
        cost, on_candidate = function(where, "cost", cost), function(where, "on_candidate", on_candidate)
        if stop is not None and not callable(getattr(stop, "is_set", None)):
            fail(where, "stop", stop, "a threading.Event (or anything with is_set()) or None")
        if runner is not None and not isinstance(runner, Runner):
            fail(where, "runner", runner, "a runner (ll.LocalRunner(), ll.InProcessRunner(), ll.RayRunner()) or None")
        space = self.choice_space()
        arrays, bindings = self._profiling_inputs(inputs, where)
        reference = self._reference.run(arrays, bindings)
        expected = [reference[name] for name in self.graph.outputs]
        rolling = self.rolling
        if rolling is not None:  # candidates run the rolled graph: one copy of the layer, checked against its reference
            reference = ReferenceRuntime(rolling.graph).run(arrays, bindings)
            if cost is not None:
                cost = functools.partial(_unrolled_cost, cost, rolling)
        recorded = self.records is not None and cost is None  # measured, not costed: recorded
        key = self.records_key_on(device) if recorded else None
        seeds, skip = [], frozenset()
        if recorded and resume:
            machine = platform.node()
            seeds = self.records.fastest(key, space, keep_best, machine)
            skip = frozenset() if measure_again else self.records.measured(key, machine)
        job = Job(device, arrays, dict(self.graph.weights), bindings,
                  [reference[name] for name in self.compiled_graph.outputs], trials, memory_budget)
        if runner is None:
            runner = default_runner(job)
        else:
            runner.start(job)
        measuring = runner if rolling is None else _CopiesCounted(runner, rolling)

        def lower(genome: Genome) -> LLIR:
            llir = self._lower(genome)
            if rolling is None:  # the program's LLIR of the genome: kept, to show its times after the search
                self._llirs[genome.hash] = llir
            return llir

        result = search(space, measuring, generations, generation_size, mutations, keep_best, budget, seed, cost,
                        progress, on_candidate, stop, foreign_kernels(device), lower, seeds, skip)
        if rolling is not None:
            self._check_unrolled(result, arrays, bindings, expected, device, memory_budget)
        else:  # each measured genome's LLIR shows its times
            for candidate in result.history:
                if candidate.outcome == "ok" and candidate.genome.hash in self._llirs:
                    self._llirs[candidate.genome.hash] = self._llirs[candidate.genome.hash].timed(
                        candidate.kernel_seconds)
        self._genome = result.best.genome
        self.last_search = result
        if recorded:
            self.records_key = key
            self.records.add(key, device, result.history)
        return result

    def search_in_background(self, generations: int, generation_size: int, budget: float, seed: int = 0,
                             device: str = "cpu", inputs: Sequence | None = None) -> SearchState:
        """Start ``search`` in a thread, behind this program's calls: each call runs the current genome until the
        search ends, then its best (``luminal_lab.compiler.background``). ``search_state`` shows it as it goes."""
        state = self.search_state = SearchState()
        state.start(lambda measured, stop: self.search(generations, generation_size, budget=budget, seed=seed,
                                                       device=device, inputs=inputs, progress=False,
                                                       on_candidate=measured, stop=stop))
        return state

    def records_key_on(self, device: str) -> str:
        """The key of this program's tuning records on ``device``: its e-graph and input signature (names, shapes
        with their symbolic sizes, dtypes), the device and the library version."""
        signature = [(name, str(spec.node.shape), spec.node.dtype.name) for name, spec in self.graph.inputs.items()
                     if not spec.is_weight]
        return program_key(self.egraph.program, self.egraph.rulesets, signature, device, __version__)

    def _check_unrolled(self, result: SearchResult, arrays: dict[str, np.ndarray], bindings: dict[str, int],
                        expected: list[np.ndarray], device: str, memory_budget: int | None) -> None:
        """Run the best candidate of a rolled search unrolled, once, against the program's reference; one that
        fails there is marked so (its reason starting ``unrolled:``) and the next best is tried."""
        reason = "no candidate ran"
        for candidate in sorted((c for c in result.history if c.outcome == "ok"), key=lambda c: c.seconds):
            llir = self._extract(candidate.genome)
            try:
                runtime = new_runtime(llir, device, memory_budget)
                outcome, reason = compare(runtime.run(arrays, self.graph.weights, bindings), expected)
            except (Refused, MemoryError) as error:
                outcome, reason = "refused", str(error) or type(error).__name__
            if outcome == "ok":
                self._runtimes[(llir.genome_hash, device)] = runtime
                self._llirs[llir.genome_hash] = llir
                return
            candidate.outcome, candidate.reason = outcome, f"unrolled: {reason}"
        raise Refused("no viable genome", f"every candidate that ran one copy of the rolled layer failed unrolled; the "
                      f"last: {reason}")

    def tuning_records(self, device: str | None = None) -> RecordsTable:
        """This program's tuning records on ``device`` as a table: those of its last search (or of the genome
        torch.compile's backend chose for it), and those earlier searches of the same program left, in this process
        or another, before it searched at all. ``device`` None: the last search's device, else the CPU. Raises
        ``LuminalError`` where records are off (``cache_dir=False``)."""
        if self.records is None:
            raise LuminalError("Compiled.tuning_records: this program keeps no records (torch.compile's option "
                               "cache_dir=False)")
        if device is not None:
            one_of("Compiled.tuning_records", "device", device, DEVICES)
        key = self.records_key if device is None and self.records_key is not None else self.records_key_on(
            device or "cpu")
        return RecordsTable(self.records.rows(key))

    # ---- the notebook workbench ---------------------------------------------------------
    def profiler(self, **settings):
        """A widget that launches genome profiling (``search``) and shows its progress live; ``settings``
        preset its controls (generations, generation_size, mutations, device, seed) and its ``runner``."""
        from ..notebook.profiler import GenomeProfiler

        return GenomeProfiler(self, **settings)

    def stages(self, genome: Genome | None = None) -> dict[str, Stage]:
        """The stages of ``genome`` (default: the current genome) by name, in pipeline order (``STAGES``)."""
        llir = self.llir(self._owned(genome, "Compiled.stages"))
        return {"hlir": self.hlir, "egraph": self.egraph, "llir": llir, "regions": Regions.of(llir),
                "cuda": CudaStage(llir)}

    def pipeline(self, genome: Genome | None = None) -> Pipeline:
        """Every stage of ``genome`` (default: the current genome) as one output; the JupyterLab
        extension draws them side by side and follows provenance between them."""
        return Pipeline(self.stages(genome))

    def workbench(self):
        """One view of every stage; selecting a node in one highlights its counterparts in the others."""
        from ..notebook.workbench import Workbench

        return Workbench(self)

    def report(self, path) -> Path:
        """Write one self-contained HTML file with every stage (opens without a kernel or network)."""
        from ..notebook.report import write_report

        return write_report(self, path)

    def _profiling_inputs(self, inputs: Sequence | None, where: str) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """``inputs`` (default: the example inputs), checked at the boundary, else seeded random ones that fit
        in the host's memory budget."""
        named: dict[str, Any] = {}
        if inputs is None and self._example_inputs is not None:
            inputs, named = self._example_inputs, self._example_kwargs
        if inputs is not None:
            if not isinstance(inputs, (list, tuple)):
                fail(where, "inputs", inputs, f"a list or tuple of the {len(self.signature.inputs)} input(s) "
                     f"{list(self.signature.inputs)}, or None")
            return self.boundary.check(self.boundary.match(tuple(inputs), named))
        shapes = {}
        for name in self.signature.inputs:
            node = self.graph.inputs[name].node
            if any(not d.is_num for d in node.shape):
                raise LuminalError(f"input {name!r} has a symbolic shape; pass inputs= to profile or search")
            shapes[name] = (tuple(d.value for d in node.shape), node.dtype)
        sizes = {name: math.prod(shape) * dtype.numpy.itemsize for name, (shape, dtype) in shapes.items()}
        budget = int(host_memory_available() * MEMORY_FRACTION)
        if sum(sizes.values()) > budget:
            name = max(sizes, key=sizes.__getitem__)
            shape, dtype = shapes[name]
            raise MemoryBudgetError(f"random input {name!r} {list(shape)} {dtype.value} for {where} needs "
                                    f"{format_bytes(sizes[name])}, over the host memory budget of "
                                    f"{format_bytes(budget)}; pass smaller inputs= or a smaller graph")
        return random_inputs(shapes), {}

def compile(program, example_inputs: Sequence | None = None, *, example_kwargs: Mapping[str, Any] | None = None,
            fusion: bool = True, rolling: bool = True, **options) -> Compiled:
    """Compile an ``ll.Graph``, or a ``torch.nn.Module`` / function on ``example_inputs`` (via torch.export), a
    module also on ``example_kwargs`` (its keyword arguments, e.g. a transformers model's ``cache=``).

    ``fusion=False`` leaves the fusion rulesets out of the e-graph's schedule (no fused regions); ``rolling=False``
    keeps repeated layers apart (by default a run of identical layers is rolled to one, ``luminal_lab.hlir.rolling``).
    """
    where = "ll.compile"
    flag(where, "fusion", fusion)
    flag(where, "rolling", rolling)
    if isinstance(program, Graph):
        for name, value in (("example_inputs", example_inputs), ("example_kwargs", example_kwargs)):
            if value is not None:
                fail(where, name, value, "None for an ll.Graph (a Graph declares its own inputs)")
        if options:
            raise ArgumentError(f"ll.compile: unknown option(s) {sorted(options)} for an ll.Graph")
        return Compiled(program, Signature.of_graph(program), fusion=fusion, rolling=rolling)
    if not callable(program):
        fail(where, "program", program, "an ll.Graph, a torch.nn.Module or a function of tensors")
    if example_inputs is None:
        fail(where, "example_inputs", None, "the example inputs of a torch module or function (a tensor or a tuple)")
    from ..frontends.translate import from_torch  # torch loads only for torch programs

    return Compiled.of_torch(from_torch(program, example_inputs, example_kwargs, **options), fusion=fusion,
                             rolling=rolling)


def _current_genome(program: weakref.ref[Compiled]) -> Genome | None:
    compiled = program()
    return compiled.genome if compiled is not None else None


def _unrolled_cost(cost: Callable[[LLIR], float], rolling: Rolling, llir: LLIR) -> float:
    """A search's ``cost`` of a candidate of a rolled graph: ``cost`` of its unrolled LLIR."""
    return cost(unroll(llir, rolling))


class _CopiesCounted(Runner):
    """``runner`` (started), measuring a candidate of a rolled graph (one copy of the layer): an ``ok`` time counts
    the layer's kernels once per copy, at the times of the copy that ran (its markers not at all). Early abort
    compares the copy's first run with that count, so it only ever aborts later than it would unrolled."""

    def __init__(self, runner: Runner, rolling: Rolling):
        self.runner, self.rolling = runner, rolling

    def build(self, llir: LLIR) -> None:
        self.runner.build(llir)

    def measure(self, llir: LLIR, best: float | None, deadline: float | None) -> Measurement:
        return self._counted(llir, self.runner.measure(llir, best, deadline))

    def measure_all(self, llirs: Sequence[LLIR], best: Callable[[], float | None],
                    deadline: float | None) -> Iterator[Measurement]:
        measurements = self.runner.measure_all(llirs, best, deadline)
        try:
            for llir, measured in zip(llirs, measurements):
                yield self._counted(llir, measured)
        finally:
            measurements.close()

    def _counted(self, llir: LLIR, measured: Measurement) -> Measurement:
        if measured.outcome == "ok":
            measured.seconds += sum((n - 1) * measured.kernel_seconds.get(kid, 0.0)
                                    for kid, n in runs(llir, self.rolling).items())
        return measured

    def finish(self) -> None:
        self.runner.finish()
