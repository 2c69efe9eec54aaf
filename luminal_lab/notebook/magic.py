"""The ``%luminal`` and ``%%luminal`` magics, registered by ``%load_ext luminal_lab``.

``%%luminal [--search N] [--device cpu|cuda] [--name NAME] [PROGRAM [INPUT ...]]`` runs the cell
in the notebook's namespace, then compiles one program with ``ll.compile``, saturates its
e-graph, searches ``N`` generations of ``SEARCH_GENERATION_SIZE`` genomes when asked, binds the
``Compiled`` to ``NAME`` (default ``comp``) and displays the stages: HLIR, e-graph, LLIR (of the
genome ``run`` uses), fused regions and CUDA C. What it compiles, by the first rule that applies:

1. ``PROGRAM [INPUT ...]`` on the magic line: notebook names, looked up after the cell ran; an
   ``ll.Graph`` (or a ``GraphTensor``, meaning its graph) alone, or a ``torch.nn.Module`` or
   function followed by its example input tensors.
2. The one ``ll.Graph`` with outputs that the cell bound to a name or grew (added nodes or
   outputs to), held directly or through a ``GraphTensor``.
3. The one ``torch.nn.Module`` the cell bound (else the one function it bound), on the torch
   tensors the cell bound, in the order the cell first assigns them.

A name the cell "bound" is one that is new after the cell or now refers to another object;
names starting with ``_`` are ignored. The cell's last expression is not displayed (the
pipeline is). ``--device`` is checked before the cell runs, so an unavailable device fails fast
with ``NoDeviceError``'s reason; it is the device ``--search`` measures on.

``%luminal [--search N] [--device cpu|cuda] [--name NAME] PROGRAM [INPUT ...]`` does the same for
names already in the notebook, and also returns the ``Compiled``.

Mistakes (nothing or two things to compile, unknown names, an unavailable device, a
``LuminalError`` from compiling) are ``UsageError``s: one message, no traceback, the kernel and
the namespace stay as they are. An exception in the cell's own code shows its traceback as in
any cell, and nothing is compiled.
"""

from __future__ import annotations

import argparse
import ast
import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from ..compiler.compiled import Compiled
from ..compiler.compiled import compile as ll_compile
from ..core.errors import LuminalError
from ..hlir.graph import Graph
from ..hlir.tensor import GraphTensor
from ..runtime import DEVICES, check_device

SEARCH_GENERATION_SIZE = 10
DEFAULT_NAME = "comp"
HINT = ("define an ll.Graph with .output(...), or a torch.nn.Module or function together with its example input "
        "tensors, or name what to compile: %%luminal model x")


@dataclass
class Target:
    """What to compile: ``ll.compile(program, inputs)``, and how that call reads in the notebook."""

    program: Graph | torch.nn.Module | Callable
    inputs: tuple[torch.Tensor, ...]
    text: str


def _generations(text: str) -> int:
    """``--search N``: at least one generation."""
    try:
        generations = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of generations") from None
    if generations < 1:
        raise argparse.ArgumentTypeError(f"needs at least 1 generation, got {generations}")
    return generations


