"""``torch.compile(model, backend="luminal_lab", options={...})``: the TorchDynamo backend.

The backend is registered through the ``torch_dynamo_backends`` entry point, so torch finds it by name without
importing luminal_lab first. Dynamo hands over an FX ``GraphModule`` and example inputs; the graph is compiled through
the same torch.export path as ``ll.compile``, on the first call's arguments; its translation is kept beside the tuning
records (``frontends.kept``), so a later process compiling the same graph on the same kind of arguments exports nothing.

Sizes dynamo treats as dynamic (after a second shape, with ``dynamic=True``, or ``torch._dynamo.mark_dynamic``: the
SymInts in its placeholders' example values) are exported as dynamic (``Dim.AUTO``) and become the HLIR's symbolic
dimensions, named as dynamo names them (``s77``): one program, one e-graph, one search and one cached genome then serve
every size, the runtime planning per binding. A SymInt argument is computed inside the program from the tensor size
it names, or else is a size argument of the program (``Signature.sizes``) that binds its variable at each call. A size
torch must specialise (a guard, such as equality to a constant) stays a number, and the HLIR summary lists the
symbolic dimensions and the specialised sizes; a program whose export specialised a size dynamo left dynamic serves
only that size, another size getting another program. A graph without dynamic sizes is compiled per input shapes and
dtypes (and values of other arguments).

The module's parameters and buffers, which dynamo passes as arguments on every call, become the program's weights:
each is handed to the runtime (and copied in) only when its tensor changed since the last call (another tensor, other
memory, or an in-place update that moved torch's version counter, which one through ``.data`` does not). The other
tensors, and a buffer the graph mutates in place (so that the mutation is written back to it), are the program's
inputs.

Each program starts with the best genome in the tuning records for it (``search.records``: keyed by the e-graph, the
input signature with its dynamic sizes symbolic, the device and the library version), else with the most-fused
genome, which the first call runs at once while a short measured search (``BackendOptions``) on its inputs goes on
in the background, whose best genome later calls take once it ends (``compiler.background``); every candidate is
recorded (with no search, the most-fused genome is recorded as chosen unmeasured). With ``background=False`` the
search ends before the first call runs (its budget counting the build of the most-fused genome's kernels). The
device follows the inputs: CPU tensors run on the CPU runtime, CUDA tensors on the CUDA runtime (device-resident),
and results come back on the inputs' device. A graph dynamo compiles again for a frame it compiled before for the
same module (``_owner``: an input's shape, dtype or int changed) runs in torch on its first call and is compiled on
its second (another module's first call is compiled at once, though transformers' models share one frame): sizes
that changed once often change again at once, and dynamo then makes them dynamic (a generation's first decode step,
whose cache length dynamo has seen once, is followed by steps with one more token each, which the dynamic program
serves), so compiling at once would compile a program that runs once. Once a graph holds one program and its export
pinned no size, every later call goes straight to it (``Call``, ``compiler.calls``): dynamo's guards already hold
the arguments to what it serves, so no key is built and no device looked up. A static one (CPU tensors, no dynamic
size) takes its program's ready call (``Ready``) from its second call, and once called ``HOT_CALLS`` times, its
native function (the plan as one numba ``cfunc``, ``runtime.native``), built in the background meanwhile; a dynamic
one's runs at a binding seen ``native.HOT_RUNS`` times take that plan's native function (``native.Hot``), through a
generated call of it once built (``Ready.natively``). ``programs(compiled)`` finds the ``Compiled`` programs behind
a compiled module or function.

Training: in grad mode, when an input or parameter requires grad, the graph goes through AOTAutograd (traced with
``aot_decompositions``: core aten, backward ops included), and its forward and backward graphs each become a
``DynamoProgram`` as above, both compiled at once (the backward on stand-ins of its inputs' shapes), so an op
without a translation in either raises ``UnsupportedOpError`` on the first call. The forward returns, after the
graph's outputs, the activations the backward needs; the backward takes them and the outputs' gradients and returns
a gradient per input (``None`` for one that needs none). A graph AOTAutograd traces with symbolic sizes gives
dynamic programs. Under ``torch.no_grad()``, or with nothing that requires grad, only the graph itself is compiled.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import time
import warnings
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
from torch.export.graph_signature import InputKind

from ..core.errors import ArgumentError, LuminalError, NoDeviceError, Refused
from ..core.phases import phase
from ..core.storage import directory_of
from ..frontends import kept
from ..frontends.export import export_core_aten
from ..frontends.translate import translate
from ..hlir.graph import Graph
from ..runtime import DEVICES, check_device, start_compilers
from ..search.records import TuningRecords
from .calls import Call, Feed
from .compiled import Compiled
from .options import BackendOptions
from .training import is_concrete, same_shapes, stand_ins, through_aot


class _Bound(torch.nn.Module):
    """The dynamo graph taking its tensors and its size arguments (``sizes``: positions of the dynamic ints that no
    tensor size gives), each other argument fixed to its value (a ``baked`` float's 0-d tensor too) or, where
    ``derived`` says so (``position: (tensor position, axis)``), computed from a tensor's size."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], sizes: Collection[int] = (),
                 derived: Mapping[int, tuple[int, int]] | None = None, baked: Collection[int] = ()):
        super().__init__()
        self.gm = gm
        self.derived = dict(derived or {})
        self.is_input = [(isinstance(a, torch.Tensor) and i not in baked) or i in sizes for i, a in enumerate(args)]
        self.constants = [None if given or i in self.derived else a
                          for i, (a, given) in enumerate(zip(args, self.is_input, strict=True))]

    def forward(self, *inputs: torch.Tensor | int):
        given = iter(inputs)
        args = [next(given) if t else c for t, c in zip(self.is_input, self.constants, strict=True)]
        for position, (tensor, axis) in self.derived.items():
            args[position] = args[tensor].shape[axis]
        # an Interpreter (under preserve_node_meta) hands each dynamo node's stack trace on to export
        return torch.fx.Interpreter(self.gm).run(*args)


