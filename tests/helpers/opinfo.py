"""PyTorch's OpInfo samples through the PyTorch frontend: each sample becomes a function of its tensors (other
arguments bound), is translated with ``from_torch`` and run on the reference runtime (or compiled), and its
outputs are compared with eager torch within the OpInfo's float32 tolerances.

``run_sample`` classifies one sample: ``pass``, ``wrong`` (a mismatch), ``refused`` (``UnsupportedOpError``),
``named`` (another ``LuminalError``), ``crash`` (anything else), or ``torch`` (torch itself fails on the sample,
eagerly or in ``torch.export``; such samples say nothing about the frontend). ``sweep`` runs every op, a sample
at a time (``scripts/opinfo_sweep.py``); ``run_batch`` runs many samples through one export (the test module).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo

from luminal_lab.compiler.compiled import Compiled
from luminal_lab.core.errors import LuminalError, UnsupportedOpError
from luminal_lab.frontends import from_torch, translate
from luminal_lab.frontends.export import FunctionModule, export_core_aten
from luminal_lab.frontends.translate import is_size, lookup

# ops whose values torch leaves undefined (uninitialised memory): only their shapes and dtypes are compared
UNDEFINED_VALUES = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                              "new_empty_strided"})
OUTCOMES = ("pass", "wrong", "refused", "named", "crash", "torch")
# the default float32 tolerances of torch.testing.assert_close, which OpInfo tests use unless overridden
DEFAULT_ATOL, DEFAULT_RTOL = 1e-5, 1.3e-6


@dataclass
class Outcome:
    """What one sample gave: its class and a one-line reason."""

    kind: str
    detail: str = ""


def op_name(op: OpInfo) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def float32_ops() -> list[OpInfo]:
    """Every op_db entry that supports float32 on the CPU."""
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


def tolerances(op: OpInfo) -> tuple[float, float]:
    """``(atol, rtol)``: the largest float32 override among the OpInfo's decorators, else assert_close's default."""
    atol, rtol = DEFAULT_ATOL, DEFAULT_RTOL
    for info in op.decorators:
        for decorator in getattr(info, "decorators", ()):
            override = getattr(decorator, "d", None)
            if isinstance(override, dict) and torch.float32 in override:
                tol = override[torch.float32]
                atol, rtol = max(atol, tol.atol), max(rtol, tol.rtol)
    return atol, rtol


def samples(op: OpInfo, count: int) -> list:
    """The first ``count`` float32 CPU samples of ``op`` (deterministic: a fixed seed)."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = []
        for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
            found.append(sample)
            if len(found) == count:
                break
    return found


def _as_function(op: OpInfo, sample) -> tuple[Callable, tuple[torch.Tensor, ...]]:
    """The sample as a function of its tensors (in pytree order), and those tensors."""
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = tuple(leaves[i].clone() for i in positions)

    def fn(*inputs):
        filled = list(leaves)
        for i, value in zip(positions, inputs, strict=True):
            filled[i] = value
        x, args, kwargs = pytree.tree_unflatten(filled, spec)
        return op.op(x, *args, **kwargs)
    return fn, tensors


def _torch_fails(fn: Callable, tensors: tuple) -> str | None:
    """Why torch.export fails on the sample, or None when it succeeds."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_core_aten(FunctionModule(fn), tuple(t.clone() for t in tensors))
    except Exception as error:
        return f"torch.export: {type(error).__name__}: {_first_line(error)}"
    return None


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else ""


@contextlib.contextmanager
def cached_decompositions() -> Iterator[None]:
    """Compute torch.export's set of CompositeImplicitAutograd ops once, not on every ``run_decompositions``
    (about a third of a small program's export time); no op is registered while a sweep runs."""
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    original = exported_program._collect_all_valid_cia_ops
    cached = functools.cache(original)
    exported_program._collect_all_valid_cia_ops = decomp_utils._collect_all_valid_cia_ops = cached
    try:
        yield
    finally:
        exported_program._collect_all_valid_cia_ops = decomp_utils._collect_all_valid_cia_ops = original


def _compare(got, expected, atol: float, rtol: float, values: bool = True) -> str | None:
    got_leaves, expected_leaves = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    expected_tensors = [e for e in expected_leaves if isinstance(e, torch.Tensor)]
    if len(got_leaves) != len(expected_tensors):
        return f"{len(got_leaves)} outputs, torch has {len(expected_tensors)}"
    for i, (g, e) in enumerate(zip(got_leaves, expected_tensors, strict=True)):
        if g.dtype != e.dtype:
            return f"output {i}: dtype {g.dtype}, torch has {e.dtype}"
        if not values:
            g, e = torch.zeros_like(g), torch.zeros_like(e)
        try:
            torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True, check_stride=False)
        except AssertionError as error:
            return f"output {i}: " + " ".join(str(error).split())[:300]
    return None


