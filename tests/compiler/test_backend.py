"""The torch.compile backend as a user meets it: its options, the genome each program starts with (cached best,
else the most-fused one searched from), the genome cache across processes, the device following the inputs, the
module's parameters and buffers held as weights (copied in only when changed), and ``ll.programs`` reaching the
compiled programs."""

from __future__ import annotations

import functools
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from unittest import mock

import pytest
import torch

import luminal_lab as ll
from luminal_lab.compiler import calls, dynamo
from luminal_lab.compiler.compiled import Compiled
from luminal_lab.compiler.dynamo import BackendOptions, DynamoProgram
from luminal_lab.compiler.ready import Ready
from luminal_lab.egraph import EGraph
from luminal_lab.llir.regions import find_regions
from luminal_lab.runtime import cache, cuda_unavailable_reason
from luminal_lab.runtime.cpu import CPURuntime
from luminal_lab.search.records import TuningRecords
from tests.helpers.models import MLP, Shifted, mlp_inputs

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"generations": 1, "generation_size": 2, "budget": 30.0, "background": False}  # searched before the first call
GPU = cuda_unavailable_reason() is None


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def chain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b + 1).sin().exp()


def operands() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(64, 32, generator=generator), torch.randn(64, 32, generator=generator)


# ---- options ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("options", "error", "named"), [
    ({"generation": 2}, TypeError, "['generation']"),
    ({"generations": -1}, ValueError, "generations=-1"),
    ({"generation_size": 0}, ValueError, "generation_size=0"),
    ({"budget": "fast"}, ValueError, "budget='fast'"),
    ({"seed": 1.5}, ValueError, "seed=1.5"),
    ({"device": "tpu"}, ValueError, "device='tpu'"),
    ({"fusion": "yes"}, ValueError, "fusion='yes'"),
    ({"background": 1}, ValueError, "background=1"),
    ({"cache_dir": 3}, ValueError, "cache_dir=3"),
])
def test_bad_options_are_named(options: dict, error: type, named: str) -> None:
    with pytest.raises(error) as info:
        BackendOptions.of(options)
    assert named in str(info.value).splitlines()[0]
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as through:
        torch.compile(chain, backend="luminal_lab", options=options)(*operands())
    assert isinstance(through.value.inner_exception, error) and named in str(through.value.inner_exception)


# ---- the genome a program starts with ----------------------------------------------------------------
def test_default_searches_from_the_most_fused_genome_and_caches_the_best(tmp_path: Path) -> None:
    compiled = torch.compile(chain, backend="luminal_lab", options={**QUICK, "cache_dir": tmp_path})
    a, b = operands()
    torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(compiled)
    search = comp.last_search
    assert search is not None and search.history[0].hash == comp.choice_space().fused_genome().hash
    assert comp.genome.hash == search.best.hash
    rows = TuningRecords(tmp_path).rows(comp.records_key)  # every candidate, as measured
    assert [(r["hash"], r["seconds"]) for r in rows] == [(f"{c.hash:016x}", c.seconds) for c in search.history]


