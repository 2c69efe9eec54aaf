"""``%luminal`` / ``%%luminal``: in a real kernel through nbclient, and in-process for the argument checks."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

from luminal_lab.notebook.magic import _assignment_positions
from luminal_lab.runtime.cuda import cuda_unavailable_reason

KERNEL = "python3"
ROOT = Path(__file__).resolve().parents[2]
STAGES = ("HLIR:", "E-graph:", "LLIR:", "Regions:", "CUDA:")
ERROR = ["raises-exception"]

# (source, tags): the notebook the kernel tests execute, cell by cell
CELLS = {
    "load": ("%load_ext luminal_lab", []),
    "graph": ("""%%luminal
import numpy as np
import torch

import luminal_lab as ll

g = ll.Graph()
a = g.tensor((4, 8), name="a")
y = (a.exp() * 2.0).sin().output("y")
""", []),
    "check_graph": ("""xs = torch.randn(4, 8)
np.testing.assert_allclose(comp.run(xs).numpy(), np.sin(np.exp(xs.numpy()) * 2.0), rtol=1e-5, atol=1e-5)
print("graph matches numpy")""", []),
    "model": ("""model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
x = torch.randn(3, 8)
returned = %luminal --name mcomp model x""", []),
    "check_model": ("""assert returned is mcomp and comp is not mcomp
torch.testing.assert_close(mcomp.run(x), model(x))
print("module matches torch")""", []),
    "nothing": ("""%%luminal
n = 3
def f(v):
    return v
""", ERROR),
    "after_nothing": ("""print(n, f(2), type(comp).__name__, list(comp.graph.outputs), type(mcomp).__name__)""", []),
    "cuda": ("%%luminal --device cuda\nnever = 1\n", ERROR),
    "after_cuda": ("""print("never" in globals(), list(comp.graph.outputs))""", []),
    "raises": ("%%luminal --name broken\nboom = 1 / 0\n", ERROR),
    "after_raises": ("""print("broken" in globals(), "boom" in globals())""", []),
}


def _kernel_problem() -> str | None:
    """Why the ``python3`` kernel would not run this interpreter, or None when it does."""
    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    executable = spec.argv[0]
    # jupyter_client runs a bare "python" / "python3" / "python3.X" as the launching interpreter
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    if executable in bare or os.path.abspath(executable) == os.path.abspath(sys.executable):
        return None
    return (f"the {KERNEL!r} kernel ({spec.resource_dir}) runs {executable}, not {sys.executable}: "
            f"run `{sys.executable} -m ipykernel install --sys-prefix --name {KERNEL}` (make setup does)")


def _text(output: nbformat.NotebookNode) -> str:
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return f"{output.ename}: {output.evalue}"
    return output.get("data", {}).get("text/plain", "")


@pytest.fixture(scope="module")
def outputs() -> dict[str, list[nbformat.NotebookNode]]:
    """Execute ``CELLS`` in a fresh kernel; each cell's outputs by its key."""
    problem = _kernel_problem()
    if problem:
        pytest.fail(problem)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": tags}) for source, tags in CELLS.values()]
    NotebookClient(notebook, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(ROOT)}}).execute()
    return {key: cell.outputs for key, cell in zip(CELLS, notebook.cells)}


def _joined(outputs: list[nbformat.NotebookNode]) -> str:
    return "".join(_text(output) for output in outputs)


def _stages(outputs: list[nbformat.NotebookNode]) -> list[str]:
    """The first word of each displayed stage; each display also carries the stage JSON."""
    shown = [output for output in outputs if output.output_type == "display_data"]
    assert all("application/vnd.luminal-lab.stage+json" in output.data for output in shown)
    return [output.data["text/plain"].split(" ")[0] for output in shown]


@pytest.mark.slow
def test_cell_magic_compiles_the_graph_the_cell_defined(outputs) -> None:
    graph = outputs["graph"]
    assert graph[0].output_type == "stream"
    assert graph[0].text.startswith("comp = ll.compile(g)  # <Saturation saturated after ")
    assert _stages(graph) == list(STAGES)
    assert graph[1].data["text/plain"].endswith("| inputs a[4, 8] f32 | outputs y[4, 8] f32")
    assert _joined(outputs["check_graph"]) == "graph matches numpy\n"


@pytest.mark.slow
def test_line_magic_compiles_a_module_on_named_inputs(outputs) -> None:
    assert _joined(outputs["model"]).startswith("mcomp = ll.compile(model, (x,))  # <Saturation saturated after ")
    assert _stages(outputs["model"]) == list(STAGES)
    assert _joined(outputs["check_model"]) == "module matches torch\n"


@pytest.mark.slow
def test_nothing_to_compile_names_what_the_cell_defined_and_keeps_the_namespace(outputs) -> None:
    assert {(output.output_type, output.name) for output in outputs["nothing"]} == {("stream", "stderr")}
    # one message, though the kernel may send it in more than one stream chunk under load
    assert _joined(outputs["nothing"]).startswith(
        "UsageError: the cell defined n (int), f (function without example inputs); "
        "nothing to compile: define an ll.Graph with .output(...), or a torch.nn.Module")
    assert _joined(outputs["after_nothing"]) == "3 2 Compiled ['y'] Compiled\n"


@pytest.mark.slow
def test_cuda_without_a_gpu_fails_fast_with_the_no_device_reason(outputs) -> None:
    reason = cuda_unavailable_reason()
    if reason is None:
        pytest.skip("this machine has a CUDA GPU")
    assert {(output.output_type, output.name) for output in outputs["cuda"]} == {("stream", "stderr")}
    error = _joined(outputs["cuda"])  # one message, in one stream chunk or more
    assert error.startswith("UsageError: NoDeviceError: device='cuda' runs the generated CUDA C")
    assert reason in error
    assert _joined(outputs["after_cuda"]) == "False ['y']\n"  # the cell did not run, comp is the graph's