def _judge(op: OpInfo, fn: Callable, tensors: tuple, got, expected) -> Outcome:
    """``pass`` when ``got`` matches torch within the OpInfo's tolerances, or is at least as close as torch's own
    float32 result to torch's float64 result on the same inputs (where torch's float32 is the less accurate)."""
    atol, rtol = tolerances(op)
    values = op.name not in UNDEFINED_VALUES
    problem = _compare(got, expected, atol, rtol, values)
    if problem is None or not values or _compare(got, expected, math.inf, math.inf) is not None:
        return Outcome("wrong", problem) if problem else Outcome("pass")
    try:
        wide = fn(*(t.double() if t.is_floating_point() else t.clone() for t in tensors))
    except Exception:
        return Outcome("wrong", problem)
    wide = [w for w in pytree.tree_leaves(wide) if isinstance(w, torch.Tensor)]
    for g, e, w in zip(pytree.tree_leaves(got), [e for e in pytree.tree_leaves(expected)
                                                  if isinstance(e, torch.Tensor)], wide, strict=True):
        if not (g.is_floating_point() and w.is_floating_point()):
            continue
        ours, theirs = (g.double() - w).abs(), (e.double() - w).abs()
        worse = ~(ours <= theirs + atol + rtol * w.abs()) & ~(g.isnan() & w.isnan()) & ~(g.double() == w)
        if bool(worse.any()):
            return Outcome("wrong", problem)
    return Outcome("pass", "closer to torch's float64 result than torch's float32")


def run_sample(op: OpInfo, sample, compiled: bool = False) -> Outcome:
    """Translate and run one sample (reference runtime, or the compiled kernels when ``compiled``)."""
    fn, tensors = _as_function(op, sample)
    try:
        expected = fn(*(t.clone() for t in tensors))
    except Exception as error:
        return Outcome("torch", f"eager: {type(error).__name__}")
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = from_torch(fn, tensors)
            comp = Compiled.of_torch(program)
            got = comp.run(*tensors) if compiled else comp.run_reference(*tensors)
    except UnsupportedOpError as error:
        return Outcome("refused", str(error).splitlines()[0])
    except LuminalError as error:
        return Outcome("named", f"{type(error).__name__}: {str(error).splitlines()[0]}")
    except Exception as error:
        failed = _torch_fails(fn, tensors)
        if failed:
            return Outcome("torch", failed)
        return Outcome("crash", f"{type(error).__name__}: {_first_line(error)}")
    return _judge(op, fn, tensors, got, expected)


def classify(outcomes: list[Outcome]) -> Outcome:
    """An op's class from its samples': the worst of crash, wrong, named, refused; pass when every sample that
    torch runs passes; ``torch`` when torch runs none."""
    for kind in ("crash", "wrong", "named", "refused", "pass"):
        for outcome in outcomes:
            if outcome.kind == kind:
                return outcome
    return outcomes[0] if outcomes else Outcome("torch", "no samples")


def sweep(count: int = 3, ops: list[OpInfo] | None = None) -> Iterator[tuple[str, Outcome]]:
    """``(op name, class)`` for every float32 op of op_db, from its first ``count`` samples."""
    with cached_decompositions():
        for op in ops or float32_ops():
            yield op_name(op), classify([run_sample(op, sample) for sample in samples(op, count)])




# ---- batches: many samples through one export -----------------------------------------------------------------
SMALL = 1024  # elements: a sample's tensors at most this large are cheap on every path (sort is n² in its axis)


def small_samples(op: OpInfo, count: int, scan: int = 8) -> list:
    """Up to ``count`` of the first ``scan`` samples whose tensors are all small (else the smallest sample)."""
    found = samples(op, scan)
    small = [s for s in found if _largest_tensor(s) <= SMALL]
    return small[:count] if small else sorted(found, key=_largest_tensor)[:1]


def _largest_tensor(sample) -> int:
    leaves = pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
    return max((leaf.numel() for leaf in leaves if isinstance(leaf, torch.Tensor)), default=0)


