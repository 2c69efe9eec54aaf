"""The package's folders in pipeline order, and the only imports allowed to go against it.

A module imports only from its own folder or from folders earlier in ``LAYERS`` (the package
root, ``luminal_lab/__init__.py``, is the public face and may import any of them). The one kind
of upward import allowed is a lazy convenience method that opens a notebook widget over an
object of a lower layer; ``OPENERS`` lists every one of them as ``(module, method, what it
imports)``, and such an import sits inside that method (or, for its return annotation, under
``TYPE_CHECKING``). ``tests/test_layers.py`` walks every module's syntax tree, function-level
imports included, and fails on any other upward import, on a cycle between folders or between
modules, and on a model importing its view. ``draw`` is what the stages' views share (Graphviz styles, ``Picture``):
presentation, kept out of ``core``.
"""

LAYERS = ("core", "draw", "hlir", "frontends", "egraph", "llir", "codegen", "runtime", "search", "compiler", "notebook")

OPENERS = (
    ("luminal_lab.egraph.egraph", "EGraph.stepper", "luminal_lab.notebook.stepper"),
    ("luminal_lab.egraph.egraph", "EGraph.inspector", "luminal_lab.notebook.inspector"),
    ("luminal_lab.compiler.compiled", "Compiled.profiler", "luminal_lab.notebook.profiler"),
    ("luminal_lab.compiler.compiled", "Compiled.workbench", "luminal_lab.notebook.workbench"),
    ("luminal_lab.compiler.compiled", "Compiled.report", "luminal_lab.notebook.report"),
)