@pytest.mark.slow
def test_an_error_in_the_cell_shows_its_traceback_and_compiles_nothing(outputs) -> None:
    (error,) = outputs["raises"]
    assert error.output_type == "error" and error.ename == "ZeroDivisionError"
    assert any("boom = 1 / 0" in line for line in error.traceback)
    assert _joined(outputs["after_raises"]) == "False False\n"


# ---- in-process: the argument checks and the rules, without a kernel ---------------------------
@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    """IPython's in-process test shell with the extension loaded and ``g``, ``model``, ``x`` defined;
    the names the tests add are removed afterwards."""
    from IPython.testing import globalipapp

    ip = globalipapp.get_ipython()
    before = set(ip.user_ns)
    ip.run_line_magic("load_ext", "luminal_lab")
    ip.run_cell("import torch\nimport luminal_lab as ll\ng = ll.Graph()\nt = g.tensor((2, 3), name='t')\n"
                "(t * 2.0).output('u')\nmodel = torch.nn.Linear(3, 2)\nx = torch.randn(2, 3)\nk = 5", silent=True)
    yield ip
    for name in set(ip.user_ns) - before:
        del ip.user_ns[name]


@pytest.mark.parametrize(("line", "message"), [
    ("--search 0 g", "argument --search: needs at least 1 generation, got 0"),
    ("--search many g", "argument --search: 'many' is not a number of generations"),
    ("--device tpu g", "argument --device: invalid choice: 'tpu'"),
    ("--name 1st g", "--name '1st' is not a Python name"),
    ("", "name what to compile: %luminal model x"),
    ("nope x", "name 'nope' is not defined in the notebook"),
    ("model.fc x", "'model.fc' is not a name"),
    ("k", "k is not compilable (int): %luminal compiles an ll.Graph"),
    ("ll.Graph", "'ll.Graph' is not a name"),
    ("model", "model needs example inputs: %luminal model x"),
    ("model x x", "model does not take the 2 example input(s) x, x: too many positional arguments"),
    ("g x", "ArgumentError: ll.compile(example_inputs=(tensor("),
])
def test_line_magic_usage_errors(shell, line: str, message: str) -> None:
    with pytest.raises(UsageError) as error:
        shell.run_line_magic("luminal", line)
    assert message in str(error.value)


def test_a_class_is_not_a_program(shell) -> None:
    shell.user_ns["Linear"] = shell.user_ns["torch"].nn.Linear
    with pytest.raises(UsageError, match=r"Linear is not compilable \(the class Linear, not an instance\)"):
        shell.run_line_magic("luminal", "Linear x")


def test_cell_magic_usage_errors(shell) -> None:
    with pytest.raises(UsageError, match=r"the cell defined 2 graphs with outputs \(g1, g2\); name the one"):
        shell.run_cell_magic("luminal", "", "g1 = ll.Graph()\ng1.tensor((2,), name='p').output('q')\n"
                             "g2 = ll.Graph()\ng2.tensor((2,), name='p').output('q')\n")
    with pytest.raises(UsageError, match=r"defined 2 modules \(m1, m2\); .*: %%luminal m1 z"):
        shell.run_cell_magic("luminal", "", "m1 = torch.nn.ReLU()\nm2 = torch.nn.Tanh()\nz = torch.ones(2)\n")
    with pytest.raises(UsageError, match=r"the cell defined nothing; nothing to compile"):
        shell.run_cell_magic("luminal", "", "k = k\n")
    with pytest.raises(UsageError, match=r"defined r \(torch.nn.Module ReLU without example inputs\)"):
        shell.run_cell_magic("luminal", "", "r = torch.nn.ReLU()\n")


def test_a_graph_grown_through_a_graph_tensor_is_compiled(shell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_cell("h = ll.Graph().tensor((2,), name='p')")  # the graph has no name of its own
    shell.run_cell_magic("luminal", "--name grown", "(h + 1.0).output('q')\n")
    assert capsys.readouterr().out.startswith("grown = ll.compile(h.graph)  # <Saturation saturated")
    assert list(shell.user_ns["grown"].graph.outputs) == ["q"]
    shell.run_cell_magic("luminal", "--name regrown", "(t + 1.0).output('v')\n")
    assert capsys.readouterr().out.startswith("regrown = ll.compile(g)  # <Saturation saturated")
    assert list(shell.user_ns["regrown"].graph.outputs) == ["u", "v"]


def test_inputs_follow_the_cells_assignment_order(shell, capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_cell_magic("luminal", "--name two", "b = torch.ones(3)\n"
                         "def scale(a, b):\n    return a * b\n"
                         "a = torch.full((3,), 2.0)\n")
    assert capsys.readouterr().out.startswith("two = ll.compile(scale, (b, a))")
    assert shell.user_ns["two"].signature.inputs == ["a", "b"]  # the function's parameters, fed b then a
    assert shell.user_ns["two"].run(shell.user_ns["b"], shell.user_ns["a"]).tolist() == [2.0, 2.0, 2.0]


def test_assignment_positions() -> None:
    import ast

    tree = ast.parse("import numpy as np\nx = 1\ndef f():\n    inner = 2\nx, y = 3, 4\nclass C: pass\n")
    positions = _assignment_positions(tree)
    assert sorted(positions, key=positions.__getitem__) == ["np", "x", "f", "y", "C"]
    assert positions["x"] == (2, 0)
