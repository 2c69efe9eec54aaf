"""``torch.compile(model, backend="luminal_lab", options={...})``: the TorchDynamo backend.

The backend is registered through the ``torch_dynamo_backends`` entry point, so torch
finds it by name without importing luminal_lab first. Dynamo hands over an FX
``GraphModule`` and example inputs; each distinct set of input shapes and dtypes (and
values of non-tensor arguments, such as the symbolic sizes dynamo passes once it treats a
dimension as dynamic) is compiled through the same torch.export path as ``ll.compile``,
specialised to those values, and cached. The module's parameters and buffers, which dynamo passes
as arguments on every call, become the program's weights: each is handed to the runtime (and copied
in) only when its tensor changed since the last call (another tensor, other memory, or an in-place
update that moved torch's version counter, which one through ``.data`` does not). The other tensors,
and a buffer the graph mutates in place (so that the mutation is written back to it), are the
program's inputs.

Each program gets its genome once: the best genome cached on disk for it (``search.genome_cache``: keyed by the
e-graph, the input signature, the device and the library version), else the most-fused genome improved by a short
measured search (``BackendOptions``), which is then cached. The device follows the inputs: CPU tensors run on the
CPU runtime, CUDA tensors on the CUDA runtime (device-resident), and results come back on the inputs' device.
``programs(compiled)`` finds the ``Compiled`` programs behind a compiled module or function.
"""

from __future__ import annotations

import functools
import itertools
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
import torch.fx.traceback as fx_traceback
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor

from ..core.arguments import fail, flag, integer, one_of, seconds
from ..core.arrays import to_numpy
from ..core.errors import ArgumentError, LuminalError, Refused
from ..frontends.export import export_core_aten
from ..frontends.translate import translate
from ..runtime import DEVICES, check_device
from ..search.genome_cache import GenomeCache, program_key
from .compiled import Compiled


@dataclass(frozen=True)
class BackendOptions:
    """The backend's ``options``: the search each new program gets (``generations`` of ``generation_size`` children,
    within ``budget`` seconds, from ``seed``; ``generations=0``: the most-fused genome, unmeasured), the ``device``
    (``None``: the inputs' device), ``fusion`` (whether the e-graph offers fused regions), ``rolling`` (whether
    repeated layers are rolled to one, ``luminal_lab.hlir.rolling``) and ``cache_dir`` (where best genomes are kept;
    ``None``: the default directory, ``False``: no cache)."""

    generations: int = 2
    generation_size: int = 8
    budget: float = 5.0
    seed: int = 0
    device: str | None = None
    fusion: bool = True
    rolling: bool = True
    cache_dir: Any = None

    @classmethod
    def of(cls, options: Mapping[str, Any] | None) -> BackendOptions:
        """Checked options: an unknown name is a ``TypeError``, a bad value an ``ArgumentError``, each naming it."""
        options = dict(options or {})
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(names))
        if unknown:
            raise ArgumentError(f"torch.compile options: unknown option(s) {unknown} for backend 'luminal_lab'; the "
                                f"options are {names}")
        made = cls(**options)
        where = "torch.compile options"
        for name, low in (("generations", 0), ("generation_size", 1), ("seed", 0)):
            integer(where, name, getattr(made, name), minimum=low)
        seconds(where, "budget", made.budget)
        if made.device is not None:
            one_of(where, "device", made.device, DEVICES)
        flag(where, "fusion", made.fusion)
        flag(where, "rolling", made.rolling)
        if made.cache_dir is not None and made.cache_dir is not False \
                and not isinstance(made.cache_dir, (str, os.PathLike)):
            fail(where, "cache_dir", made.cache_dir, "a directory, None (the default) or False")
        return made