def test_the_first_call_runs_the_most_fused_genome_while_the_search_goes_on_behind_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default the first call does not wait for the search: it runs the most-fused genome while the search goes on
    in the background (held here until the call returned), and the calls after it ends run its best genome, through
    ready calls of their own."""
    gate, search = threading.Event(), Compiled.search
    monkeypatch.setattr(Compiled, "search", lambda self, *a, **k: (gate.wait(60), search(self, *a, **k))[1])
    ran = []
    runtime = Compiled._runtime
    monkeypatch.setattr(Compiled, "_runtime", lambda self, genome, device: (ran.append(genome.hash),
                                                                            runtime(self, genome, device))[1])
    options = {"generations": 1, "generation_size": 2, "budget": 30.0, "cache_dir": tmp_path}
    compiled = torch.compile(chain, backend="luminal_lab", options=options)
    a, b = operands()
    torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(compiled)
    state, fused = comp.search_state, comp.choice_space().fused_genome().hash
    assert state.running and comp.last_search is None and comp.genome.hash == fused and set(ran) == {fused}
    assert repr(state).startswith("<SearchState running: 0 candidates measured")
    gate.set()
    assert state.wait(120) and state.status == "done" and state.error is None
    best = state.result.best
    assert comp.last_search is state.result and comp.genome.hash == best.hash and state.best.hash == best.hash
    assert [c.hash for c in state.candidates] == [c.hash for c in state.result.history]
    assert "<th>outcome</th>" in state._repr_html_()
    for _ in range(4):
        torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    assert ran[-1] == best.hash
    (made,) = [p for p in dynamo._MADE if p.only is not None and p.only.program is comp]
    assert made.only.ready is not None and made.only.ready.current() and made.only.ready.genome is comp.genome
    rows = TuningRecords(tmp_path).rows(comp.records_key)  # every candidate, recorded
    assert [r["hash"] for r in rows] == [f"{c.hash:016x}" for c in state.result.history]


def test_a_second_process_starts_with_the_cached_genome(tmp_path: Path) -> None:
    """The same program in a new process: the genome this one searched and cached, no search; results as before."""
    compiled = torch.compile(chain, backend="luminal_lab", options={**QUICK, "cache_dir": tmp_path})
    a, b = operands()
    torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(compiled)
    assert comp.last_search is not None
    first = f"{comp.genome.hash:016x}"
    script = textwrap.dedent(f"""
        import torch, luminal_lab as ll
        def chain(a, b):
            return (a * b + 1).sin().exp()
        options = {{**{QUICK!r}, "cache_dir": {str(tmp_path)!r}}}
        compiled = torch.compile(chain, backend="luminal_lab", options=options)
        a, b = torch.randn(64, 32), torch.randn(64, 32)
        torch.testing.assert_close(compiled(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
        (comp,) = ll.programs(compiled)
        print(comp.last_search is not None, f"{{comp.genome.hash:016x}}")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    searched, second = run.stdout.split()[-2:]
    assert searched == "False" and second == first
    assert len(TuningRecords(tmp_path).rows()) == len(comp.last_search.history)  # nothing measured again


def test_a_stale_record_is_not_used(tmp_path: Path) -> None:
    """A record whose choices are not this e-graph's (here: a tampered hash) is ignored, and the genome chosen
    again is recorded."""
    options = {"generations": 0, "cache_dir": tmp_path}
    torch.compile(chain, backend="luminal_lab", options=options)(*operands())
    records = TuningRecords(tmp_path)
    (stored,) = records.rows()
    assert stored["outcome"] == "unmeasured" and stored["seconds"] is None
    with sqlite3.connect(records.path) as connection:
        connection.execute("UPDATE records SET hash = ?", ("0" * 16,))
    connection.close()
    torch._dynamo.reset()
    compiled = torch.compile(chain, backend="luminal_lab", options=options)
    compiled(*operands())
    (comp,) = ll.programs(compiled)
    assert [r["hash"] for r in records.rows()] == ["0" * 16, stored["hash"]] == ["0" * 16, f"{comp.genome.hash:016x}"]


def test_a_build_that_takes_the_budget_leaves_the_most_fused_genome_unmeasured(tmp_path: Path) -> None:
    """The budget counts the build of the most-fused genome's kernels: past it no search starts, that genome runs and
    is recorded unmeasured; a budget the build leaves time of searches with what is left."""
    a, b = operands()
    tight = torch.compile(chain, backend="luminal_lab", options={**QUICK, "budget": 1e-9, "cache_dir": tmp_path})
    torch.testing.assert_close(tight(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(tight)
    assert comp.last_search is None and comp.genome.hash == comp.choice_space().fused_genome().hash
    (stored,) = TuningRecords(tmp_path).rows()
    assert stored["outcome"] == "unmeasured" and stored["hash"] == f"{comp.genome.hash:016x}"
    torch._dynamo.reset()
    roomy = torch.compile(chain, backend="luminal_lab", options={**QUICK, "cache_dir": False})
    roomy(a, b)
    (comp,) = ll.programs(roomy)
    assert comp.last_search is not None and comp.last_search.history[0].hash == comp.choice_space().fused_genome().hash


def test_a_program_new_to_the_records_starts_the_compile_workers_before_its_e_graph_saturates(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Their start-up (importing numba) then overlaps the saturation; a program the records hold starts none (and
    reads the saturation the first kept, saturating nothing)."""
    monkeypatch.setenv(cache.WORKERS_ENV, "2")
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "kernels"))
    monkeypatch.setattr(cache, "_WORKERS", cache._Workers(cache.compile_workers))
    running = []
    saturate = EGraph.saturate
    monkeypatch.setattr(EGraph, "saturate", lambda self, *a, **k: (
        running.append([w.poll() for w in cache._WORKERS.processes]), saturate(self, *a, **k))[1])
    options = {**QUICK, "cache_dir": tmp_path / "records"}
    a, b = operands()
    try:
        torch.testing.assert_close(torch.compile(chain, backend="luminal_lab", options=options)(a, b), chain(a, b),
                                   atol=1e-5, rtol=1e-5)
        assert running == [[None, None]]  # both running when the saturation began
        cache._WORKERS.close()
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(chain, backend="luminal_lab", options=options)(a, b), chain(a, b),
                                   atol=1e-5, rtol=1e-5)
        assert running == [[None, None]] and cache._WORKERS.processes == []  # its kernels were on disk too
    finally:
        cache._WORKERS.close()


def test_prepare_builds_the_plan_a_run_then_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    comp = ll.compile(chain, [torch.randn(64, 32), torch.randn(64, 32)])
    comp.prepare(*operands())
    built = []
    monkeypatch.setattr(CPURuntime, "_build", lambda self, bindings: built.append(bindings))
    a, b = operands()
    torch.testing.assert_close(comp.run(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    assert built == []  # the plan was built by prepare
    with pytest.raises(ll.ShapeError, match="input"):
        comp.prepare(torch.randn(3, 3), b)


def test_no_search_runs_the_most_fused_genome_and_fusion_can_be_off() -> None:
    a, b = operands()
    fused = torch.compile(chain, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    torch.testing.assert_close(fused(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(fused)
    assert comp.last_search is None and comp.genome.hash == comp.choice_space().fused_genome().hash
    assert len(find_regions(comp.llir())) == 1
    torch._dynamo.reset()
    plain = torch.compile(chain, backend="luminal_lab", options={"generations": 0, "fusion": False,
                                                                   "cache_dir": False})
    torch.testing.assert_close(plain(a, b), chain(a, b), atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(plain)
    assert not find_regions(comp.llir())


# ---- devices -------------------------------------------------------------------------------------
def adder() -> DynamoProgram:
    return DynamoProgram(torch.fx.symbolic_trace(lambda a, b: a + b), BackendOptions())


def test_inputs_on_two_devices_are_refused_by_name() -> None:
    with pytest.raises(ll.LuminalError) as info:
        adder().device_of([torch.ones(2), torch.ones(2, device="meta")])
    first = str(info.value).splitlines()[0]
    assert first.startswith("inputs on different devices (a on cpu, b on meta)")


def test_a_device_without_a_runtime_is_refused() -> None:
    with pytest.raises(ll.LuminalError, match=r"inputs on device meta: luminal_lab runs programs on \('cpu', 'cuda'\)"):
        adder().device_of([torch.ones(2, device="meta"), torch.ones(2, device="meta")])


@pytest.mark.skipif(GPU, reason="a GPU is present")
def test_cuda_without_a_gpu_raises_no_device_error() -> None:
    program = DynamoProgram(torch.fx.symbolic_trace(lambda a, b: a + b), BackendOptions(device="cuda"))
    with pytest.raises(ll.NoDeviceError, match="device='cuda' runs the generated CUDA C"):
        program.device_of([torch.ones(2), torch.ones(2)])
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        torch.compile(chain, backend="luminal_lab", options={"device": "cuda"})(*operands())
    assert isinstance(info.value.inner_exception, ll.NoDeviceError)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason=f"needs a CUDA GPU: {cuda_unavailable_reason()}")
def test_cuda_inputs_run_on_the_gpu_and_come_back_there() -> None:
    model = MLP(16, 32, 8).cuda().eval()
    (x,) = mlp_inputs(3, 16)
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0})
    with torch.no_grad():
        out = compiled(x.cuda())
        assert out.device.type == "cuda"
        torch.testing.assert_close(out, model(x.cuda()), atol=1e-4, rtol=1e-4)
        model.fc1.weight.add_(1.0)  # a parameter changed in place reaches the GPU on the next call
        torch.testing.assert_close(compiled(x.cuda()), model(x.cuda()), atol=1e-4, rtol=1e-4)
        # CPU inputs to a program asked to run on CUDA come back on the CPU
        torch._dynamo.reset()
        cpu_model = MLP(16, 32, 8).eval()
        on_gpu = torch.compile(cpu_model, backend="luminal_lab", options={"generations": 0, "device": "cuda"})
        result = on_gpu(x)
        assert result.device.type == "cpu"
        torch.testing.assert_close(result, cpu_model(x), atol=1e-4, rtol=1e-4)


# ---- parameters and buffers as weights -----------------------------------------------------------------
def shifted_pair() -> tuple[Shifted, Shifted, torch.nn.Module, torch.Tensor]:
    """A model, its eager twin (equal state), the model compiled without search, and an input."""
    model, twin = Shifted().eval(), Shifted().eval()
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    return model, twin, compiled, torch.randn(3, 8, generator=torch.Generator().manual_seed(2))


def test_parameters_and_buffers_changed_between_calls_are_seen() -> None:
    """Each change of a parameter or buffer (in place, by load_state_dict, a new Parameter, new memory) shows in
    the next call's output as in eager's, and the buffer the model counts in is written back."""
    model, twin, compiled, x = shifted_pair()
    changes = [
        lambda m: m.linear.weight.add_(1.0),
        lambda m: m.load_state_dict(Shifted(seed=1).state_dict()),
        lambda m: m.shift.mul_(-2.0),
        lambda m: setattr(m.linear, "bias", torch.nn.Parameter(torch.full((4,), 3.0))),
        lambda m: setattr(m.linear.weight, "data", torch.linspace(-1.0, 1.0, 32).reshape(4, 8)),
    ]
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
        for change in changes:
            change(model)
            change(twin)
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.calls, twin.calls)


def test_an_unchanged_parameter_is_not_copied_again() -> None:
    """After the first call only the input and the buffer the program mutates (an input too) are copied in, and a
    parameter again only once it changed."""
    model, twin, compiled, x = shifted_pair()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
        with mock.patch.object(CPURuntime, "_copy_in", autospec=True, side_effect=CPURuntime._copy_in) as copy_in:
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
            unchanged = sorted(call.args[2].name for call in copy_in.call_args_list)
            copy_in.reset_mock()
            model.linear.bias.add_(1.0)
            twin.linear.bias.add_(1.0)
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
            changed = sorted(call.args[2].name for call in copy_in.call_args_list)
    assert unchanged == ["l_self_buffers_calls_", "l_x_"]
    assert changed == ["l_self_buffers_calls_", "l_self_modules_linear_parameters_bias_", "l_x_"]


def test_a_static_program_is_called_through_its_ready_call() -> None:
    """Once dynamo's one static program has run, a call goes straight to the program's ready call (not through
    ``Compiled.run`` and its boundary), and still sees each input's values and each parameter changed in place or
    replaced, as eager does."""
    model, twin = MLP().eval(), MLP().eval()
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    changes = [lambda m: m.fc1.weight.mul_(-1.0), lambda m: setattr(m.fc2, "bias", torch.nn.Parameter(torch.ones(16)))]
    with torch.no_grad():
        (x,) = mlp_inputs()
        for _ in range(2):  # the program's second run makes its ready call
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
        (comp,) = ll.programs(compiled)
        assert comp.ready(x) is not None
        with mock.patch.object(ll.Compiled, "run", side_effect=AssertionError("called through Compiled.run")):
            for seed, change in enumerate(changes, 1):
                change(model)
                change(twin)
                (x,) = mlp_inputs(seed=seed)
                torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)


def test_a_hot_static_program_is_called_as_its_native_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once dynamo's one static program's ready call served ``HOT_CALLS`` calls, its native function is built in the
    background, and the calls after take it (neither the ready call nor ``Compiled.run``): they still see each
    input's values and each parameter changed in place or replaced, as eager does. A genome changed after it gives the
    calls back to ``Compiled.run``."""
    monkeypatch.setattr(calls, "HOT_CALLS", 3)
    model, twin = MLP().eval(), MLP().eval()
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    changes = [lambda m: m.fc1.weight.mul_(-1.0), lambda m: setattr(m.fc2, "bias", torch.nn.Parameter(torch.ones(16)))]
    with torch.no_grad():
        (x,) = mlp_inputs()
        for _ in range(5):  # the second run makes the ready call, whose third call starts the build
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
        (comp,) = ll.programs(compiled)
        (call,) = [p.only for p in dynamo._MADE if comp in p.programs.values()]
        assert call.native is None and call.building.result(timeout=600) is not None
        compiled(x)  # finds it built
        assert call.native is not None and call.building is None
        with mock.patch.object(ll.Compiled, "run", side_effect=AssertionError("called through Compiled.run")), \
                mock.patch.object(Ready, "__call__", side_effect=AssertionError("called through the ready call")):
            for seed, change in enumerate(changes, 1):
                change(model)
                change(twin)
                (x,) = mlp_inputs(seed=seed)
                result = compiled(x)
                assert result.dtype == torch.float32 and result.is_contiguous()
                torch.testing.assert_close(result, twin(x), atol=1e-5, rtol=1e-5)
        comp.genome = comp.random_genome(seed=1)
        with mock.patch.object(ll.Compiled, "run", wraps=comp.run) as run:
            torch.testing.assert_close(compiled(x), twin(x), atol=1e-5, rtol=1e-5)
        assert run.call_count == 1


def test_the_program_takes_the_inputs_and_holds_the_parameters_and_buffers_as_weights() -> None:
    _, _, compiled, x = shifted_pair()
    with torch.no_grad():
        compiled(x)
    (comp,) = ll.programs(compiled)
    # the buffer the model adds to in place stays an input, so the addition is written back to it
    assert comp.signature.inputs == ["l_self_buffers_calls_", "l_x_"]  # in dynamo's order
    assert [name for name, spec in comp.graph.inputs.items() if not spec.is_weight] == comp.signature.inputs
    assert {name: array.shape for name, array in comp.graph.weights.items()} == {
        "l_self_modules_linear_parameters_weight_": (4, 8), "l_self_modules_linear_parameters_bias_": (4,),
        "l_self_buffers_shift_": (4,)}
    assert not comp.llir().times
    profile = comp.profile()  # profiling and searching take the inputs alone
    assert profile.total > 0 and comp.llir().times == profile.kernels  # the LLIR stage shows the profile's times


def test_a_compiled_function_holds_the_buffers_of_the_module_it_calls_as_weights() -> None:
    """Whichever way dynamo reached the module (here a compiled function's closure), its buffers are weights, and
    one changed in place is seen on the next call."""
    model, twin = Shifted().eval(), Shifted().eval()
    compiled = torch.compile(lambda x: model(x) * 2, backend="luminal_lab",
                             options={"generations": 0, "cache_dir": False})
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), twin(x) * 2, atol=1e-5, rtol=1e-5)
        model.shift.mul_(-2.0)
        twin.shift.mul_(-2.0)
        torch.testing.assert_close(compiled(x), twin(x) * 2, atol=1e-5, rtol=1e-5)
    (comp,) = ll.programs(compiled)
    assert comp.signature.inputs == ["l_model_buffers_calls_", "l_x_"]
    assert sorted(comp.graph.weights) == ["l_model_buffers_shift_", "l_model_modules_linear_parameters_bias_",
                                          "l_model_modules_linear_parameters_weight_"]


# ---- from torch.compile to the workbench -------------------------------------------------------------
class Broken(torch.nn.Module):
    """Two graphs: dynamo breaks the graph at the print."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x).relu()
        print("a graph break")
        return (y * 2).sin()


def test_programs_reach_every_graph_of_a_module_and_open_in_the_workbench() -> None:
    model = Broken().eval()
    compiled = torch.compile(model, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    with pytest.raises(ll.LuminalError, match="no luminal_lab programs behind OptimizedModule yet"):
        ll.programs(compiled)
    x = torch.randn(4, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        for _ in range(2):  # a new input signature: a recompile, which runs in torch once, then a second program
            compiled(torch.randn(6, 8))
    found = ll.programs(compiled)
    assert len(found) == 4 and all(isinstance(comp, ll.Compiled) for comp in found)
    ops = [{node.op.value for node in comp.graph.nodes} for comp in found]
    # in the order made: the linear layer, the rest after the break; then both again for the new signature
    assert [("SumReduce" in o, "Sin" in o) for o in ops] == [(True, False), (False, True)] * 2
    assert found[0].pipeline() is not None and found[1].workbench() is not None
    # another instance of the class, of the same shapes, is served by the first one's graphs: it compiles nothing
    twin = Broken().eval()
    other = torch.compile(twin, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    with torch.no_grad():
        torch.testing.assert_close(other(x), twin(x), atol=1e-5, rtol=1e-5)
    assert ll.programs(other) == found


def test_programs_of_a_compiled_function_and_of_something_else() -> None:
    compiled = torch.compile(chain, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    compiled(*operands())
    (comp,) = ll.programs(compiled)
    assert comp.profile().total > 0
    with pytest.raises(TypeError, match=r"ll\.programs takes a torch\.compile-d module or function, not int"):
        ll.programs(3)


def test_programs_of_a_compiled_forward_method() -> None:
    """``model.forward = torch.compile(model.forward, ...)``, as for ``model.generate``: the frame dynamo compiles has
    the model as ``self``, which is the bound method's object."""
    model = MLP().eval()
    model.forward = torch.compile(model.forward, backend="luminal_lab", options={"generations": 0, "cache_dir": False})
    (x,) = mlp_inputs()
    with torch.no_grad():
        got = model(x)
    (comp,) = ll.programs(model.forward)
    torch.testing.assert_close(comp(x), (got,))  # a dynamo graph returns a tuple


def _logged(forward):
    """A decorator as transformers puts on its models' ``forward``: a ``wrapper(*args, **kwargs)`` whose code every
    decorated class shares, the model reaching it as ``args[0]``."""

    @functools.wraps(forward)
    def wrapper(*args, **kwargs):
        return forward(*args, **kwargs)

    return wrapper


class Decorated(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    @_logged
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


def test_models_with_a_decorated_forward_are_compiled_at_once_and_have_their_own_programs() -> None:
    """Only a recompile of the same frame for the same model runs in torch once: a second model whose forward is
    the same decorator's code (the first one still alive) is compiled on its first call, and its programs are its
    own; a third that dynamo serves with the first one's graph (same shapes) has the first one's programs."""
    models = Decorated(8).eval(), Decorated(12).eval(), Decorated(8).eval()
    options = {"generations": 0, "cache_dir": False}
    with torch.no_grad():
        for model in models:
            model.forward = torch.compile(model.forward, backend="luminal_lab", options=options)
            x = torch.randn(4, model.linear.in_features)
            expected = model.linear(x).relu()
            torch.testing.assert_close(model(x), expected)
    first, second, third = (ll.programs(model.forward) for model in models)
    assert len(first) == len(second) == 1 and first != second and third == first
    x = torch.randn(4, 12)
    torch.testing.assert_close(second[0](x), (models[1].linear(x).relu(),))  # the second model's weights


# ---- several models in one process -----------------------------------------------------------------
def test_models_compiled_one_after_another_all_match() -> None:
    """As in a notebook: a decoder layer, then a batch-norm model, then the first again, in one process."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()
    norm = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.ReLU()).eval()
    x, memory, y = torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.randn(4, 3)
    options = {"generations": 0, "cache_dir": False}
    with torch.no_grad():
        for model, inputs in ((layer, (x, memory)), (norm, (y,)), (layer, (x, memory))):
            compiled = torch.compile(model, backend="luminal_lab", options=options)
            torch.testing.assert_close(compiled(*inputs), model(*inputs), atol=1e-5, rtol=1e-5)