@magics_class
class LuminalMagics(Magics):
    """``%luminal`` / ``%%luminal``: compile a graph or a PyTorch program and show its pipeline."""

    @magic_arguments()
    @argument("--search", type=_generations, default=0, metavar="N",
              help=f"search N generations of {SEARCH_GENERATION_SIZE} genomes after saturating (default: no search)")
    @argument("--device", choices=DEVICES, default="cpu",
              help="the device --search measures on; checked before anything runs (default: cpu)")
    @argument("--name", default=DEFAULT_NAME,
              help=f"the notebook name the Compiled is bound to (default: {DEFAULT_NAME})")
    @argument("program", nargs="?", metavar="PROGRAM", help="the notebook name of a graph, module or function")
    @argument("inputs", nargs="*", metavar="INPUT", help="notebook names of the example inputs")
    @line_cell_magic
    def luminal(self, line: str, cell: str | None = None) -> Compiled | None:
        """Compile a graph or a PyTorch program, saturate, optionally search, and show every stage.

        ``%luminal model x`` compiles ``model`` on the example input ``x`` (several inputs:
        ``%luminal model x y``; a graph: ``%luminal g``) and returns the Compiled.
        ``%%luminal`` runs the cell first and, without names, compiles what it defined: the one
        ll.Graph with outputs it bound or grew, else the one torch.nn.Module (else function) it
        bound on the tensors it bound, in the order it assigns them. The Compiled is bound to
        ``comp`` (or --name). See ``luminal_lab.notebook.magic`` for the details.
        """
        args = parse_argstring(self.luminal, line)
        names = [args.program, *args.inputs] if args.program else []
        if not args.name.isidentifier():
            raise UsageError(f"--name {args.name!r} is not a Python name")
        try:
            check_device(args.device)
        except LuminalError as error:
            raise UsageError(f"{type(error).__name__}: {error}") from None
        if cell is None:
            if not names:
                raise UsageError("name what to compile: %luminal model x (a module or function and its example "
                                 "inputs) or %luminal g (an ll.Graph); %%luminal compiles what a cell defines")
            target = self._named(names)
        else:
            bound, sizes = self._run(cell)
            target = self._named(names) if names else self._defined(bound, sizes)
        comp = self._compile(target, args.name, args.search, args.device)
        return comp if cell is None else None

    # ---- running the cell ---------------------------------------------------------------
    def _run(self, cell: str) -> tuple[list[str], dict[int, tuple[int, int]]]:
        """Run ``cell`` in the user namespace. Returns the names it bound, in the order it first
        assigns them, and the size of every graph the namespace held before, by ``id``."""
        shell = self.shell
        namespace = shell.user_ns
        before = dict(namespace)
        sizes = {id(graph): _size(graph) for graph in _graphs(before.values())}  # unique while ``before`` holds them
        source = shell.transform_cell(cell)
        tree = shell.transform_ast(shell.compile.ast_parse(source))
        exec(shell.compile(tree, shell.compile.cache(source), "exec"), shell.user_global_ns, namespace)
        positions = _assignment_positions(tree)
        bound = [name for name, value in namespace.items()
                 if not name.startswith("_") and (name not in before or before[name] is not value)]
        return sorted(bound, key=lambda name: positions.get(name, (float("inf"), 0))), sizes

    def _defined(self, bound: list[str], sizes: dict[int, tuple[int, int]]) -> Target:
        """Rules 2 and 3 of the module docstring: what the cell bound (or grew) that compiles."""
        namespace = self.shell.user_ns
        grown: dict[int, tuple[Graph, str]] = {}
        for name in bound + [name for name in namespace if name not in bound and not name.startswith("_")]:
            value = namespace[name]
            graph = value if isinstance(value, Graph) else value.graph if isinstance(value, GraphTensor) else None
            if graph is None or not graph.outputs or id(graph) in grown:
                continue
            if name in bound or sizes.get(id(graph)) != _size(graph):
                grown[id(graph)] = (graph, name if isinstance(value, Graph) else f"{name}.graph")
        if len(grown) > 1:
            names = ", ".join(text for _, text in grown.values())
            raise UsageError(f"the cell defined {len(grown)} graphs with outputs ({names}); "
                             f"name the one to compile: %%luminal {next(iter(grown.values()))[1]}")
        if grown:
            graph, text = next(iter(grown.values()))
            return Target(graph, (), text)
        modules = [name for name in bound if isinstance(namespace[name], torch.nn.Module)]
        programs = modules or [name for name in bound if inspect.isfunction(namespace[name])]
        tensors = [name for name in bound if isinstance(namespace[name], torch.Tensor)]
        if len(programs) > 1 and tensors:
            raise UsageError(f"the cell defined {len(programs)} {'modules' if modules else 'functions'} "
                             f"({', '.join(programs)}); name the one to compile and its inputs: "
                             f"%%luminal {programs[0]} {' '.join(tensors)}")
        if programs and tensors:
            return self._named(programs[:1] + tensors)
        found = ", ".join(f"{name} ({_describe(namespace[name])})" for name in bound) or "nothing"
        raise UsageError(f"the cell defined {found}; nothing to compile: {HINT}")

    # ---- names on the magic line --------------------------------------------------------
    def _named(self, names: Sequence[str]) -> Target:
        """Rule 1: ``PROGRAM [INPUT ...]`` looked up in the user namespace."""
        values = [self._lookup(name) for name in names]
        program, inputs = values[0], tuple(values[1:])
        if isinstance(program, GraphTensor):
            return Target(program.graph, inputs, f"{names[0]}.graph")
        if isinstance(program, Graph):
            return Target(program, inputs, names[0])
        if isinstance(program, type) or not callable(program):
            raise UsageError(f"{names[0]} is not compilable ({_describe(program)}): %luminal compiles an "
                             "ll.Graph, or a torch.nn.Module or function followed by its example inputs")
        if not inputs:
            raise UsageError(f"{names[0]} needs example inputs: %luminal {names[0]} x")
        try:
            inspect.signature(program.forward if isinstance(program, torch.nn.Module) else program).bind(*inputs)
        except ValueError:  # no signature to check (some builtins)
            pass
        except TypeError as error:
            raise UsageError(f"{names[0]} does not take the {len(inputs)} example input(s) "
                             f"{', '.join(names[1:])}: {error}") from None
        return Target(program, inputs, f"{names[0]}, ({names[1]},)" if len(inputs) == 1
                      else f"{names[0]}, ({', '.join(names[1:])})")

    def _lookup(self, name: str) -> Any:
        if not name.isidentifier():
            raise UsageError(f"{name!r} is not a name; %luminal takes notebook names: %luminal model x")
        if name not in self.shell.user_ns:
            raise UsageError(f"name {name!r} is not defined in the notebook")
        return self.shell.user_ns[name]

    # ---- compiling and showing ----------------------------------------------------------
    def _compile(self, target: Target, name: str, generations: int, device: str) -> Compiled:
        """Compile, bind to ``name``, saturate, search, and display the stages."""
        try:
            comp = ll_compile(target.program, target.inputs or None)
        except LuminalError as error:
            raise UsageError(f"{type(error).__name__}: {error}") from None
        self.shell.user_ns[name] = comp
        print(f"{name} = ll.compile({target.text})  # {comp.egraph.saturate()}")
        if generations:
            try:
                print(comp.search(generations=generations, generation_size=SEARCH_GENERATION_SIZE, device=device,
                                  progress=False))
            except LuminalError as error:
                raise UsageError(f"{type(error).__name__} in the search: {error} ({name} is compiled and saturated: "
                                 f"call {name}.search(inputs=...) yourself)") from None
        display(comp.hlir, comp.egraph, comp.llir(), comp.regions, comp.cuda)
        return comp


