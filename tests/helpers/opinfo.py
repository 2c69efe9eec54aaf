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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import torch
import torch.utils._pytree as pytree
from torch.testing._internal import common_utils
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo import core
from torch.testing._internal.opinfo.core import OpInfo

from luminal_lab.compiler.compiled import Compiled
from luminal_lab.compiler.training import through_aot
from luminal_lab.core.errors import ExportError, LuminalError, UnsupportedOpError
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
    """``(atol, rtol)``: the largest float32 override among the OpInfo's decorators (``toleranceOverride``, or
    ``precisionOverride``'s atol), else assert_close's default."""
    atol, rtol = DEFAULT_ATOL, DEFAULT_RTOL
    for info in op.decorators:
        for decorator in getattr(info, "decorators", ()):
            override = getattr(decorator, "d", None)
            if isinstance(override, dict) and torch.float32 in override:
                tol = override[torch.float32]
                atol = max(atol, tol if isinstance(tol, float) else tol.atol)
                rtol = max(rtol, getattr(tol, "rtol", rtol))
    return atol, rtol


def _no_test_lookup() -> contextlib.ExitStack:
    """``sample_inputs`` without torch's search of the stack for the running unittest method (``extract_test_fn``,
    for its skips and error messages; here none is running): ``inspect.stack`` reads the source of every frame, which
    made sampling 60 ops 60 frames deep take 1.7 s instead of 0.8 s."""
    stack = contextlib.ExitStack()
    for module in (common_utils, core):
        stack.enter_context(mock.patch.object(module, "extract_test_fn", lambda: None))
    return stack


def samples(op: OpInfo, count: int) -> list:
    """The first ``count`` float32 CPU samples of ``op`` (deterministic: a fixed seed)."""
    torch.manual_seed(0)
    with warnings.catch_warnings(), _no_test_lookup():
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
    except ExportError as error:  # torch.export cannot trace it (named, with what to do instead)
        return Outcome("torch", str(error).splitlines()[0])
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


def sweep(count: int = 3, ops: list[OpInfo] | None = None, compiled: bool = False) -> Iterator[tuple[str, Outcome]]:
    """``(op name, class)`` for every float32 op of op_db, from its first ``count`` samples (through the compiled
    kernels when ``compiled``)."""
    with cached_decompositions():
        for op in ops or float32_ops():
            yield op_name(op), classify([run_sample(op, sample, compiled) for sample in samples(op, count)])




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


def first_entries(ops: list[OpInfo], make: Callable) -> tuple[list, dict[str, Outcome]]:
    """Each op's first small sample made ready to run by ``make`` (``Entry.of`` or ``GradEntry.of``), and the
    outcomes of the ops whose sample ``make`` gives an ``Outcome`` for (eager torch fails on it)."""
    entries, outcomes = [], {}
    for op in ops:
        for sample in small_samples(op, 1):
            made = make(op, sample)
            if isinstance(made, Outcome):
                outcomes[op_name(op)] = made
            else:
                entries.append(made)
    return entries, outcomes


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


# ---- gradients: samples through torch.compile(backend="luminal_lab") under torch.autograd.grad ------------------
# the backward sweep's backend options: the most-fused genome, unmeasured and uncached; the e-graph without fused
# regions (a third of the compile time; fusion has its own tests)
GRAD_OPTIONS = {"generations": 0, "cache_dir": False, "fusion": False, "strict": True}  # refusals raise


def differentiable_ops() -> list[OpInfo]:
    """The float32 ops of op_db that torch can differentiate."""
    return [op for op in float32_ops() if op.supports_autograd]


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point()