@dataclass(frozen=True)
class _Dynamism:
    """Which sizes dynamo made symbolic in a graph, read from its placeholders' example values: per tensor argument
    the symbol of each dynamic axis (``{position: {axis: "s77"}}``), the SymInt arguments' symbols
    (``{position: "s86"}``), and the sizes its guards specialised (``{(position, axis or None): value}``)."""

    axes: dict[int, dict[int, str]]
    scalars: dict[int, str]
    specialised: dict[tuple[int, int | None], int]

    @classmethod
    def of(cls, gm: torch.fx.GraphModule) -> _Dynamism:
        axes: dict[int, dict[int, str]] = {}
        scalars: dict[int, str] = {}
        specialised: dict[tuple[int, int | None], int] = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        for position, node in enumerate(placeholders):
            value = node.meta.get("example_value", node.meta.get("val"))  # dynamo's, else AOTAutograd's
            if isinstance(value, torch.Tensor):
                for axis, size in enumerate(value.shape):
                    symbol = _symbol(size)
                    if isinstance(symbol, str):
                        axes.setdefault(position, {})[axis] = symbol
                    elif isinstance(size, torch.SymInt):
                        specialised[(position, axis)] = symbol
            elif isinstance(value, torch.SymInt):
                symbol = _symbol(value)
                if isinstance(symbol, str):
                    scalars[position] = symbol
                else:
                    specialised[(position, None)] = symbol
        return cls(axes, scalars, specialised)

    @property
    def dynamic(self) -> bool:
        return bool(self.axes or self.scalars)

    def key(self, args: Sequence[Any]) -> tuple:
        """``_key`` with the dynamic sizes left out (``None``): one key for every size."""
        def entry(position: int, a: Any) -> tuple:
            if isinstance(a, torch.Tensor):
                axes = self.axes.get(position, {})
                return tuple(None if i in axes else d for i, d in enumerate(a.shape)), a.dtype, a.device
            return (type(a), None if position in self.scalars else a)

        return tuple(entry(i, a) for i, a in enumerate(args))