def _graphs(values: Iterable[Any]) -> list[Graph]:
    """The graphs held by ``values``, directly or through a ``GraphTensor``."""
    return [value if isinstance(value, Graph) else value.graph for value in values
            if isinstance(value, Graph | GraphTensor)]


def _size(graph: Graph) -> tuple[int, int]:
    return len(graph.nodes), len(graph.outputs)


def _assignment_positions(tree: ast.AST) -> dict[str, tuple[int, int]]:
    """Where each name is first bound in the cell's own scope: assignments, ``def``, ``class``, imports."""
    positions: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST) -> None:
        names: list[str] = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names = [node.id]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        for name in names:
            position = (node.lineno, node.col_offset)
            positions[name] = min(positions.get(name, position), position)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(tree)
    return positions


def _describe(value: Any) -> str:
    """How a value the cell bound reads in the nothing-to-compile message."""
    if isinstance(value, Graph):
        return "ll.Graph without outputs" if not value.outputs else "ll.Graph"
    if isinstance(value, GraphTensor):
        return "GraphTensor of a graph without outputs" if not value.graph.outputs else "GraphTensor"
    if isinstance(value, type):
        return f"the class {value.__name__}, not an instance"
    if isinstance(value, torch.nn.Module):
        return f"torch.nn.Module {type(value).__name__} without example inputs"
    if inspect.isfunction(value):
        return "function without example inputs"
    if isinstance(value, torch.Tensor):
        return "torch.Tensor, with no module or function to take it"
    return type(value).__name__