@dataclass
class Entry:
    """One sample of one op, ready to run: its function, input tensors and eager torch's result."""

    name: str
    op: OpInfo
    sample: object
    fn: Callable
    tensors: tuple[torch.Tensor, ...]
    expected: object

    @classmethod
    def of(cls, op: OpInfo, sample) -> Entry | Outcome:
        """The entry, or the ``torch`` outcome when eager torch fails on the sample."""
        fn, tensors = _as_function(op, sample)
        try:
            expected = fn(*(t.clone() for t in tensors))
        except Exception as error:
            return Outcome("torch", f"eager: {type(error).__name__}")
        return cls(op_name(op), op, sample, fn, tensors, expected)


class _Batch(torch.nn.Module):
    """Several samples as one module: submodule ``s{i}`` runs entry ``i``; the outputs are every tensor of every
    sample's result, in order (node metadata names the submodule that made each node)."""

    def __init__(self, entries: list[Entry]):
        super().__init__()
        self.entries = entries
        for i, entry in enumerate(entries):
            self.add_module(f"s{i}", FunctionModule(entry.fn))

    def forward(self, *tensors):
        outputs, at = [], 0
        for i, entry in enumerate(self.entries):
            result = getattr(self, f"s{i}")(*tensors[at:at + len(entry.tensors)])
            at += len(entry.tensors)
            outputs.extend(leaf for leaf in pytree.tree_leaves(result) if isinstance(leaf, torch.Tensor))
        return tuple(outputs)


def run_batch(entries: list[Entry], compiled: bool = False) -> dict[str, Outcome]:
    """Each entry's outcome, translating as many of them as possible through one export: entries whose graph needs
    an untranslated op are found in the exported graph (and the refusal checked to name them), the rest run as one
    program; a batch that fails otherwise is split in halves."""
    if not entries:
        return {}
    if len(entries) == 1:
        entry = entries[0]
        return {entry.name: run_sample(entry.op, entry.sample, compiled)}
    tensors = tuple(t.clone() for entry in entries for t in entry.tensors)
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = export_core_aten(_Batch(entries), tensors)
    except Exception:
        return _split(entries, compiled)
    missing = _untranslated(exported)
    if -1 in missing:  # an untranslated node outside every sample's submodule
        return _split(entries, compiled)
    if missing:
        outcomes = _refusals(exported, entries, missing)
        rest = [e for i, e in enumerate(entries) if i not in missing]
        return outcomes | run_batch(rest, compiled)
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comp = Compiled.of_torch(translate(exported, example_inputs=tensors))
            got = comp.run(*tensors) if compiled else comp.run_reference(*tensors)
    except Exception:
        return _split(entries, compiled)
    got = got if isinstance(got, (tuple, list)) else (got,)
    outcomes, at = {}, 0
    for entry in entries:
        count = len([x for x in pytree.tree_leaves(entry.expected) if isinstance(x, torch.Tensor)])
        outcomes[entry.name] = _judge(entry.op, entry.fn, entry.tensors, list(got[at:at + count]), entry.expected)
        at += count
    return outcomes


def _split(entries: list[Entry], compiled: bool) -> dict[str, Outcome]:
    half = len(entries) // 2
    return run_batch(entries[:half], compiled) | run_batch(entries[half:], compiled)


def _untranslated(exported: torch.export.ExportedProgram) -> dict[int, set[str]]:
    """Entry index -> the untranslated aten ops in its part of the graph."""
    found: dict[int, set[str]] = {}
    for node in exported.graph.nodes:
        if node.op == "call_function" and lookup(node.target) is None and not is_size(node):
            stack = node.meta.get("nn_module_stack") or {}
            owners = [path for path, _ in stack.values() if path.startswith("s") and path[1:].isdigit()]
            found.setdefault(int(owners[0][1:]) if owners else -1, set()).add(str(node.target))
    return found


def _refusals(exported, entries: list[Entry], missing: dict[int, set[str]]) -> dict[str, Outcome]:
    """The translation of the batch must refuse with an ``UnsupportedOpError`` naming every untranslated op."""
    try:
        translate(exported)
    except UnsupportedOpError as error:
        message = str(error)
        unnamed = sorted(op for ops in missing.values() for op in ops if op not in message)
        if unnamed:
            return {entries[i].name: Outcome("crash", f"the refusal does not name {unnamed}") for i in missing}
        return {entries[i].name: Outcome("refused", f"unsupported op {', '.join(sorted(ops))}")
                for i, ops in missing.items() if i >= 0}
    return {entries[i].name: Outcome("crash", "untranslated ops were not refused") for i in missing}