def _symbol(size: Any) -> str | int:
    """A dynamo size's symbol (``"s77"``), or its value where it is a number (given, or specialised by a guard)."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    node = size.node
    expr = node.shape_env.replace(node.expr) if node.shape_env is not None else node.expr
    if expr.is_number:
        return int(expr)
    if expr.is_Symbol:
        return expr.name
    return int(node.hint) if node.hint is not None else int(size)  # an expression of symbols: taken as a size


class DynamoProgram:
    """What the backend returns to dynamo: runs the graph through luminal_lab.

    ``programs`` maps an input key (shapes, dtypes, devices, non-tensor values; the dynamic sizes left out, and the
    values of those the program's export specialised added) to its ``Compiled`` program, for looking at in a
    notebook (``ll.programs(compiled_model)`` collects them); ``feeds`` maps it to which arguments are the program's
    inputs (tensors and size arguments) and which its weights; ``pins`` maps a key without the specialised values
    to the ``(position, axis)`` lists of the sizes its programs' exports specialised.
    """

    def __init__(self, gm: torch.fx.GraphModule, options: BackendOptions | None = None,
                 frame: tuple[Any, Any] | None = None, core_aten: bool = False):
        self.passed = _pass_inputs_through(gm)
        self.gm = gm
        self.core_aten = core_aten  # whether gm is core aten already (AOTAutograd's graphs): exported undecomposed
        self.options = options or BackendOptions()
        self.programs: dict[tuple, Compiled] = {}
        self.feeds: dict[tuple, Feed] = {}
        self.pins: dict[tuple, list[tuple[tuple[int, int | None], ...]]] = {}
        self.input_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        self.from_module = {n.name for n in gm.graph.nodes if n.op == "placeholder" and _read_from_module(n)}
        self.baked = [i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder") if _unspecialized(n)]
        self.dynamism = _Dynamism.of(gm)
        self.code, self.owner = frame or _compiling_frame()
        self.serial = next(_SERIAL)
        self.only: Call | None = None
        self.only_floats: tuple = ()  # the baked floats' values that the one program serves
        self.per_shape: str | None = None  # why a dynamic graph is compiled per input shape (None: it is not)
        self.first_eager = False  # whether the next call runs the graph in torch instead of compiling it
        self.in_torch: str | None = None  # why every call runs the graph in torch (it cannot be compiled)
        self.unchosen: dict[tuple, Callable[[], None]] = {}  # programs compiled without a genome: choosing one

    def key(self, args: Sequence[Any]) -> tuple:
        """The key of the program that serves ``args`` (one not compiled yet: the key without pinned sizes), the
        values of the baked floats last."""
        if not self.dynamism.dynamic:
            return _key(args) + self.floats(args)
        open_key = self.dynamism.key(args) + self.floats(args)
        for pins in self.pins.get(open_key, ()):
            key = open_key + tuple(_size_at(args, pin) for pin in pins)
            if key in self.programs:
                return key
        return open_key

    def floats(self, args: Sequence[Any]) -> tuple:
        """The values of the floats dynamo passes as 0-d tensors, which each program bakes in (``_unspecialized``)."""
        return tuple([args[i].item() for i in self.baked]) if self.baked else ()

    def __call__(self, *args: Any) -> Any:
        if self.only is not None and not self.baked and not self.passed:
            return self.only(args)  # dynamo's guards hold the arguments to what the one program serves
        if not self.passed:
            return self._run(args)
        result = list(self._run(args))
        for output, position in self.passed:
            result.insert(output, args[position])
        return result

    def _run(self, args: Sequence[Any]) -> Any:
        """The graph's results, without the inputs it returns unchanged (``passed``)."""
        if self.only is not None and self.floats(args) == self.only_floats:
            return self.only(args)  # dynamo's guards hold the other arguments to what the one program serves
        return self._look_up_and_run(args)

    @phase("run")
    def _look_up_and_run(self, args: Sequence[Any]) -> Any:
        """``_run`` past the one program's call: the program of ``args`` found (or compiled) and run."""
        if self.first_eager or self.in_torch:  # a recompile runs in torch once (compiled if called again); a graph
            # that cannot be compiled, always
            self.first_eager = False
            return self.gm(*args)
        where, device = self.device_of(args)
        key = self.key(args)
        program = self.programs.get(key)
        if program is None:
            try:
                key, program = self.compile_for(args)
            except LuminalError as error:  # from now on the graph runs in torch
                self.in_torch = _run_in_torch(error, self.options)
                return self.gm(*args)
        self.choose_genomes()
        call = Call(program, self.feeds[key], where, device)
        result = call(args)
        # the genome is chosen: the idle egglog worker goes (it restarts, replaying, if the e-graph is used again)
        program.egraph.close()
        pinned = any(pins for by_key in self.pins.values() for pins in by_key)
        if len(self.programs) == 1 and not pinned and self.per_shape is None:
            self.only = call  # one program, no size its export pinned: every call dynamo makes goes to it
            self.only_floats = self.floats(args)
            if call.in_place and not self.dynamism.dynamic:  # dynamo's guards hold every call to one signature
                call.static = call.static_calls = 2  # its ready call is made by the program's second run
        return result

    def device_of(self, args: Sequence[Any]) -> tuple[torch.device, str]:
        """The inputs' device and the runtime that runs them (the ``device`` option, else the inputs'); raises on
        inputs on different devices, and ``NoDeviceError`` where the runtime cannot run here."""
        placed = [(name, a.device) for name, a in zip(self.input_names, args, strict=True)
                  if isinstance(a, torch.Tensor)]
        devices = {device for _, device in placed}
        if len(devices) > 1:
            listed = ", ".join(f"{name} on {device}" for name, device in placed)
            raise LuminalError(f"inputs on different devices ({listed}): a luminal_lab program runs on one device; "
                               "move the model and its inputs to one (for example with .to('cuda'))")
        where = devices.pop() if devices else torch.device("cpu")
        device = self.options.device or where.type
        if device not in DEVICES:
            raise LuminalError(f"inputs on device {where}: luminal_lab runs programs on {DEVICES}")
        check_device(device)
        return where, device

    def choose_genomes(self) -> None:
        """Choose the genome of each program compiled without one (``compile_for(args, genome=False)``)."""
        while self.unchosen:
            self.unchosen.pop(next(iter(self.unchosen)))()

    def compile_for(self, args: Sequence[Any], genome: bool = True) -> tuple[tuple, Compiled]:
        """Compile (and cache) the program for concrete ``args``, with its genome (``genome=False``: chosen later, by
        ``choose_genomes``, when its e-graph is built), and return it with its key: for
        a static graph specialised to ``args``, else with dynamo's dynamic sizes symbolic. Its inputs and weights
        keep dynamo's placeholder names, the parameters and buffers among ``args`` being its weights
        (``weight_names``) but for those it mutates in place, which stay inputs. A dynamic graph whose translation
        needs a number where a size is symbolic (a pooling window over a dynamic size, say) is compiled per input
        shape from then on, with a warning that says why (``per_shape``)."""
        dynamism = self.dynamism
        if dynamism.dynamic:
            try:
                return self._compile(args, genome)
            except LuminalError as error:  # an op that needs a number where dynamo left a size symbolic
                self.per_shape = str(error).splitlines()[0]
                self.dynamism = _Dynamism({}, {}, {})
                self.pins.clear()
                warnings.warn(f"luminal_lab: the graph's dynamic sizes cannot stay symbolic ({self.per_shape}); it is "
                              "compiled per input shape instead", stacklevel=2)
        return self._compile(args, genome)

    def _compile(self, args: Sequence[Any], genome: bool = True) -> tuple[tuple, Compiled]:
        _, device = self.device_of(args)
        dynamism = self.dynamism
        weights = self.weight_names(args)
        derived = _derived(dynamism, args) if dynamism.dynamic else {}
        sizes = [i for i in dynamism.scalars if i not in derived]
        bound = _Bound(self.gm, args, sizes, derived, self.baked)
        given = [i for i, is_input in enumerate(bound.is_input) if is_input]
        inputs = tuple(args[i] for i in given)
        names = [self.input_names[i] for i in given]
        dynamic_shapes = None
        if dynamism.dynamic:  # the sizes dynamo made symbolic, on the inputs (weights keep their shapes)
            auto = torch.export.Dim.AUTO
            dynamic_shapes = tuple(auto if i in sizes else
                                   {axis: auto for axis in dynamism.axes.get(i, {})} if names[k] not in weights
                                   else None for k, i in enumerate(given))
        floats = self.floats(args)
        kept_in = None if self.options.cache_dir is False else directory_of(self.options.cache_dir)
        of = kept.key(self.gm, args, [names, sorted(weights), sizes, sorted(derived.items()), self.baked, floats,
                                      repr(dynamism), self.core_aten]) if kept_in else None
        translated = kept.load(kept_in, of, bound, names, inputs, weights) if of else None
        if translated is None:
            # outside dynamo's tracing context: inside it, export would fakify the inputs in dynamo's shape
            # environment (a dynamic size its own symbol again, a graph compiled per shape still symbolic) and add
            # guards on ``_Bound``'s arguments to dynamo's (which its frame has not: "Guard failed on the same frame")
            with fx_traceback.preserve_node_meta(), torch._guards.tracing(None):
                exported = export_core_aten(bound, inputs, decompose=not self.core_aten,
                                            dynamic_shapes=(dynamic_shapes,) if dynamic_shapes else None)
                symbols = _renames(exported, dynamism, given) if dynamism.dynamic else None
                translated = translate(exported, bound, names, inputs, weights=weights, symbols=symbols,
                                       constant_outputs=True, opaque=not self.options.strict)
            if of:
                kept.store(kept_in, of, translated, names)
        key = _key(args) + floats
        if dynamism.dynamic:
            pins = self.note_specialised(translated.graph, given)
            open_key = dynamism.key(args) + floats
            key = open_key + tuple(_size_at(args, pin) for pin in pins)
            self.pins.setdefault(open_key, []).append(pins)
        program = Compiled.of_torch(translated, fusion=self.options.fusion, rolling=self.options.rolling)
        position = {name: i for i, name in enumerate(self.input_names)}
        feed = Feed([position[name] for name in program.signature.inputs],
                     {name: position[name] for name, spec in program.graph.inputs.items()
                      if spec.is_weight and name in position})
        example = [args[i].detach().cpu() if isinstance(args[i], torch.Tensor) else args[i] for i in feed.inputs]
        self.unchosen[key] = functools.partial(self.choose_genome, program, example, device)
        if genome:
            self.choose_genomes()
        self.programs[key] = program
        self.feeds[key] = feed
        return key, program

    def note_specialised(self, graph: Graph, given: list[int]) -> tuple:
        """Record in ``graph.specialised`` the sizes dynamo's guards specialised and those the export specialised of
        the ones dynamo left dynamic; return the latter's ``(position, axis)`` (the program serves only their
        values)."""
        dynamism = self.dynamism
        pins = []
        for (position, axis), value in dynamism.specialised.items():
            graph.specialised[self.input_names[position] + ("" if axis is None else f"[{axis}]")] = value
        for position in given:
            name = self.input_names[position]
            if position in dynamism.scalars and name in graph.size_inputs and graph.size_inputs[name].is_num:
                graph.specialised[name] = graph.size_inputs[name].value
                pins.append((position, None))
            if name not in graph.inputs or graph.inputs[name].is_weight:
                continue
            shape = graph.inputs[name].node.shape
            for axis in dynamism.axes.get(position, {}):
                if shape[axis].is_num:
                    graph.specialised[f"{name}[{axis}]"] = shape[axis].value
                    pins.append((position, axis))
        return tuple(pins)

    def weight_names(self, args: Sequence[Any]) -> set[str]:
        """The placeholders whose ``args`` are parameters or buffers: tensors dynamo read from a module's
        parameters or buffers, and any ``torch.nn.Parameter``."""
        # Dynamo records where it read each placeholder's value (meta["grapharg"].source): a module's _parameters or
        # _buffers however the module was reached (self, a decorator's arguments, a global). Matching the compiled
        # frame's self by identity would miss a module whose forward a decorator wraps (transformers' models). A
        # Parameter is known by its class too, in a graph without that metadata. Any other tensor stays an input: a
        # caller may rewrite one through a numpy view, which moves no version counter. Dynamo drops that metadata once
        # the backend returns, so it is read when the program is made (``from_module``), for a later compile.
        return {name for name, a in zip(self.input_names, args, strict=True)
                if isinstance(a, torch.nn.Parameter) or (isinstance(a, torch.Tensor) and name in self.from_module)}

    def choose_genome(self, program: Compiled, inputs: list[torch.Tensor], device: str) -> None:
        """The best genome of ``program`` in the tuning records, else the most-fused one: built first, then searched
        from (every candidate recorded) with what the build left of the budget, else recorded unmeasured. For a program
        the records lack, the kernel compilers start before its e-graph saturates, so their start-up overlaps it."""
        options = self.options
        program.records = records = None if options.cache_dir is False else TuningRecords(options.cache_dir)
        if records is not None:
            program.records_key = program.records_key_on(device)
            if not records.rows(program.records_key):  # a new program: its kernels are likely new too, so the
                start_compilers(device)  # compilers start up while its e-graph saturates
        space = program.choice_space()
        if records is not None:
            cached = records.best(program.records_key, space)
            if cached is not None:
                program.genome = cached
                return
        with contextlib.suppress(Refused):  # the smallest-term genome stays
            program.genome = space.fused_genome()
        if options.generations and options.background:  # comp.search records every candidate
            program.search_in_background(options.generations, options.generation_size, options.budget,
                                         options.seed, device, inputs)
            return
        if options.generations:
            started = time.monotonic()
            program.prepare(*inputs, device=device)  # its kernels compiled: the search's first candidate loads them
            left = options.budget - (time.monotonic() - started)
            if left > 0:  # comp.search records every candidate
                program.search(options.generations, options.generation_size, budget=left, seed=options.seed,
                               device=device, inputs=inputs)
                return
        if records is not None:
            records.add_unmeasured(program.records_key, device, program.genome)

    def __repr__(self) -> str:
        return f"<luminal_lab DynamoProgram, {len(self.programs)} compiled input signature(s)>"


_MADE: weakref.WeakSet[DynamoProgram] = weakref.WeakSet()  # every live program the backend made
_SERIAL = itertools.count()  # the order programs were made in


@functools.cache
def _inline_wrapper() -> Any:
    """The code of the frame dynamo puts around a call of a torch.nn module."""
    from torch._dynamo.external_utils import wrap_inline

    return wrap_inline(len).__code__


def _compiling_frame() -> tuple[Any, Any]:
    """The code object dynamo is compiling (a function, a module's forward, or a resumption of one after a graph
    break) and the module it runs for (``_owner``)."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        module = tx.f_locals.get("fn") if tx.f_code is _inline_wrapper() else None
        if isinstance(module, torch.nn.Module):  # a torch.nn module (nn.Sequential, ...): dynamo compiles a frame
            return type(module).forward.__code__, module  # around the call
        return tx.f_code, _owner(tx.f_code, tx.f_locals)
    except Exception:  # not inside dynamo (a test calling the backend directly)
        return None, None


def _owner(code: Any, arguments: dict[str, Any]) -> torch.nn.Module | None:
    """The module a frame runs for: the first of its arguments (named, then ``*args``) that is a module. That is
    ``self`` for a module's ``forward``, and the model for a decorator's ``wrapper(*args, **kwargs)`` around it (as
    transformers' models have), whose code every model shares."""
    named = code.co_argcount + code.co_kwonlyargcount
    values = [arguments.get(name) for name in code.co_varnames[:named]]
    if code.co_flags & inspect.CO_VARARGS:
        values += list(arguments.get(code.co_varnames[named], ()))
    return next((value for value in values if isinstance(value, torch.nn.Module)), None)


def _resumptions(code: Any) -> set[Any]:
    """``code`` and the functions dynamo made to resume it after graph breaks (and those of theirs)."""
    from torch._dynamo.resume_execution import ContinueExecutionCache

    found, todo = set(), [code]
    while todo:
        current = todo.pop()
        if current in found:
            continue
        found.add(current)
        todo.extend(ContinueExecutionCache.cache.get(current, {}).values())
    return found


def programs(compiled: Any) -> list[Compiled]:
    """The ``Compiled`` programs behind ``compiled``, a ``torch.compile``-d module or function (or a module compiled
    in place, or its bound ``forward``: ``model.forward = torch.compile(model.forward)``), one per graph and input
    signature (a dynamic graph's one program serving every size; a trained graph's forward, then its backward), in
    the order they were made: ``comp.workbench()``, ``comp.pipeline()`` and ``comp.profiler()`` work on each. A
    module's programs are those compiled from its ``forward`` (on this module, or after a graph break, on any module
    of its class); a module not compiled itself, those of the modules of its class with the same parameter and
    buffer shapes, whose graphs dynamo serves it with."""
    target = getattr(compiled, "_orig_mod", None) or getattr(compiled, "_torchdynamo_orig_callable", None) \
        or compiled
    module = isinstance(target, torch.nn.Module)
    owner = target if module else getattr(target, "__self__", None)  # a module's bound forward: the module
    owner = owner if isinstance(owner, torch.nn.Module) else None
    code = type(target).forward.__code__ if module else getattr(target, "__code__", None)
    if code is None:
        raise TypeError(f"ll.programs takes a torch.compile-d module or function, not {type(compiled).__name__}")
    codes = _resumptions(code)
    made = [p for p in _MADE if p.code in codes and (p.owner is None or p.owner is owner)]
    if owner is not None and not any(p.owner is owner for p in made):
        made += [p for p in _MADE if p.code in codes and type(p.owner) is type(owner)
                 and _shapes(p.owner) == _shapes(owner)]
    made.sort(key=lambda p: p.serial)
    found = [program for p in made for program in p.programs.values()]
    if not found:
        raise LuminalError(f"no luminal_lab programs behind {type(compiled).__name__} yet: torch.compile compiles on "
                           "the first call, so call it once (with backend='luminal_lab') first")
    return found


def _shapes(module: torch.nn.Module) -> list[tuple[str, torch.Size]]:
    """The names and shapes of ``module``'s parameters and buffers."""
    return [(name, t.shape) for name, t in itertools.chain(module.named_parameters(), module.named_buffers())]


def _pass_inputs_through(gm: torch.fx.GraphModule) -> list[tuple[int, int]]:
    """Take out of ``gm``'s outputs the tensor inputs it returns unchanged (AOTAutograd's forward returns the
    parameters the backward reads), so that a program neither copies them in nor out: ``(output index, input
    index)`` pairs, by ascending output index, for the caller to put the inputs themselves back. Nothing is taken
    from outputs that are not a flat tuple or list, or when no other output would be left."""
    output = gm.graph.output_node()
    values = output.args[0]
    if not isinstance(values, (tuple, list)):
        return []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    passed = [(i, placeholders.index(v)) for i, v in enumerate(values)
              if isinstance(v, torch.fx.Node) and v.op == "placeholder"
              and isinstance(v.meta.get("val", v.meta.get("example_value")), torch.Tensor)]
    if not passed or len(passed) == len(values):
        return []
    taken = {i for i, _ in passed}
    output.args = (type(values)(v for i, v in enumerate(values) if i not in taken),)
    gm.recompile()
    return passed


def _read_from_module(placeholder: torch.fx.Node) -> bool:
    """Whether dynamo read the placeholder's value from a module's parameters or buffers."""
    from torch._dynamo.source import is_from_unspecialized_param_buffer_source

    source = getattr(placeholder.meta.get("grapharg"), "source", None)
    return source is not None and is_from_unspecialized_param_buffer_source(source)


def _unspecialized(placeholder: torch.fx.Node) -> bool:
    """Whether the placeholder is a Python float that dynamo passes as a 0-d tensor (an unspecialized float, as with
    ``dynamic=True``: a model's ``rms_norm_eps``, say), which the graph reads with ``.item()``. Export cannot take a
    value it reads so as a number (attention's ``scale``), so a program bakes it in, and serves only that value."""
    grapharg = placeholder.meta.get("grapharg")
    value = placeholder.meta.get("example_value")
    return (getattr(grapharg, "pass_arg_as_tensor", False) and isinstance(value, torch.Tensor) and value.ndim == 0
            and value.dtype.is_floating_point)


def _derived(dynamism: _Dynamism, args: Sequence[Any]) -> dict[int, tuple[int, int]]:
    """The SymInt arguments a tensor argument's size gives: ``{position: (tensor position, axis)}``."""
    found = {}
    for position, symbol in dynamism.scalars.items():
        for tensor, axes in dynamism.axes.items():
            axis = next((a for a, s in axes.items() if s == symbol), None)
            if axis is not None:
                found[position] = (tensor, axis)
                break
    return found


def _renames(exported: torch.export.ExportedProgram, dynamism: _Dynamism, given: list[int]) -> dict[str, str]:
    """The export's size symbols renamed to dynamo's (``{"s17": "s77"}``), matched by input and axis."""
    names = {}
    placeholders = [n for n in exported.graph.nodes if n.op == "placeholder"]
    users = [n for n, spec in zip(placeholders, exported.graph_signature.input_specs, strict=True)
             if spec.kind == InputKind.USER_INPUT]
    for node, position in zip(users, given, strict=True):
        value = node.meta.get("val")
        pairs = ([(value, dynamism.scalars.get(position))] if not isinstance(value, torch.Tensor) else
                 [(value.shape[axis], symbol) for axis, symbol in dynamism.axes.get(position, {}).items()])
        for size, symbol in pairs:
            if isinstance(size, torch.SymInt) and symbol is not None and size.node.expr.is_Symbol:
                names.setdefault(size.node.expr.name, symbol)
    return names


def _size_at(args: Sequence[Any], pin: tuple[int, int | None]) -> int:
    position, axis = pin
    return int(args[position]) if axis is None else int(args[position].shape[axis])


def _key(args: Sequence[Any]) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


@phase("backend")
def luminal_lab_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                        options: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """TorchDynamo backend: compile ``gm`` with luminal_lab (``options``: ``BackendOptions``); unsupported ops raise
    here, at compile time.

    When the example inputs are symbolic (dynamic shapes), compilation waits for the first call, whose concrete
    values the weights take and the search runs on; the program it makes keeps the dynamic sizes symbolic. In grad
    mode, with an input or parameter that requires grad, the forward and backward graphs are compiled (``_training``).
    """
    options = BackendOptions.of(options)
    frame = _compiling_frame()
    again = frame[0] is not None and any(made.code is frame[0] and made.owner is frame[1] for made in _MADE)
    try:
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in example_inputs):
            return _training(gm, example_inputs, options, frame, again)
        return _program(gm, example_inputs, options, frame, again)
    except LuminalError as error:
        _run_in_torch(error, options)
        return gm


def _run_in_torch(error: LuminalError, options: BackendOptions) -> str:
    """Why a graph that cannot be compiled runs in torch instead, after a warning that says so; raises ``error`` with
    the ``strict`` option, and where it is no reason to run in torch (no such device, a bad argument)."""
    if options.strict or isinstance(error, (NoDeviceError, ArgumentError)):
        raise error
    where = getattr(error, "where", None)  # an unsupported op's user line
    reason = str(error).splitlines()[0] + (f", at {where}" if where else "")
    warnings.warn(f"luminal_lab: a graph runs in torch, not compiled: {reason} (options={{'strict': True}} raises "
                  "instead)", stacklevel=2)
    return reason


def _program(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: BackendOptions,
             frame: tuple[Any, Any], again: bool, genome: bool = True, core_aten: bool = False) -> DynamoProgram:
    """The ``DynamoProgram`` of ``gm``, compiled at once on concrete example inputs (its genome chosen too unless
    not ``genome``) unless its frame was compiled before (``again``: see ``DynamoProgram.__call__``)."""
    program = DynamoProgram(gm, options, frame, core_aten)
    if again:
        program.first_eager = True
    elif all(is_concrete(a) for a in example_inputs):
        program.compile_for(example_inputs, genome)
    _MADE.add(program)
    return program


def _training(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: BackendOptions,
              frame: tuple[Any, Any], again: bool) -> Callable[..., Any]:
    """``gm`` through AOTAutograd: its forward and backward graphs, traced with ``aot_decompositions``, each become a
    ``DynamoProgram`` compiled now (the backward too, not on the first ``backward()``), the forward's genome chosen
    after the backward is translated: an op the backward lacks is refused before any e-graph is built. The forward
    returns the activations the backward needs after its outputs; it is compiled on dynamo's example inputs, where
    they are its inputs, so the parameters among them are its weights; attention is traced as its math. The backward
    is compiled on stand-ins of its inputs' shapes and dtypes (the saved activations and the outputs' gradients), all
    of which stay its inputs."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    forwards: list[DynamoProgram] = []  # (one with no backward chooses its genome on its first call)

    def compiler(graph: torch.fx.GraphModule, inputs: Sequence[Any], forward: bool) -> Callable[..., Any]:
        with unset_fake_temporarily():
            given = example_inputs if forward and same_shapes(example_inputs, inputs) else stand_ins(inputs)
            program = _program(graph, given, options, frame, again, genome=not forward, core_aten=True)
            if forward:
                forwards.append(program)
            else:
                for first in forwards:
                    first.choose_genomes()
            return make_boxed_func(program)

    return through_aot(gm, example_inputs, functools.partial(compiler, forward=True),
                       functools.partial(compiler, forward=False))