class _Bound(torch.nn.Module):
    """The dynamo graph with its non-tensor arguments fixed, taking only the tensors."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any]):
        super().__init__()
        self.gm = gm
        self.constants = [None if isinstance(a, torch.Tensor) else a for a in args]
        self.is_tensor = [isinstance(a, torch.Tensor) for a in args]

    def forward(self, *tensors: torch.Tensor):
        given = iter(tensors)
        args = [next(given) if t else c for t, c in zip(self.is_tensor, self.constants, strict=True)]
        # an Interpreter (under preserve_node_meta) hands each dynamo node's stack trace on to export
        return torch.fx.Interpreter(self.gm).run(*args)


@dataclass
class _Feed:
    """How one program is fed from dynamo's arguments: the positions of its inputs, the position of each of its
    weights by name, and each weight's tensor as last handed over (the tensor, its ``data_ptr()`` and
    ``_version``)."""

    inputs: list[int]
    weights: dict[str, int]
    seen: dict[str, tuple[torch.Tensor, int, int]] = field(default_factory=dict)

    def refresh(self, weights: dict[str, np.ndarray], args: Sequence[Any]) -> None:
        """Put into ``weights`` (the program's graph's) a new array for each weight whose tensor changed since the
        last call, which the runtime then copies in; an unchanged weight keeps its array, so it is not copied."""
        for name, position in self.weights.items():
            tensor = args[position]
            pointer, version = tensor.data_ptr(), tensor._version
            last = self.seen.get(name)
            if last is None or last[0] is not tensor or last[1] != pointer or last[2] != version:
                weights[name] = to_numpy(tensor)  # a CPU tensor's memory, shared; a CUDA one's, copied
                self.seen[name] = (tensor, pointer, version)


class DynamoProgram:
    """What the backend returns to dynamo: runs the graph through luminal_lab.

    ``programs`` maps an input key (shapes, dtypes, devices, non-tensor values) to its ``Compiled`` program, for
    looking at in a notebook (``ll.programs(compiled_model)`` collects them); ``feeds`` maps it to which arguments
    are the program's inputs and which its weights.
    """

    def __init__(self, gm: torch.fx.GraphModule, options: BackendOptions | None = None):
        self.gm = gm
        self.options = options or BackendOptions()
        self.programs: dict[tuple, Compiled] = {}
        self.feeds: dict[tuple, _Feed] = {}
        self.input_names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        self.code, self.owner = _compiling_frame()
        self.serial = next(_SERIAL)

    def __call__(self, *args: Any) -> Any:
        where, device = self.device_of(args)
        key = _key(args)
        program = self.programs.get(key) or self.compile_for(args)
        feed = self.feeds[key]
        feed.refresh(program.graph.weights, args)
        tensors = [args[position] for position in feed.inputs]
        if device == "cpu":
            tensors = [t.cpu() for t in tensors]
        result = program.run(*tensors, device=device)
        # the genome is chosen: the idle egglog worker goes (it restarts, replaying, if the e-graph is used again)
        program.egraph.close()
        return pytree.tree_map_only(torch.Tensor, lambda t: t.to(where) if t.device != where else t, result)

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

    def compile_for(self, args: Sequence[Any]) -> Compiled:
        """Compile (and cache) the program for concrete ``args``, with its genome; its inputs and weights keep
        dynamo's placeholder names, the parameters and buffers among ``args`` being its weights (``weight_names``)
        but for those it mutates in place, which stay inputs."""
        _, device = self.device_of(args)
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        names = [name for name, a in zip(self.input_names, args, strict=True) if isinstance(a, torch.Tensor)]
        bound = _Bound(self.gm, args)
        with fx_traceback.preserve_node_meta():
            exported = export_core_aten(bound, tensors)
            translated = translate(exported, bound, names, tensors, weights=self.weight_names(args),
                                   constant_outputs=True)
            program = Compiled.of_torch(translated, fusion=self.options.fusion, rolling=self.options.rolling)
        position = {name: i for i, name in enumerate(self.input_names)}
        feed = _Feed([position[name] for name in program.signature.inputs],
                     {name: position[name] for name, spec in program.graph.inputs.items()
                      if spec.is_weight and name in position})
        self.choose_genome(program, [args[i].detach().cpu() for i in feed.inputs], device, _key(args))
        self.programs[_key(args)] = program
        self.feeds[_key(args)] = feed
        return program

    def weight_names(self, args: Sequence[Any]) -> set[str]:
        """The placeholders whose ``args`` are parameters or buffers: tensors dynamo read from a module's
        parameters or buffers, and any ``torch.nn.Parameter``."""
        # Dynamo records where it read each placeholder's value (meta["grapharg"].source): a module's _parameters or
        # _buffers however the module was reached (self, a decorator's arguments, a global). Matching the compiled
        # frame's self by identity would miss a module whose forward a decorator wraps (transformers' models). A
        # Parameter is known by its class too, in a graph without that metadata. Any other tensor stays an input: a
        # caller may rewrite one through a numpy view, which moves no version counter.
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        return {node.name for node, a in zip(placeholders, args, strict=True)
                if isinstance(a, torch.nn.Parameter) or (isinstance(a, torch.Tensor) and _read_from_module(node))}

    def choose_genome(self, program: Compiled, inputs: list[torch.Tensor], device: str, signature: tuple) -> None:
        """The cached best genome of ``program``, else the most-fused one searched from (then cached)."""
        from .. import __version__

        options = self.options
        cache = None if options.cache_dir is False else GenomeCache(options.cache_dir)
        space = program.choice_space()
        key = program_key(program.egraph.program, program.egraph.rulesets, signature, device, __version__)
        cached = cache.load(key, space) if cache is not None else None
        if cached is not None:
            program.genome = cached
            return
        try:
            program.genome = space.fused_genome()
        except Refused:  # the smallest-term genome stays
            pass
        seconds = None
        if options.generations:
            result = program.search(options.generations, options.generation_size, budget=options.budget,
                                    seed=options.seed, device=device, inputs=inputs)
            seconds = result.best.seconds
        if cache is not None:
            cache.save(key, program.genome, seconds)

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
    break) and its ``self`` where it has one."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        module = tx.f_locals.get("fn") if tx.f_code is _inline_wrapper() else None
        if isinstance(module, torch.nn.Module):  # a torch.nn module (nn.Sequential, ...): dynamo compiles a frame
            return type(module).forward.__code__, module  # around the call
        return tx.f_code, tx.f_locals.get("self")
    except Exception:  # not inside dynamo (a test calling the backend directly)
        return None, None


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
    in place), one per graph and input signature, in the order they were made: ``comp.workbench()``,
    ``comp.pipeline()`` and ``comp.profiler()`` work on each. A module's programs are those compiled from its
    ``forward`` (on this module, or after a graph break, on any module of its class); a compiled bound method's
    (``model.forward = torch.compile(model.forward)``) are those compiled on its object or on none."""
    target = getattr(compiled, "_orig_mod", None) or getattr(compiled, "_torchdynamo_orig_callable", None) \
        or compiled
    module = target if isinstance(target, torch.nn.Module) else None
    code = type(target).forward.__code__ if module is not None else getattr(target, "__code__", None)
    if code is None:
        raise TypeError(f"ll.programs takes a torch.compile-d module or function, not {type(compiled).__name__}")
    owner = module if module is not None else getattr(target, "__self__", None)  # a bound method's object
    codes = _resumptions(code)
    made = sorted((p for p in _MADE if p.code in codes and (p.owner is None or p.owner is owner)),
                  key=lambda p: p.serial)
    found = [program for p in made for program in p.programs.values()]
    if not found:
        raise LuminalError(f"no luminal_lab programs behind {type(compiled).__name__} yet: torch.compile compiles on "
                           "the first call, so call it once (with backend='luminal_lab') first")
    return found


def _read_from_module(placeholder: torch.fx.Node) -> bool:
    """Whether dynamo read the placeholder's value from a module's parameters or buffers."""
    from torch._dynamo.source import is_from_unspecialized_param_buffer_source

    source = getattr(placeholder.meta.get("grapharg"), "source", None)
    return source is not None and is_from_unspecialized_param_buffer_source(source)


def _key(args: Sequence[Any]) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _is_concrete(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not isinstance(value, FakeTensor)
    return isinstance(value, (int, float, bool)) or value is None


def luminal_lab_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                        options: Mapping[str, Any] | None = None) -> DynamoProgram:
    """TorchDynamo backend: compile ``gm`` with luminal_lab (``options``: ``BackendOptions``); unsupported ops raise
    here, at compile time.

    When the example inputs are symbolic (dynamic shapes), compilation waits for the
    first call, which brings concrete values.
    """
    program = DynamoProgram(gm, BackendOptions.of(options))
    _MADE.add(program)
    if all(_is_concrete(a) for a in example_inputs):
        program.compile_for(example_inputs)
    return program
