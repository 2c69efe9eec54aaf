"""The package's layering (``luminal_lab.layers``): imports go down the pipeline, and models never import views.

Every module's syntax tree is walked, imports inside functions and under ``TYPE_CHECKING``
included, so no edge can hide in a lazy import.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import luminal_lab
from luminal_lab.layers import LAYERS, OPENERS

PACKAGE = Path(luminal_lab.__file__).parent
TYPE_CHECKING = "TYPE_CHECKING"  # the scope of an import under ``if TYPE_CHECKING:``
MODULE = ""  # the scope of a module-level import


@dataclass(frozen=True)
class Import:
    """``module`` imports ``target`` (a module of luminal_lab) at ``line``, in ``scope``: the qualified name of the
    enclosing function, ``MODULE`` or ``TYPE_CHECKING``."""

    module: str
    target: str
    scope: str
    line: int

    def __str__(self) -> str:
        where = {MODULE: "at module level", TYPE_CHECKING: "under TYPE_CHECKING"}.get(self.scope, f"in {self.scope}")
        return f"{self.module}:{self.line} imports {self.target} {where}"


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _imports(module: str) -> list[Import]:
    """Every import of a luminal_lab module that ``module`` makes, wherever it stands."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if _is_package(module) else module.rpartition(".")[0]
    found: list[Import] = []

    def resolve(node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(node: ast.AST, scope: str, names: tuple[str, ...]) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.body:
                visit(child, TYPE_CHECKING, names)
            for child in node.orelse:
                visit(child, scope, names)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = (*names, node.name)
            in_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or scope not in (MODULE,)
            for child in node.body:
                visit(child, ".".join(inner) if in_function or scope != MODULE else scope, inner)
            return
        if isinstance(node, ast.ImportFrom):
            base = resolve(node)
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                if target.startswith("luminal_lab"):
                    found.append(Import(module, target, scope, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend(Import(module, alias.name, scope, node.lineno) for alias in node.names
                         if alias.name.startswith("luminal_lab"))
        for child in ast.iter_child_nodes(node):
            visit(child, scope, names)

    for statement in tree.body:
        visit(statement, MODULE, ())
    return found


IMPORTS = [i for module in MODULES for i in _imports(module)]


ROOT = "(root)"  # the package root and its own modules: above every layer (what ``import luminal_lab`` gathers)


def _folder(module: str) -> str:
    """The layer a module belongs to: its folder, or ``ROOT`` for the package root's own modules."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(module)) else ROOT


def _rank(folder: str) -> int:
    return len(LAYERS) if folder == ROOT else LAYERS.index(folder)


def _upward(edge: Import) -> bool:
    """Whether ``edge`` imports a later layer, the package root included (type-only imports too)."""
    return _rank(_folder(edge.target)) > _rank(_folder(edge.module))


def _opener(edge: Import) -> bool:
    return any(edge.module == module and edge.target == target and edge.scope in (method, TYPE_CHECKING)
               for module, method, target in OPENERS)


def test_the_layers_are_the_package_folders() -> None:
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert folders == set(LAYERS)
    assert set(MODULES) >= {"luminal_lab.core.stage", "luminal_lab.runtime.base", "luminal_lab.notebook.magic"}


def test_the_walk_sees_function_level_and_type_checking_imports() -> None:
    scopes = {(i.module, i.target): i.scope for i in IMPORTS}
    assert scopes[("luminal_lab.egraph.egraph", "luminal_lab.notebook.stepper")] in ("EGraph.stepper", TYPE_CHECKING)
    assert ("luminal_lab.compiler.compiled", "luminal_lab.frontends.translate") in scopes
    assert any(i.scope == "compile" and i.target == "luminal_lab.frontends.translate" for i in IMPORTS)
    assert any(i.scope == TYPE_CHECKING for i in IMPORTS)


def test_no_module_imports_a_later_layer_except_the_listed_openers() -> None:
    wrong = [str(i) for i in IMPORTS if _upward(i) and not _opener(i)]
    assert not wrong, "imports against the pipeline order (luminal_lab.layers.LAYERS):\n" + "\n".join(wrong)


@pytest.mark.parametrize(("module", "method", "target"), OPENERS)
def test_each_listed_opener_is_a_lazy_import_in_its_method(module: str, method: str, target: str) -> None:
    scopes = {i.scope for i in IMPORTS if i.module == module and i.target == target}
    assert method in scopes, f"{module}: {method} does not import {target}"
    assert scopes <= {method, TYPE_CHECKING}, f"{module} imports {target} outside {method}: {scopes}"


def test_no_cycle_between_folders() -> None:
    graph: dict[str, set[str]] = {layer: set() for layer in (*LAYERS, ROOT)}
    for edge in IMPORTS:
        source, target = _folder(edge.module), _folder(edge.target)
        if source != target and not _opener(edge):
            graph[source].add(target)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"folders import each other: {' -> '.join(error.args[1])}")


def test_no_import_cycle_between_modules_at_import_time() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for edge in IMPORTS:
        if edge.scope == MODULE and edge.target != edge.module:
            graph[edge.module].add(edge.target)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        pytest.fail(f"modules import each other when loaded: {' -> '.join(error.args[1])}")


def _named_views() -> dict[str, set[str]]:
    """View module -> the modules of the stage classes that name it (``view_module = "..."`` in a class body)."""
    views: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if (isinstance(statement, ast.Assign) and [getattr(t, "id", None) for t in statement.targets]
                            == ["view_module"] and isinstance(statement.value, ast.Constant)):
                        views.setdefault(statement.value.value, set()).add(module)
    return views


def test_each_view_imports_its_model_and_no_model_imports_a_view() -> None:
    views = _named_views()
    assert set(views) == {"luminal_lab.hlir.view", "luminal_lab.egraph.view", "luminal_lab.llir.view",
                          "luminal_lab.llir.regions_view", "luminal_lab.codegen.cuda_view"}
    for view, models in views.items():  # each view draws the class it names, from that class's module
        assert models <= {i.target for i in IMPORTS if i.module == view}, f"{view} does not import {models}"
    models = set().union(*views.values())
    wrong = [str(i) for i in IMPORTS if i.module in models and i.target in views]
    assert not wrong, "models importing views:\n" + "\n".join(wrong)
    # in its own folder only other views use a view: a stage loads its view when first shown (Stage.view_module)
    for view in views:
        folder = _folder(view)
        users = [i for i in IMPORTS if i.target == view and _folder(i.module) == folder and i.module not in views]
        assert not users, f"{view} is imported by {[str(i) for i in users]}"


def test_importing_the_package_or_a_runtime_draws_nothing() -> None:
    """Nothing that draws or belongs to a notebook loads with the package or its runtimes: views load when a stage is
    first shown, widgets and magics when they are made."""
    code = ("import sys, luminal_lab, luminal_lab.runtime; "
            "print(sorted(m for m in ('graphviz', 'IPython', 'ipywidgets', 'matplotlib', 'anywidget') "
            "if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]", loaded


TESTS = Path(__file__).parent


def _forbidden_in_tests(name: str) -> bool:
    """A test module (``test_*``, anywhere) or a module of ``tests`` other than ``tests.helpers`` and its modules."""
    parts = name.split(".")
    outside_helpers = parts[0] == "tests" and parts[:2] != ["tests", "helpers"]
    return outside_helpers or any(part.startswith("test_") for part in parts)


def _test_suite_imports(path: Path) -> list[str]:
    """What a file of the test suite imports that it should not, as ``file:line imports name``; relative imports are
    resolved and function-level ones included, as for the package."""
    parts = path.relative_to(TESTS.parent).with_suffix("").parts
    package = list(parts[:-1])  # a module's package, and an __init__'s own
    wrong = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names = [module if alias.name == "*" else f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        wrong.extend(f"{path.relative_to(TESTS.parent)}:{node.lineno} imports {name}" for name in names
                     if _forbidden_in_tests(name))
    return wrong


def test_no_test_module_imports_another_only_tests_helpers() -> None:
    files = sorted(TESTS.rglob("*.py"))
    folders = {path.parent.name for path in files if path.parent != TESTS}
    assert folders >= {*LAYERS, "extension", "helpers"}, f"the walk missed test folders: {sorted(folders)}"
    wrong = [line for path in files for line in _test_suite_imports(path)]
    assert not wrong, ("test modules share code through tests/helpers/ (fixtures through a conftest.py), never by "
                       "importing each other:\n" + "\n".join(wrong))
