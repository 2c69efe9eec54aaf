"""Translations kept on disk: a later process compiling the same dynamo graph on the same kind of arguments reads the
``TorchProgram`` back instead of exporting and translating again (the ``torch.compile`` backend's warm start).

An entry is one JSON file, ``translations/<key>.json`` in the directory of the tuning records (``core.storage``). The
key (``key``) is a SHA-256 of everything the translation reads: the graph's Python code, every node's stack trace,
the code of the functions it calls that are not torch's, the values of the tensors it holds (``get_attr``), each
argument's kind (a tensor's shape, strides, dtype, device and whether it needs grad and is a parameter; another
value's type and value), what the caller adds (``context``: which arguments are weights, which sizes are dynamic, ...),
the torch and library versions and the source of the translator itself and of the backend that calls it (``core``,
``hlir``, ``frontends`` and ``compiler``), so that a changed translator never reads an older one's entries. A graph
that calls a submodule has no key.

The entry holds the graph (``hlir.data``), the signature (torch's pytree specs as torch writes them as JSON), and the
values of the weights that torch lifted out of the program (its constants), but not those of the weights that are
arguments: those are taken from the arguments of the process reading it, as translating would. An entry is written
whole or not at all, and one that does not read back (cut short, another layout, holding more than
``MAX_HELD_BYTES`` of weights) is discarded or never written.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from ..core.arrays import to_numpy
from ..core.dtypes import DType, from_numpy
from ..core.ops import Op
from ..core.phases import phase
from ..core.storage import read_json, write_json
from ..core.symbolic import Expr
from ..core.version import __version__
from ..hlir import data
from ..hlir.graph import Signature
from .translate import TorchProgram

FORMAT = 1  # the entries' layout: an entry of another is discarded
MAX_HELD_BYTES = 16 << 20  # the most bytes of lifted weights an entry holds; a program holding more is not kept
_SOURCES = ("core", "hlir", "frontends", "compiler")  # the packages whose code decides a translation


@functools.cache
def _translator() -> str:
    """A SHA-256 of the translator's source files."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for package in _SOURCES for p in (root / package).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(gm: torch.fx.GraphModule, args: Sequence[Any], context: Any) -> str | None:
    """The key of translating ``gm`` on ``args`` where the caller's ``context`` (JSON data) says the rest; None where
    ``gm`` calls a submodule, whose code the key cannot name."""
    nodes = list(gm.graph.nodes)
    if any(n.op == "call_module" for n in nodes):
        return None
    held = [[n.target, _value(_attribute(gm, n.target), contents=True)] for n in nodes if n.op == "get_attr"]
    called = sorted({_function(n.target) for n in nodes if n.op == "call_function"} - {None})
    text = json.dumps([FORMAT, __version__, torch.__version__, _translator(), gm.code,
                       [n.meta.get("stack_trace") for n in nodes], held, called, [_value(a) for a in args],
                       torch.is_grad_enabled(), context], default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _value(value: Any, contents: bool = False) -> Any:
    """An argument (or, with ``contents``, a held value) as key data: a tensor by its kind (and its bytes), another by
    its type and ``repr``."""
    if isinstance(value, torch.Tensor):
        kind = [list(value.shape), list(value.stride()), str(value.dtype), value.device.type, value.requires_grad,
                isinstance(value, torch.nn.Parameter)]
        if contents:
            kind.append(hashlib.sha256(to_numpy(value.detach().contiguous()).tobytes()).hexdigest())
        return kind
    return [type(value).__name__, repr(value)]


def _function(target: Any) -> str | None:
    """A called function's code as key data, where it is not torch's (an op, a builtin): its name, bytecode and
    constants."""
    code = getattr(target, "__code__", None)
    if code is None or getattr(target, "__module__", "").startswith("torch"):
        return None
    return f"{target.__module__}.{target.__qualname__}:{code.co_code.hex()}:{code.co_consts!r}"


def path(directory: Path, of: str) -> Path:
    return directory / "translations" / f"{of}.json"


@phase("translation")
def store(directory: Path, of: str, program: TorchProgram, names: Sequence[str]) -> bool:
    """Keep ``program`` (translated with its user inputs named ``names``, those among its weights being taken from
    the arguments) under key ``of``; False where it cannot be kept (too many lifted bytes, an opaque op, a pytree spec
    torch cannot write, a directory that cannot be written)."""
    graph, signature = program.graph, program.signature
    lifted = {name: value for name, value in graph.weights.items() if name not in names}
    if sum(value.nbytes for value in lifted.values()) > MAX_HELD_BYTES or any(n.op == Op.OPAQUE for n in graph.nodes):
        return False  # too many lifted bytes, or a torch op run as it is (a call, not data)
    try:
        specs = [None if spec is None else pytree.treespec_dumps(spec)
                 for spec in (signature.in_spec, signature.out_spec)]
    except (NotImplementedError, TypeError, ValueError):  # a pytree node type without a JSON form
        return False
    entry = {"format": FORMAT, "key": of, "graph": data.to_data(graph),
             "lifted": {name: _array(value) for name, value in lifted.items()},
             "signature": {"inputs": signature.inputs, "outputs": signature.outputs, "specs": specs,
                           "mutated_inputs": signature.mutated_inputs, "mutated_weights": signature.mutated_weights,
                           "constants": [[position, _constant(value)] for position, value in
                                         signature.constants.items()],
                           "sizes": [[name, data.expr_data(e)] for name, e in signature.sizes.items()]}}
    return write_json(path(directory, of), entry)


@phase("translation")
def load(directory: Path, of: str, module: torch.nn.Module, names: Sequence[str], inputs: Sequence[Any],
         weights: Collection[str]) -> TorchProgram | None:
    """The program kept under key ``of``, its weights named in ``weights`` taken from ``inputs`` (named ``names``), or
    None (none kept, or a discarded entry)."""
    entry = path(directory, of)
    kept = read_json(entry)
    if kept is None:
        return None
    try:
        if kept["format"] != FORMAT or kept["key"] != of:
            raise ValueError("another layout or key")
        given = {name: to_numpy(value) for name, value in zip(names, inputs, strict=True) if name in weights}
        graph = data.from_data(kept["graph"], {**given, **{name: _read_array(value)
                                                           for name, value in kept["lifted"].items()}})
        held = {i for i, name in enumerate(names) if name in graph.weights}
        s = kept["signature"]
        in_spec, out_spec = (None if spec is None else pytree.treespec_loads(spec) for spec in s["specs"])
        signature = Signature(s["inputs"], s["outputs"], in_spec, out_spec, s["mutated_inputs"],
                              s["mutated_weights"], {int(p): _read_constant(v) for p, v in s["constants"]},
                              {name: data.read_expr(e) for name, e in s["sizes"]})
    except (KeyError, TypeError, ValueError):
        entry.unlink(missing_ok=True)
        return None
    return TorchProgram(graph, signature, module, [value for i, value in enumerate(inputs) if i not in held]
                        if held else inputs)


def _array(value: np.ndarray) -> list:
    return [from_numpy(value.dtype).value, list(value.shape), base64.b64encode(value.tobytes()).decode()]


def _read_array(kept: list) -> np.ndarray:
    dtype, shape, text = kept
    return np.frombuffer(base64.b64decode(text), dtype=DType(dtype).numpy).reshape(shape).copy()


def _constant(value: Any) -> Any:
    return {"expr": data.expr_data(value)} if isinstance(value, Expr) else value


def _read_constant(kept: Any) -> Any:
    return data.read_expr(kept["expr"]) if isinstance(kept, dict) else kept