def cotangents(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Seeded normal cotangents for ``outputs``, the k-th from seed k (the same for a float64 rerun)."""
    return [torch.randn(o.shape, generator=torch.Generator().manual_seed(k), dtype=torch.float64).to(o.dtype)
            for k, o in enumerate(outputs)]


def gradients(fn: Callable) -> Callable:
    """``fn``'s vector-Jacobian product as a function of the same tensors: the gradients, for every floating input
    in order, of ``fn``'s differentiable outputs against ``cotangents`` (zeros where an input is unused)."""
    def grads(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        inputs = [t.detach().clone().requires_grad_(_differentiable(t)) for t in tensors]
        outputs = [o for o in pytree.tree_leaves(fn(*inputs)) if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [t for t in inputs if t.requires_grad]
        if not outputs or not wrt:
            raise ValueError("no differentiable output or input")
        return torch.autograd.grad(outputs, wrt, cotangents(outputs), allow_unused=True, materialize_grads=True)
    return grads


@dataclass
class GradEntry:
    """One sample of one op whose gradient eager torch computes: its function and tensors (as ``Entry``) and the
    gradients eager gives."""

    entry: Entry
    expected: tuple[torch.Tensor, ...]

    @classmethod
    def of(cls, op: OpInfo, sample) -> GradEntry | Outcome:
        """The entry, or the ``torch`` outcome when eager torch cannot differentiate the sample."""
        entry = Entry.of(op, sample)
        if isinstance(entry, Outcome):
            return entry
        try:
            expected = gradients(entry.fn)(*entry.tensors)
        except Exception as error:
            return Outcome("torch", f"eager backward: {type(error).__name__}: {_first_line(error)}")
        return cls(entry, expected)


def _compiled_gradients(entries: list[GradEntry]) -> list[tuple[torch.Tensor, ...]]:
    """Every entry's gradients through one ``torch.compile``-d module of all their samples (each entry's outputs
    take their own cotangents, so each input's gradient is its entry's own). Each batch is a new module and dynamo's
    cache is reset: a frame compiled before would run its first call in torch (``DynamoProgram.first_eager``)."""
    torch._dynamo.reset()  # every batch is the same code: a fresh cache, not a recompile
    batch = _Batch([e.entry for e in entries])
    compiled = torch.compile(batch, backend="luminal_lab", fullgraph=True, options=GRAD_OPTIONS)
    inputs = [t.detach().clone().requires_grad_(_differentiable(t)) for e in entries for t in e.entry.tensors]
    results, outputs, seeds, at = compiled(*inputs), [], [], 0
    for e in entries:
        count = len([x for x in pytree.tree_leaves(e.entry.expected) if isinstance(x, torch.Tensor)])
        differentiable = [o for o in results[at:at + count] if o.requires_grad]
        outputs.extend(differentiable)
        seeds.extend(cotangents(differentiable))
        at += count
    wrt = [t for t in inputs if t.requires_grad]
    got = torch.autograd.grad(outputs, wrt, seeds, allow_unused=True, materialize_grads=True)
    split, at = [], 0
    for e in entries:
        split.append(got[at:at + len(e.expected)])
        at += len(e.expected)
    return split


def grad_cause(error: BaseException) -> BaseException:
    """The error under dynamo's wrapping (``BackendCompilerFailed``): the backend's own."""
    return getattr(error, "inner_exception", None) or error


def run_grad_batch(entries: list[GradEntry]) -> dict[str, Outcome]:
    """Each entry's outcome, its gradients compared with eager's (``_judge``). Entries whose forward torch cannot
    export are ``torch``, and those whose exported forward the frontend refuses ``forward`` (both outside the
    backward's count: found by exporting the forwards, halves of a batch that fails). Entries that dynamo cannot
    capture or whose backward has an untranslated op (``_suspects``) run through ``torch.compile`` one by one, the
    rest together, a batch that fails split in halves down to single entries; a single entry's failure is
    classified: ``refused`` with the op named, ``named``, ``torch`` (dynamo cannot capture it) or ``crash``."""
    outcomes = _forward_outcomes([e.entry for e in entries])
    rest = [e for e in entries if e.entry.name not in outcomes]
    suspects = _suspects(rest)
    for entry in suspects:
        outcomes |= _grad_batch([entry])
    return outcomes | _grad_batch([e for e in rest if e not in suspects])


class _Untranslated(Exception):
    pass


def _translatable(graph: torch.fx.GraphModule, _inputs: Sequence[Any]) -> Callable:
    """A compiler for AOTAutograd that only checks that the frontend translates every op of ``graph``."""
    from torch._functorch.aot_autograd import make_boxed_func

    missing = {str(n.target) for n in graph.graph.nodes
               if n.op == "call_function" and lookup(n.target) is None and not is_size(n)}
    if missing:
        raise _Untranslated(", ".join(sorted(missing)))
    return make_boxed_func(graph.forward)


def _traces(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """A dynamo backend that traces the forward and backward graphs as luminal_lab's training path does
    (``training.through_aot``) and runs them in torch, refusing any the frontend would not translate."""
    return through_aot(gm, example_inputs, _translatable, _translatable)


def _suspects(entries: list[GradEntry]) -> list[GradEntry]:
    """The entries that dynamo cannot capture or whose forward or backward graph has an op the frontend does not
    translate: batches traced without compiling (``_traces``, a third of a compile's time), halves of one that
    fails, so that each costs a few traces, not as many compiles."""
    if not entries:
        return []
    torch._dynamo.reset()
    traced = torch.compile(_Batch([e.entry for e in entries]), backend=_traces, fullgraph=True)
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced(*(t.detach().clone().requires_grad_(_differentiable(t)) for e in entries for t in e.entry.tensors))
    except Exception:
        if len(entries) == 1:
            return entries
        half = len(entries) // 2
        return _suspects(entries[:half]) + _suspects(entries[half:])
    return []


def _forward_outcomes(entries: list[Entry]) -> dict[str, Outcome]:
    """``torch`` for the entries whose forward torch.export fails on, ``forward`` for those whose exported forward
    has an untranslated op."""
    if not entries:
        return {}
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exported = export_core_aten(_Batch(entries), tuple(t.clone() for e in entries for t in e.tensors))
    except Exception as error:
        if len(entries) == 1:
            return {entries[0].name: Outcome("torch", f"torch.export: {type(error).__name__}: {_first_line(error)}")}
        half = len(entries) // 2
        return _forward_outcomes(entries[:half]) | _forward_outcomes(entries[half:])
    return {entries[i].name: Outcome("forward", f"unsupported op {', '.join(sorted(ops))}")
            for i, ops in _untranslated(exported).items() if i >= 0}


def _grad_batch(entries: list[GradEntry]) -> dict[str, Outcome]:
    if not entries:
        return {}
    try:
        with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _compiled_gradients(entries)
    except Exception as error:
        if len(entries) > 1:
            half = len(entries) // 2
            return _grad_batch(entries[:half]) | _grad_batch(entries[half:])
        return {entries[0].entry.name: _grad_failure(entries[0], grad_cause(error))}
    return {e.entry.name: _judge(e.entry.op, gradients(e.entry.fn), e.entry.tensors, list(g), list(e.expected))
            for e, g in zip(entries, got, strict=True)}


def _grad_failure(entry: GradEntry, error: BaseException) -> Outcome:
    if isinstance(error, UnsupportedOpError):
        forward = run_sample(entry.entry.op, entry.entry.sample)
        kind = "forward" if forward.kind != "pass" else "refused"
        return Outcome(kind, str(error).splitlines()[0])
    if isinstance(error, LuminalError):
        return Outcome("named", f"{type(error).__name__}: {_first_line(error)}")
    if isinstance(error, torch._dynamo.exc.Unsupported | torch._dynamo.exc.UserError):
        return Outcome("torch", f"dynamo: {type(error).__name__}: {_first_line(error)}")
    return Outcome("crash", f"{type(error).__name__}: {_first_line(error)}")
